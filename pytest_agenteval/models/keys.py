"""API keys from the environment: the one place a key is read and checked.

A key mounted from a file usually ends in a newline: surrounding whitespace is stripped.
A key with a control character (or any character an HTTP header cannot carry) inside is
refused with one line that names the variable and never the value: sent as
`Authorization: Bearer <key>`, the HTTP libraries' own refusal would print the header."""

from __future__ import annotations

import os


class ApiKeyError(ValueError):
    """The variable holds a key no HTTP header can carry; the message names only the variable."""


def api_key_from_env(name: str) -> str | None:
    """The key in environment variable `name`, stripped; None when unset or blank.
    Raises ApiKeyError when what is left is not printable ASCII (inner spaces allowed)."""
    key = os.environ.get(name, "").strip() if name else ""
    if not key:
        return None
    if not all(" " <= char <= "~" for char in key):
        raise ApiKeyError(
            f"{name} holds a control or non-ASCII character inside the API key, which an HTTP "
            f"header cannot carry; set {name} to the key alone"
        )
    return key
