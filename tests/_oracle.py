"""Oracle tests cannot vanish in CI. An oracle test compares our code with a reference we
do not own (bfcl-eval's checker and `bfcl evaluate`, the seed lab's code); on a machine
without that reference it skips, saying what to install. Under `AGENTEVAL_CI=1` (which
`.ci/run` exports) the same missing oracle fails the test instead, with the same reason,
so a broken install cannot turn a parity test into a silent skip.

Inside a test or fixture, call `require_oracle(reason)`. For a whole module, write an
autouse module-scoped fixture that calls it (module scope, so that it runs before the
module's other module-scoped fixtures, which would need the oracle)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

CI_VARIABLE = "AGENTEVAL_CI"


def in_ci() -> bool:
    """True when oracle tests must run: `AGENTEVAL_CI=1`."""
    return os.environ.get(CI_VARIABLE, "") == "1"


def require_oracle(reason: str) -> NoReturn:
    """The oracle is missing: skip with `reason`, or under AGENTEVAL_CI=1 fail with it.
    Reported at the caller's line, not this one's."""
    __tracebackhide__ = True
    if in_ci():
        pytest.fail(f"{reason} ({CI_VARIABLE}=1: an oracle test may not skip)", pytrace=False)
    pytest.skip(reason)
