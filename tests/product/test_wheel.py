"""The installed product end to end (issue 33): build the wheel, install it into a fresh
virtual environment outside the checkout (no llama.cpp), start the package's own test
server from it, and from empty folders:

- run AIME25 (text-only, with and without `-n 2`) and BFCL (`-m irrelevance`) by name;
- rerun them from another empty folder, with `--dataset-path X` and `--dataset-path=X`:
  0 new requests (the cache is the user's, not the rootdir's);
- run `pytest-agenteval list`;
- and find no warning line in any of it.

Where the wheel's dependencies come from:
- by default, from this test run's own environment: the wheel goes in with `--no-deps` and a
  `.pth` file puts this environment's site-packages after the fresh venv's own (about 10 s,
  so it runs in every test run). What the wheel ships (the suites, the plugin's entry point,
  the console script) is then all the checkout-free code there is;
- with `AGENTEVAL_WHEEL_TEST=pypi`, from PyPI (or pip's cache) as a user's `pip install`
  resolves them, `bfcl-eval==2026.3.23 --no-deps` for BFCL's data: the declared dependencies
  are enough (about 2 minutes with a warm pip cache)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from tests.conftest import TINY_PROBLEMS, write_jsonl

REPO = Path(__file__).resolve().parents[2]
FROM_PYPI = os.environ.get("AGENTEVAL_WHEEL_TEST") == "pypi"
PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
WARNING = re.compile(r"Warning\b|WARNING|warnings summary")


def _sh(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode in (0, 1), f"{' '.join(command)} exited {done.returncode}:\n{output[-3000:]}"
    return output


def _copy_checkout(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)


def test_the_wheel_runs_the_suites_by_name_from_empty_folders(tmp_path: Path) -> None:
    timings: dict[str, float] = {}
    start = time.monotonic()
    source, dist, venv = tmp_path / "src", tmp_path / "dist", tmp_path / "venv"
    _copy_checkout(source)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AGENTEVAL_CACHE_DIR")}
    env = {k: v for k, v in env.items() if not k.startswith("PYTEST_") and k != "VIRTUAL_ENV"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "user-cache")  # the user cache folder of this "user"
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    env["HF_HUB_OFFLINE"] = env["HF_DATASETS_OFFLINE"] = "1"
    # the wheel from the project's build backend (pyproject's setuptools.build_meta), called
    # once in one process: `pip wheel` asks the same backend for the same wheel, but in a
    # process per hook and with the metadata built twice (measured: 3 times the CPU)
    assert 'build-backend = "setuptools.build_meta"' in (source / "pyproject.toml").read_text()
    build = f"from setuptools import build_meta; build_meta.build_wheel({str(dist)!r})"
    _sh([sys.executable, "-c", build], source, env)
    (wheel,) = dist.glob("pytest_agenteval-*.whl")
    timings["build the wheel"] = time.monotonic() - start
    # no pip of its own (ensurepip costs seconds): this pip installs into it (`--python`)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    bin_ = venv / "bin"
    pip = [sys.executable, "-m", "pip", "--python", str(bin_ / "python"), "install", "-q"]
    if FROM_PYPI:
        _sh([*pip, str(wheel)], tmp_path, env)
        _sh([*pip, "--no-deps", "bfcl-eval==2026.3.23"], tmp_path, env)
    else:
        _sh([*pip, "--no-deps", str(wheel)], tmp_path, env)
        ours = _sh([str(bin_ / "python"), "-c", PURELIB], tmp_path, env).strip()
        sites = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
        Path(ours, "zz-dependencies.pth").write_text("".join(f"{s}\n" for s in sites))  # after its own
    timings["install it in a fresh venv"] = time.monotonic() - start - timings["build the wheel"]
    where = _sh(
        [str(bin_ / "python"), "-c", "import pytest_agenteval; print(pytest_agenteval.__file__)"],
        tmp_path,
        env,
    )
    assert str(venv) in where and str(REPO) not in where  # the wheel's code, not the checkout's

    (tmp_path / "data").mkdir()
    data = write_jsonl(tmp_path / "data" / "aime.jsonl", TINY_PROBLEMS)
    log = tmp_path / "requests.jsonl"
    server = subprocess.Popen(
        [str(bin_ / "python"), "-m", "pytest_agenteval.testing.openai_server", "--answer", "\\boxed{70}"]
        + ["--log", str(log)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = server.stdout.readline().split()[-1]  # "LISTENING http://127.0.0.1:<port>/v1"
        outputs = []

        def requests() -> int:
            return len(log.read_text().splitlines()) if log.exists() else 0

        def run(folder: str, *args: str) -> int:
            cwd = tmp_path / folder
            cwd.mkdir(exist_ok=True)
            before = requests()
            outputs.append(_sh([str(bin_ / "python"), "-m", "pytest", *args, f"--endpoint={url}"], cwd, env))
            return requests() - before

        aime = ("--pyargs", "pytest_agenteval.suites.aime25", "--mode", "text-only", "--val-n", "2")
        bfcl = ("--pyargs", "pytest_agenteval.suites.bfcl", "-m", "irrelevance", "--limit", "3")
        relative = os.path.relpath(data, tmp_path / "b")
        began = time.monotonic()
        first = [run("a", *aime, f"--dataset-path={data}", "-n", "2"), run("a", *bfcl)]
        again = [
            run("b", *aime, "--dataset-path", relative),  # pytest then takes ../data as the rootdir
            run("c", *aime, f"--dataset-path={relative}"),
            run("b", *bfcl),
        ]
        timings["5 runs"] = time.monotonic() - began
        listed = _sh([str(bin_ / "pytest-agenteval"), "list"], tmp_path / "c", env)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert first == [8, 3] and again == [0, 0, 0]
    assert "pytest --pyargs pytest_agenteval.suites.aime25" in listed
    warned = [line for text in [*outputs, listed] for line in text.splitlines() if WARNING.search(line)]
    assert warned == []
    assert not (tmp_path / "a" / ".pytest_cache" / "d" / "agenteval").exists()
    assert any((tmp_path / "user-cache" / "pytest-agenteval").glob("*.jsonl"))
    timings["whole test"] = time.monotonic() - start
    print(json.dumps({k: round(v, 1) for k, v in timings.items()}))
