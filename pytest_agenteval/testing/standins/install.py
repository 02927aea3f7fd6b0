"""Write the stand-ins into a folder: `bin/vllm` and `bin/nvidia-smi` (executables; put
`DIR/bin` first on PATH), the importable `vllm` and `sglang.launch_server` with their
dist-info (put `DIR` first on PYTHONPATH), and `standin.json` (the device count and the
default start-up delay, fatal error and answers). `env.sh` sets both paths."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agenteval.testing.standins.argv import SGLANG_VERSION, VLLM_VERSION
from pytest_agenteval.testing.standins.devices import LOCKS, STATE_FILE

LOCAL = "+agenteval.standin"  # the version's local label: results of a rehearsal say so
PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # where this pytest_agenteval lives


@dataclass(frozen=True)
class Standins:
    """An installed stand-in folder."""

    folder: Path

    @property
    def bin(self) -> Path:
        return self.folder / "bin"

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """`base` (default: os.environ) with `bin` first on PATH and the folder first on
        PYTHONPATH."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = os.pathsep.join(p for p in (str(self.bin), env.get("PATH", "")) if p)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.folder), env.get("PYTHONPATH", "")) if p)
        return env


def _shim(folder: Path, call: str) -> str:
    """Python that runs `call` with the folder known; the package is found as the caller's
    environment finds it, else where it was installed from."""
    return (
        "import sys\n"
        "from pathlib import Path\n"
        f"sys.path.append({str(PACKAGE_ROOT)!r})\n"
        f"FOLDER = Path({str(folder)!r})\n"
        f"{call}\n"
    )


def _write(path: Path, text: str, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _dist_info(folder: Path, name: str, version: str) -> None:
    for old in folder.glob(f"{name}-*.dist-info"):
        shutil.rmtree(old)
    info = folder / f"{name}-{version}.dist-info"
    _write(info / "METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    _write(info / "top_level.txt", f"{name}\n")
    _write(info / "RECORD", "")


def install(
    folder: str | os.PathLike[str],
    gpus: int,
    *,
    delay_s: float = 0.0,
    fatal: str | None = None,
    script: str | None = None,
    answer: str | None = None,
    gguf: str | os.PathLike[str] | None = None,
) -> Standins:
    """Write (or rewrite) the stand-ins into `folder` for `gpus` devices. `script`
    (`module:attr`, a responder), `answer` (a reply template) or `gguf` (llama.cpp on that
    file) decide the answers; AGENTEVAL_STANDIN_* variables override them per launch."""
    if gpus < 0:
        raise ValueError(f"--gpus must be >= 0, got {gpus}")
    root = Path(folder).resolve()
    root.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {"gpus": gpus, "delay_s": delay_s, "fatal": fatal, "script": script}
    state.update(answer=answer, gguf=str(Path(gguf).resolve()) if gguf else None)
    _write(root / STATE_FILE, json.dumps({k: v for k, v in state.items() if v is not None}, indent=1) + "\n")
    (root / LOCKS).mkdir(exist_ok=True)
    python = f"#!{sys.executable}\n"
    launch = "from pytest_agenteval.testing.standins.launch import vllm_main, sglang_main"
    vllm = f"{launch}\nsys.exit(vllm_main(FOLDER, sys.argv[1:]))"
    _write(root / "bin" / "vllm", python + _shim(root, vllm), True)
    smi = "from pytest_agenteval.testing.standins.devices import nvidia_smi\n"
    smi += "sys.exit(nvidia_smi(FOLDER, sys.argv[1:]))"
    _write(root / "bin" / "nvidia-smi", python + _shim(root, smi), True)
    vllm_version, sglang_version = VLLM_VERSION + LOCAL, SGLANG_VERSION + LOCAL
    note = '"""pytest-agenteval stand-in (python -m pytest_agenteval.testing.standins)."""\n'
    _write(root / "vllm" / "__init__.py", f"{note}__version__ = {vllm_version!r}\n")
    _write(root / "sglang" / "__init__.py", f"{note}__version__ = {sglang_version!r}\n")
    sglang = f'if __name__ == "__main__":\n    {launch}\n    sys.exit(sglang_main(FOLDER, sys.argv[1:]))'
    _write(root / "sglang" / "launch_server.py", note + _shim(root, sglang))
    _dist_info(root, "vllm", vllm_version)
    _dist_info(root, "sglang", sglang_version)
    _write(
        root / "env.sh",
        f'export PATH="{root / "bin"}:$PATH"\nexport PYTHONPATH="{root}${{PYTHONPATH:+:$PYTHONPATH}}"\n',
    )
    return Standins(root)
