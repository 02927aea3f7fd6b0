"""llama.cpp's own log (`possible training context overflow`, ...) goes to a file beside
the results, never into pytest's report: it was in the captured stderr of every failure
section under xdist."""

from __future__ import annotations

import importlib.util

import pytest

OVERFLOW = "llama_context: n_ctx_seq (16384) > n_ctx_train (8192) -- possible training context overflow"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "two-workers"])
def test_llama_cpp_log_lines_go_to_a_file_not_the_report(run_suite, workers: list[str]) -> None:
    if importlib.util.find_spec("llama_cpp") is None:  # not imported here: pytester restores sys.modules
        pytest.skip("llama-cpp-python is not installed")
    result, out = run_suite(
        "--limit=1", "--val-n=1", "--max-tokens=4", "--n-ctx=16384", "--agenteval-no-cache", *workers
    )
    result.assert_outcomes(failed=1)  # SmolLM2 does not add 30 and 40 in 4 tokens
    assert "possible training context overflow" not in result.stdout.str() + result.stderr.str()
    assert OVERFLOW in (out.parent / "llama-cpp.log").read_text().splitlines()
