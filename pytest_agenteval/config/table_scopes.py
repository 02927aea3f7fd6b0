"""Where a suite-specific option has an effect (`Option.applies_to`, by `suite_tag`)."""

from __future__ import annotations

AIME = ("aime25:retool", "aime25:text-only")
RETOOL = ("aime25:retool",)
AGENT = ("aime25:retool", "gaia")  # the tool loops: retool and the GAIA default agent
