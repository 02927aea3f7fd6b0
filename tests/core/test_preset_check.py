"""`benchmarks/gpu_vllm_check.py --preset NAME` (it runs on a GPU machine with vLLM, not
here): its argument handling, and the line it prints beside the published number, from a
results file a real preset run wrote (the test server answers); and the band that line
judges by."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.gpu_vllm_check import parse_args, published_line, sampling_args
from pytest_agenteval.config.presets import PRESETS, Published, published_for
from pytest_agenteval.stats.reproduction import reproduction_band
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results


@pytest.mark.parametrize(
    ("published", "problems", "samples", "theirs", "half_width"),
    [
        (0.151, 30, 64, 64, 1.959963984540054 * math.sqrt(0.151 * 0.849 / 30 * (2 / 64))),  # 0.0226
        (0.151, 30, 4, 64, 1.959963984540054 * math.sqrt(0.151 * 0.849 / 30 * (1 / 4 + 1 / 64))),
        (0.763, 30, 64, None, 1.959963984540054 * math.sqrt(0.763 * 0.237 / 30 / 64)),  # N unstated
        (0.0, 30, 64, 64, 0.0),
    ],
)
def test_reproduction_band(published: float, problems: int, samples: int, theirs, half_width: float) -> None:
    assert reproduction_band(published, problems, samples, theirs) == pytest.approx(half_width, abs=1e-12)


def test_reproduction_band_of_qwen3_0_6b_thinking_is_two_points() -> None:
    assert round(reproduction_band(0.151, 30, 64, 64), 4) == 0.0226


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--model", "m", "--preset", "qwen3-thinking"], ["--agenteval-preset=qwen3-thinking"]),
        (
            ["--model", "m", "--preset", "qwen3-thinking", "--val-n", "8", "--limit", "5"],
            ["--agenteval-preset=qwen3-thinking", "--limit=5", "--val-n=8"],
        ),
        (["--model", "m"], ["--mode=text-only", "--limit=10", "--val-n=4", "--max-tokens=2048"]),
        (
            ["--model", "m", "--val-n", "2"],
            ["--mode=text-only", "--limit=10", "--val-n=2", "--max-tokens=2048"],
        ),
    ],
)
def test_a_preset_run_asks_only_for_what_was_given(argv: list[str], expected: list[str]) -> None:
    assert sampling_args(parse_args(argv), "text-only") == expected


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--model", "m", "--preset", "qwen3"], "--preset qwen3: no such preset; choose one of retool-lab, "),
        (["--model", "m", "--preset", "qwen3-thinking", "--adapter", "a"], "drop --adapter"),
    ],
)
def test_bad_arguments_are_one_line(argv: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    assert error in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize(
    ("model", "value"),
    [("Qwen/Qwen3-0.6B", 0.151), ("/models/qwen3-1.7b/", 0.368), ("Qwen/Qwen3-8B", None)],
)
def test_the_published_number_is_found_by_hub_id_or_folder_name(model: str, value: float | None) -> None:
    found = published_for("qwen3-thinking", model)
    assert (found.value if found else None) == value


def test_the_line_beside_the_published_number_from_a_recorded_results_file(run_suite) -> None:
    answers = {"30 + 40": "\\boxed{70}", "12 * 49": "\\boxed{588}"}
    with OpenAITestServer(ServerConfig(answers=answers, answer="no idea")) as server:
        result, out = run_suite(f"--endpoint={server.url}", "--agenteval-preset=qwen3-thinking", "--val-n=2")
    result.assert_outcomes(passed=2, failed=2)
    _, (summary,) = read_results(out)
    low, high = summary["ci95"]["average_at_n"]
    near = Published("Qwen/Qwen3-0.6B", 0.48, "a table")
    band = reproduction_band(0.48, 4, 2, 64)
    assert published_line(summary, near) == (
        f"ours 0.500 [{low:.3f}, {high:.3f}] published 0.480 (a table): within the ±{band:.3f} sampling "
        "band (N=2 against 64, 4 problems)"
    )
    far = Published(
        "Qwen/Qwen3-0.6B", 0.151, "Qwen3 Technical Report (arXiv 2505.09388), Tables 17 and 19, §4"
    )
    assert published_line(summary, far).endswith(
        f"published 0.151 ({far.source}): outside the ±{reproduction_band(0.151, 4, 2, 64):.3f} sampling "
        "band (N=2 against 64, 4 problems)"
    )
    incomplete = {**summary, "complete": False}
    assert published_line(incomplete, near).endswith("; INCOMPLETE run")
    assert (
        published_line({**summary, "average_at_n": None}, near) == "ours none (nothing scored) published "
        "0.480 (a table)"
    )


DOC = Path(__file__).resolve().parents[2] / "docs" / "presets.md"


@pytest.mark.parametrize(
    "name, published", [(p.name, published) for p in PRESETS for published in p.published]
)
def test_docs_presets_md_states_each_published_number_with_its_computed_band(name: str, published) -> None:
    value, band = published.value, reproduction_band(published.value, 30, 64, published.samples)
    wide = 1.959963984540054 * math.sqrt(value * (1 - value) / 30)
    at_16 = reproduction_band(value, 30, 16, published.samples)
    row = (
        f"| {name} | {published.model} | {value:.3f} | {value:.3f} ± {band:.3f} | "
        f"[{value - band:.3f}, {value + band:.3f}] | ± {at_16:.3f} | ± {wide:.3f} |"
    )
    assert row in DOC.read_text(encoding="utf-8").splitlines()
