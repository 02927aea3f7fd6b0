"""A venv made by README command 1 alone has transformers (the PyTRIO and Tinker SDKs need
it) but not torch, gguf, peft or accelerate, which command 2 installs. There, the tests
that need them skip, saying what to install, instead of erroring (issue 22: 20 errors in
tests/trio) or stopping pytest (a conftest that skipped at import). Simulated honestly:
a sitecustomize makes Python's path finder not find the named packages, so `import` and
`importlib.util.find_spec` behave as if they were not installed."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import run_in_a_process

REPO = Path(__file__).resolve().parents[2]

HIDE = """
import os, sys
from importlib.machinery import PathFinder

HIDDEN = set(os.environ["AGENTEVAL_TEST_HIDE"].split(","))


class _Hiding(PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return super().find_spec(name, path, target)


sys.meta_path[:] = [_Hiding if finder is PathFinder else finder for finder in sys.meta_path]
"""

COMMAND_ONE = "torch,gguf,peft,accelerate"  # what command 2 adds
NOTHING = COMMAND_ONE + ",transformers,safetensors,pytrio,tinker"
BACKEND = (
    "the transformers backend's tests need torch, peft, accelerate, gguf: "
    "pip install torch==2.13.0 && pip install -e '.[transformers]'"
)
TOKENIZER = (
    "the tokenizer folder is converted from the gguf, which needs torch, gguf: "
    "pip install torch==2.13.0 && pip install -e '.[transformers]'"
)

# Each run hides a set of packages and runs test files in a process of its own (the
# sitecustomize acts at interpreter start): (hidden packages, what to run, and per case the
# folder whose tests it asserts on, its skip count and the reason every skip gives). The
# backend's and the trio tokenizer's cases hide the same packages, so they share one run: the
# transformers modules skip at import (a collection skip, which `-k` does not deselect).
RUNS = {
    "command-one": (
        COMMAND_ONE,
        [
            "tests/transformers/test_backend.py",
            "tests/transformers/test_plugin.py",
            "tests/trio/test_sdk_samplers.py",
            "-k",
            "same_generations",
        ],
    ),
    "nothing": (NOTHING, ["tests/trio/test_sdk_samplers.py"]),
}
CASES = [
    ("command-one", "tests/transformers/", 2, BACKEND),
    ("command-one", "tests/trio/", 4, TOKENIZER),
    ("nothing", "tests/trio/", 1, "the SDK extras are not installed: pip install -e '.[trio,tinker]'"),
]
SKIPPED = re.compile(r"SKIPPED \[(\d+)\] (\S+?):\d+: (.*)")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pytest.RunResult]:
    """Each of RUNS once a module, in a process of its own (what `pytester.runpytest_subprocess`
    does, in a module-scoped folder): the outer pytest's PYTEST_ADDOPTS out, HOME a fresh folder."""
    results = {}
    for name, (hidden, args) in RUNS.items():
        folder = tmp_path_factory.mktemp(name)
        site = folder / "hide"
        site.mkdir()
        (site / "sitecustomize.py").write_text(HIDE, encoding="utf-8")
        env = {**os.environ, "AGENTEVAL_TEST_HIDE": hidden}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
        paths = [str(REPO / arg) if arg.startswith("tests/") else arg for arg in args]
        results[name] = run_in_a_process(folder, *paths, "-rs", "-p", "no:cacheprovider", "-n", "0", env=env)
    return results


def _under(path: str, *folders: str) -> bool:
    """Whether a reported path (relative to the run's folder: `../../REPO/tests/trio/...`)
    lies in one of the repository's folders."""
    return any(f"/{folder}" in f"/{path}" for folder in folders)


@pytest.mark.parametrize(("run", "folder", "skipped", "reason"), CASES, ids=["backend", "trio", "no-sdk"])
def test_without_command_2_the_tests_that_need_it_skip_with_the_reason(
    runs: dict[str, pytest.RunResult], run: str, folder: str, skipped: int, reason: str
) -> None:
    result = runs[run]
    result.assert_outcomes(skipped=sum(count for name, _, count, _ in CASES if name == run))
    skips = [match for line in result.outlines if (match := SKIPPED.match(line))]
    folders = [case[1] for case in CASES if case[0] == run]
    assert all(_under(match[2], *folders) for match in skips)  # each skip is some case's
    mine = [match for match in skips if _under(match[2], folder)]
    assert sum(int(match[1]) for match in mine) == skipped
    assert mine and {match[3] for match in mine} == {reason}
