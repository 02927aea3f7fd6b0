"""What an `--endpoint` server says about the model it serves, as part of the generation
cache's key.

The server is asked once, at start-up on the controller (`GET /v1/models`, the request
that checks `--model-name`); the entry of the served name, less the fields that change
with every request, goes into the key. New weights served behind the same URL and name
(step-200 after step-100, both as `policy`) then miss the cache instead of receiving the
old weights' generations. xdist workers get the entries through workerinput, never ask
again: the key is the same in every process."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

# Fields that change with every request, not with the weights (vLLM's `created` is the
# time of the request, its `permission` ids are fresh each time).
VOLATILE = frozenset({"object", "created", "permission"})
# Fields that do not tell two checkpoints of one training run apart: the name, the owner,
# the context, and llama.cpp's `meta` (parameter count, vocabulary, embedding width, file
# size: the same for step-100 and step-200). They stay in the key (they differ between
# models), but only the rest (vLLM's and SGLang's `root`, the weights path; `parent`)
# counts as naming the weights.
GENERIC = frozenset({"id", "owned_by", "max_model_len", "meta"})

Reported = Sequence[Mapping[str, Any] | None]  # one entry per endpoint, None: not listed


def model_entry(entries: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any] | None:
    """The served name's /v1/models entry, less its volatile fields; None if not listed."""
    for entry in entries:
        if str(entry.get("id")) == name:
            return {k: v for k, v in entry.items() if k not in VOLATILE}
    return None


def reported_fingerprint(reported: Reported) -> str:
    """The key's fingerprint of an `--endpoint` model: sha256 over what every endpoint
    reports ("" when none reported anything: the key stays as it was before)."""
    if not any(reported):
        return ""
    canonical = json.dumps(list(reported), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def identifies_weights(reported: Reported) -> bool:
    """Whether every endpoint reports something about its weights beyond the name."""
    return bool(reported) and all(
        entry is not None and any(v not in (None, "", {}, []) for k, v in entry.items() if k not in GENERIC)
        for entry in reported
    )


def identity_warning(
    endpoints: Sequence[str], reported: Reported, name: str, revision: str, cache_on: bool
) -> str | None:
    """One start-up line when the cache is on and nothing identifies the weights."""
    if not cache_on or revision or identifies_weights(reported):
        return None
    unlisted = [url for url, entry in zip(endpoints, reported, strict=False) if entry is None]
    said = (
        f"{(unlisted or list(endpoints))[0]} does not list {name!r} at /v1/models"
        if unlisted or not reported
        else f"/v1/models says nothing about the weights behind {name!r}"
    )
    urls = " and ".join(endpoints)
    return (
        f"the generation cache cannot tell which weights answer: {said}, so its key holds the "
        f"endpoint URL: the cache is shared only by runs against {urls}, and other weights served "
        "there under the same name would get these cached generations; pass --model-revision "
        "TEXT naming the weights (e.g. the checkpoint step), or --agenteval-no-cache"
    )
