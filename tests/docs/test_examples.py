"""The README's quick starts and the shell examples in docs/ run exactly as written.

A fenced shell block with `<!-- doc-test -->` on the line before its fence (or
`<!-- doc-test: expect-exit N -->` when the page documents exit status N) runs here with
`bash -euo pipefail`, in a fresh copy of the repository, with this venv's bin first on
PATH, and must exit with 0 (or N). One test per block, named `file:line` (the fence's line).
What needs a GPU, the hub, a key or another host is left unmarked (CONTRIBUTING.md)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKER = re.compile(r"<!-- doc-test(?:: expect-exit (?P<status>\d+))? -->")
SHELL_FENCE = re.compile(r"```(?:bash|sh|shell)")
TIMEOUT_S = 600
TAIL_LINES = 40


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # the opening fence's line, 1-based
    script: str
    expect_exit: int

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def read_page(path: Path) -> tuple[list[Block], list[str]]:
    """The marked blocks of one page, and one line per marker that marks no shell block."""
    page = path.relative_to(REPO).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    for index, text in enumerate(lines):
        if not text.startswith("<!-- doc-test"):
            continue
        marker = MARKER.fullmatch(text.rstrip())
        fence = index + 1
        if marker is None:
            problems.append(f"{page}:{index + 1}: malformed marker {text!r}")
        elif fence >= len(lines) or not SHELL_FENCE.fullmatch(lines[fence].rstrip()):
            problems.append(f"{page}:{index + 1}: the marker is not right before a ```bash fence")
        else:
            end = next((k for k in range(fence + 1, len(lines)) if lines[k].startswith("```")), None)
            if end is None:
                problems.append(f"{page}:{fence + 1}: the marked block is never closed")
                continue
            status = int(marker["status"] or 0)
            blocks.append(Block(page, fence + 1, "\n".join(lines[fence + 1 : end]) + "\n", status))
    return blocks, problems


def all_blocks() -> tuple[list[Block], list[str]]:
    blocks: list[Block] = []
    problems: list[str] = []
    for path in PAGES:
        found, wrong = read_page(path)
        blocks += found
        problems += wrong
    return blocks, problems


BLOCKS, MARKER_PROBLEMS = all_blocks()


def copy_repository(dest: Path) -> None:
    """The files git knows of as they are in the work tree: tracked ones, and new ones not
    yet added (a new module a tracked one imports), never ignored ones (.venv, caches)."""
    command = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    try:
        listed = subprocess.run(command, cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"the doc examples run in a copy of the git checkout; `git ls-files` failed: {error}")
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if not source.is_file():  # deleted in the work tree, or a submodule
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def block_environment() -> dict[str, str]:
    # The outer pytest's own variables (PYTEST_XDIST_WORKER, PYTEST_CURRENT_TEST,
    # PYTEST_ADDOPTS) would change what the block's pytest does, so they stay out.
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    venv_bin = Path(sys.executable).parent
    env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = sys.prefix
    # A marked block is offline: one that reached for the hub fails here instead of downloading.
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_DATASETS_OFFLINE"] = "1"
    return env


def live_members(group: int) -> list[int]:
    """The processes of a process group that are not zombies (Linux /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == group:
            members.append(int(stat.parent.name))
    return members


def kill_group(group: int) -> None:
    """Leave nothing of the block running: a server it started in the background included."""
    for sig, grace_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if Path("/proc").is_dir() and not live_members(group):
                return
            time.sleep(0.1)


def run_block(block: Block, cwd: Path, log: Path) -> int | None:
    """The block's exit status, or None when it ran past TIMEOUT_S."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", block.script],
            cwd=cwd,
            env={**block_environment(), "TMPDIR": str(log.parent)},  # a block's mktemp -d stays in the test's
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            return process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None
        finally:
            kill_group(process.pid)
            process.wait()


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_marked_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    checkout = tmp_path / "repo"
    copy_repository(checkout)
    log = tmp_path / "output.log"
    status = run_block(block, checkout, log)
    tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-TAIL_LINES:])
    outcome = f"ran past {TIMEOUT_S} s" if status is None else f"exited with {status}"
    assert status == block.expect_exit, (
        f"{block.id} {outcome}, expected {block.expect_exit}:\n{block.script}\n"
        f"--- last {TAIL_LINES} lines of output ---\n{tail}"
    )


def test_every_marker_is_right_before_a_shell_block() -> None:
    assert MARKER_PROBLEMS == []


def test_the_readme_quick_starts_are_marked() -> None:
    """Removing the markers must not silently empty this file: the embedded model, a
    running server (`--endpoint`) and a launched one (`--serve`) are all run."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("## Quick starts") + 1
    end = next(k for k in range(start, len(lines)) if lines[k].startswith("## "))
    quick_starts = [b for b in BLOCKS if b.page == "README.md" and start < b.line <= end]
    assert len(quick_starts) >= 3
    scripts = [b.script for b in quick_starts]
    assert any("--endpoint" in s and "llama_cpp.server" in s for s in scripts)
    assert any("--serve" in s for s in scripts)
    assert any("--endpoint" not in s and "--model-path" not in s for s in scripts)
