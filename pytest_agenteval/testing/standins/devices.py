"""The stand-ins' GPUs: K devices named in the folder's `standin.json`, each held by at most
one stand-in server (an flock on `.gpu-locks/<id>.lock`, released when its holder exits, however
it exits), `CUDA_VISIBLE_DEVICES` read as CUDA reads it, and an `nvidia-smi` that reports them."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

STATE_FILE = "standin.json"
LOCKS = ".gpu-locks"
GPU_NAME = "NVIDIA H100 80GB HBM3"
MEMORY_MIB = 81559  # what nvidia-smi reports for an H100 80GB
HELD_MIB = 73400  # a stand-in holds about 0.9 of it, as vLLM's default --gpu-memory-utilization does


class DeviceError(RuntimeError):
    """No device to run on: the line is printed as vLLM or SGLang print theirs."""


def read_state(folder: Path) -> dict[str, Any]:
    try:
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {"gpus": 0}
    return state if isinstance(state, dict) else {"gpus": 0}


def visible_devices(gpus: int, env: Mapping[str, str]) -> list[int]:
    """The device ids a process sees: `CUDA_VISIBLE_DEVICES` (ids, in its order, up to the
    first invalid one, as CUDA reads it), else all of them."""
    text = env.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return list(range(gpus))
    seen: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) >= gpus or int(part) in seen:
            break  # CUDA stops at the first id it cannot use
        seen.append(int(part))
    return seen


def _lock_path(folder: Path, device: int) -> Path:
    return folder / LOCKS / f"{device}.lock"


def holder(folder: Path, device: int) -> int | None:
    """The pid of the stand-in holding `device`, or None when it is free."""
    path = _lock_path(folder, device)
    if not path.exists():
        return None
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            text = handle.read().strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def acquire(folder: Path, devices: list[int]) -> list[Any]:
    """Hold `devices` for this process's life (the open locked files); raise DeviceError
    naming the first one another stand-in holds."""
    (folder / LOCKS).mkdir(parents=True, exist_ok=True)
    held: list[Any] = []
    for device in devices:
        handle = open(_lock_path(folder, device), "a+", encoding="utf-8")  # noqa: SIM115 - held
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            other = handle.read().strip() or "?"
            handle.close()
            for other_handle in held:
                other_handle.close()
            raise DeviceError(
                f"ValueError: Free memory on device cuda:{device} "
                f"({(MEMORY_MIB - HELD_MIB) / 1024:.2f}/{MEMORY_MIB / 1024:.2f} GiB) on startup is less "
                f"than desired GPU memory utilization (0.9, {MEMORY_MIB * 0.9 / 1024:.2f} GiB). Decrease "
                "GPU memory utilization or reduce GPU memory used by other processes. "
                f"(stand-in: GPU {device} is held by stand-in pid {other})"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        held.append(handle)
    return held


def claim(folder: Path, world_size: int, env: Mapping[str, str]) -> tuple[list[int], list[Any]]:
    """The first `world_size` visible devices, held; DeviceError where there are too few
    or one is busy."""
    gpus = int(read_state(folder).get("gpus", 0))
    devices = visible_devices(gpus, env)
    if not devices:
        raise DeviceError("RuntimeError: No CUDA GPUs are available")
    if world_size > len(devices):
        raise DeviceError(
            f"ValueError: World size ({world_size}) is larger than the number of available GPUs "
            f"({len(devices)}) in this node. If this is intentional and you are using: - ray, set "
            "'--distributed-executor-backend ray'."
        )
    chosen = devices[:world_size]
    return chosen, acquire(folder, chosen)


# -- nvidia-smi ---------------------------------------------------------------------------
QUERY_FIELDS = {
    "index": lambda d, used: str(d),
    "name": lambda d, used: GPU_NAME,
    "uuid": lambda d, used: f"GPU-00000000-0000-0000-0000-{d:012d}",
    "memory.total": lambda d, used: f"{MEMORY_MIB} MiB",
    "memory.used": lambda d, used: f"{used} MiB",
    "memory.free": lambda d, used: f"{MEMORY_MIB - used} MiB",
    "utilization.gpu": lambda d, used: f"{100 if used else 0} %",
    "driver_version": lambda d, used: "580.95.05",
    "count": lambda d, used: "",  # filled in below
}


def nvidia_smi(folder: Path, argv: list[str], out: Any = sys.stdout) -> int:
    """`nvidia-smi`, `-L`, `--query-gpu=FIELDS --format=csv[,noheader][,nounits]` over the
    folder's K devices (a device a stand-in holds shows its memory used)."""
    parser = argparse.ArgumentParser(prog="nvidia-smi", add_help=False)
    parser.add_argument("-L", "--list-gpus", action="store_true")
    parser.add_argument("--query-gpu")
    parser.add_argument("--format", default="csv")
    parser.add_argument("-i", "--id")
    args, _ = parser.parse_known_args(argv)
    gpus = int(read_state(folder).get("gpus", 0))
    if gpus == 0:
        out.write("No devices were found\n")
        return 6
    devices = [int(i) for i in args.id.split(",")] if args.id else list(range(gpus))
    used = {d: HELD_MIB if holder(folder, d) is not None else 0 for d in devices}
    if args.list_gpus:
        for d in devices:
            out.write(f"GPU {d}: {GPU_NAME} (UUID: {QUERY_FIELDS['uuid'](d, 0)})\n")
        return 0
    if args.query_gpu:
        fields = [f.strip() for f in args.query_gpu.split(",") if f.strip()]
        unknown = [f for f in fields if f not in QUERY_FIELDS]
        if unknown:
            out.write(f'Field "{unknown[0]}" is not a valid field to query.\n')
            return 2
        options = args.format.split(",")
        if "noheader" not in options:
            out.write(", ".join(f"{f} [MiB]" if f.startswith("memory") else f for f in fields) + "\n")
        for d in devices:
            values = [str(gpus) if f == "count" else QUERY_FIELDS[f](d, used[d]) for f in fields]
            if "nounits" in options:
                values = [v.removesuffix(" MiB").removesuffix(" %") for v in values]
            out.write(", ".join(values) + "\n")
        return 0
    out.write("+ NVIDIA-SMI 580.95.05 (pytest-agenteval stand-in) +\n")
    for d in devices:
        out.write(f"|  {d}  {GPU_NAME}  |  {used[d]}MiB / {MEMORY_MIB}MiB  |\n")
    return 0
