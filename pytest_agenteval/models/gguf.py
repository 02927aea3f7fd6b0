"""A gguf file's scalar metadata (`general.type`, `general.architecture`, ...) read from its
header only. gguf's own GGUFReader parses the whole file (2 s for the 100 MB SmolLM2, most
of it the vocabulary arrays) and is not installed with llama-cpp-python; a choice made at
every start-up reads the first few keys and stops (tests/serving/test_gguf_adapter.py
checks it against GGUFReader)."""

from __future__ import annotations

import struct
from collections.abc import Collection
from pathlib import Path
from typing import IO, Any

MAGIC = b"GGUF"
STRING, ARRAY = 8, 9
# GGUFValueType -> struct format of its scalars
SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}


class GgufHeaderError(ValueError):
    """Not a gguf file (or a truncated one); the message names the file."""


def _read(handle: IO[bytes], fmt: str) -> Any:
    size = struct.calcsize(fmt)
    raw = handle.read(size)
    if len(raw) != size:
        raise EOFError
    return struct.unpack(fmt, raw)[0]


def _string(handle: IO[bytes]) -> str:
    length = _read(handle, "<Q")
    raw = handle.read(length)
    if len(raw) != length:
        raise EOFError
    return raw.decode("utf-8", "replace")


def _skip(handle: IO[bytes], kind: int) -> None:
    if kind == STRING:
        handle.seek(_read(handle, "<Q"), 1)
    elif kind == ARRAY:
        item, count = _read(handle, "<I"), _read(handle, "<Q")
        if item in SCALARS:
            handle.seek(struct.calcsize(SCALARS[item]) * count, 1)
        else:
            for _ in range(count):
                _skip(handle, item)
    elif kind in SCALARS:
        handle.seek(struct.calcsize(SCALARS[kind]), 1)
    else:
        raise EOFError  # an unknown type: the file is not one we can read


def gguf_metadata(path: Path, keys: Collection[str]) -> dict[str, Any]:
    """The values of `keys` (strings and scalars) found in the header of the gguf `path`;
    a key it lacks is absent. Stops reading once it has them all."""
    wanted = set(keys)
    found: dict[str, Any] = {}
    try:
        with open(path, "rb") as handle:
            if handle.read(4) != MAGIC:
                raise GgufHeaderError(f"{path} is not a gguf file (no GGUF magic)")
            version = _read(handle, "<I")
            if version < 2:
                raise GgufHeaderError(f"{path}: gguf version {version} is too old; convert it again")
            _read(handle, "<Q")  # tensor count
            for _ in range(_read(handle, "<Q")):
                if wanted <= found.keys():
                    break
                key = _string(handle)
                kind = _read(handle, "<I")
                if key in wanted and kind == STRING:
                    found[key] = _string(handle)
                elif key in wanted and kind in SCALARS:
                    found[key] = _read(handle, SCALARS[kind])
                else:
                    _skip(handle, kind)
    except EOFError:
        raise GgufHeaderError(f"{path}: the gguf header is truncated or unreadable") from None
    return found


def gguf_general_type(path: Path) -> str:
    """`general.type` of a gguf: "adapter" for a LoRA, "model" (also when absent) for weights."""
    return str(gguf_metadata(path, ["general.type"]).get("general.type", "model"))
