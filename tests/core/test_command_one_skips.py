"""A venv made by README command 1 alone has transformers (the PyTRIO and Tinker SDKs need
it) but not torch, gguf, peft or accelerate, which command 2 installs. There, the tests
that need them skip, saying what to install, instead of erroring (issue 22: 20 errors in
tests/trio) or stopping pytest (a conftest that skipped at import). Simulated honestly:
a sitecustomize makes Python's path finder not find the named packages, so `import` and
`importlib.util.find_spec` behave as if they were not installed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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

# (hidden packages, what to run, outcomes, the reason every skip gives)
CASES = [
    (COMMAND_ONE, ["tests/transformers/test_backend.py", "tests/transformers/test_plugin.py"], 2, BACKEND),
    (COMMAND_ONE, ["tests/trio/test_sdk_samplers.py", "-k", "same_generations"], 4, TOKENIZER),
    (
        NOTHING,
        ["tests/trio/test_sdk_samplers.py"],
        1,
        "the SDK extras are not installed: pip install -e '.[trio,tinker]'",
    ),
]


@pytest.mark.parametrize(("hidden", "args", "skipped", "reason"), CASES, ids=["backend", "trio", "no-sdk"])
def test_without_command_2_the_tests_that_need_it_skip_with_the_reason(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    hidden: str,
    args: list[str],
    skipped: int,
    reason: str,
) -> None:
    site = pytester.mkdir("hide")
    (site / "sitecustomize.py").write_text(HIDE, encoding="utf-8")
    monkeypatch.setenv("AGENTEVAL_TEST_HIDE", hidden)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    paths = [str(REPO / arg) if arg.startswith("tests/") else arg for arg in args]
    result = pytester.runpytest_subprocess(*paths, "-rs", "-p", "no:cacheprovider", "-n", "0")
    result.assert_outcomes(skipped=skipped)
    reasons = [line.split(": ", 1)[1] for line in result.outlines if line.startswith("SKIPPED [")]
    assert reasons and set(reasons) == {reason}
