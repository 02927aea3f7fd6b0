"""Whether the Hugging Face hub answers, asked once with a short timeout before the
datasets library is, whose retries and per-attempt timeouts take half a minute (or
minutes, where packets are dropped) before it says the hub is unreachable."""

from __future__ import annotations

import os
import urllib.error
import urllib.request

PROBE_TIMEOUT_S = 5.0
DEFAULT_ENDPOINT = "https://huggingface.co"


def offline_requested() -> bool:
    """The user asked for cached copies only (the libraries' own switches)."""
    return any(
        os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def hub_unreachable(timeout: float | None = None) -> str | None:
    """None when the hub endpoint answers HTTP at all (any status); else why not, in a
    few words. Proxies from the environment are used, as the datasets library uses them.
    `timeout`: PROBE_TIMEOUT_S, read when it asks."""
    timeout = PROBE_TIMEOUT_S if timeout is None else timeout
    endpoint = os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")
    try:
        urllib.request.urlopen(
            urllib.request.Request(f"{endpoint}/api/whoami-v2", method="HEAD"), timeout=timeout
        )
    except urllib.error.HTTPError:
        return None  # an answer, even 401: the hub is there
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        text = f"no answer in {timeout:g} s" if "timed out" in str(reason) else str(reason)
        return f"{endpoint}: {text}"
    return None
