"""Reading an offline W&B run's `.wandb` file. wandb 0.31 reads it in its Go core only
(the Python `DataStore` is gone), so this reads the framing wandb documents (LevelDB's
log format: 32 KiB blocks of records, each a 7-byte header: CRC-32, length, type; the
file starts with `:W&B`, a magic and a version) and decodes each record with wandb's own
protobuf classes (`wandb.proto.wandb_internal_pb2.Record`)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

_BLOCK = 32768
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a .wandb file"
    position, out, pending = _HEADER, [], b""
    while position + _HEADER <= len(data):
        left = _BLOCK - position % _BLOCK
        if left < _HEADER:  # the block's tail is padding
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + _HEADER])
        if length == 0 and kind == 0:
            break
        body = data[position + _HEADER : position + _HEADER + length]
        position += _HEADER + length
        if kind == _FULL:
            out.append(body)
        elif kind == _FIRST:
            pending = body
        elif kind == _MIDDLE:
            pending += body
        elif kind == _LAST:
            out.append(pending + body)
    return out


def history(path: Path) -> list[dict[str, Any]]:
    """Each history row of the run: {key: value} with `_step`."""
    from wandb.proto.wandb_internal_pb2 import Record

    rows = []
    for raw in records(path):
        record = Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == "history":
            row = {
                item.key or "/".join(item.nested_key): json.loads(item.value_json)
                for item in record.history.item
            }
            if record.history.HasField("step"):
                row["_step"] = record.history.step.num
            rows.append(row)
    return rows


def config(path: Path) -> dict[str, Any]:
    from wandb.proto.wandb_internal_pb2 import Record

    found: dict[str, Any] = {}
    for raw in records(path):
        record = Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        items = (
            record.config.update if kind == "config" else record.run.config.update if kind == "run" else []
        )
        for item in items:
            found[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return found
