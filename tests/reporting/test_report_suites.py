"""Reports of BFCL and GAIA runs (real runs of the plugin on replayed outputs): per-category
and per-level tables with their exact numbers, the official groups, drop rates, charts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.report import main
from tests.conftest import write_jsonl
from tests.gaia import make_synthetic
from tests.suites.test_bfcl_suite import SUITE as BFCL_SUITE
from tests.suites.test_gaia_suite import SUITE as GAIA_SUITE

from .conftest import run_plugin


@pytest.fixture(scope="module")
def bfcl_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    pytest.importorskip("tree_sitter", reason="BFCL needs: pip install -e '.[bfcl]'")
    from pytest_agenteval.tasks.bfcl import load_bfcl
    from tests.suites.test_bfcl_suite import oracle_text

    folder = tmp_path_factory.mktemp("bfcl")
    (folder / "test_bfcl.py").write_text(BFCL_SUITE)
    simple, irrelevant = load_bfcl(["simple_python"])[:3], load_bfcl(["irrelevance"])[:2]
    texts = {
        "before": [
            oracle_text(simple[0]),
            oracle_text(simple[1]),
            "I would call a function.",
            "None of these functions fit.",
            oracle_text(simple[0]),
        ],
        "after": [*(oracle_text(e) for e in simple), "None fit.", "No call is needed."],
    }
    ids = [e.id for e in simple + irrelevant]
    made = []
    for name, replies in texts.items():
        rows = [{"problem_id": i, "sample_index": 0, "text": t} for i, t in zip(ids, replies, strict=True)]
        replay = write_jsonl(folder / f"replay-{name}.jsonl", rows)
        made.append(
            run_plugin(
                folder,
                f"{name}.jsonl",
                f"--model-path=replay:{replay}",
                *(f"test_bfcl.py::test_bfcl[{i}]" for i in ids),
            )
        )
    return made[0], made[1]


def test_bfcl_report_has_categories_groups_and_the_delta(bfcl_runs, tmp_path: Path) -> None:
    before, after = bfcl_runs
    charts = tmp_path / "charts"
    assert (
        main(
            [
                str(after),
                "--baseline",
                str(before),
                "--png",
                str(charts),
                "--markdown",
                str(tmp_path / "r.md"),
            ]
        )
        == 0
    )
    text = (tmp_path / "r.md").read_text()
    assert "| before (reference) | 1 | 5 | 60.0% [23.1%, 88.2%] |  |  |" in text
    after = (
        "| after ★ | 1 | 5 | 100.0% [56.6%, 100.0%] | +40.0 pp [+0.0, +80.0] "
        "| too few problems to decide (5 paired; need >= 10) |"
    )
    assert after in text
    assert "| Run | simple_python | irrelevance |" in text
    assert "| before | 66.7% (2/3) | 50.0% (1/2) |" in text
    assert "| after | 100.0% (3/3) | 100.0% (2/2) |" in text
    assert "| Run | lenient | simple | non_live | live | irrelevance | relevance |" in text
    assert "| after | 100.0% | 100.0% | 100.0% | - | 100.0% | - |" in text  # groups absent from the run: -
    assert "- solved now, not in before (2): `simple_python_2`, `irrelevance_1`" in text
    assert sorted(p.name for p in charts.iterdir()) == [
        "bfcl-categories.png",
        "bfcl-groups.png",
        "bfcl-stop-reasons.png",
    ]


@pytest.fixture(scope="module")
def gaia_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("gaia")
    (folder / "test_gaia.py").write_text(GAIA_SUITE)
    root = make_synthetic.make_synthetic_gaia(folder / "GAIA", "jsonl")
    replay = make_synthetic.write_replay(folder / "replay.jsonl")
    oracle = write_jsonl(
        folder / "oracle.jsonl",
        [
            {
                "problem_id": make_synthetic.task_id("validation", t.key),
                "sample_index": 0,
                "text": f"FINAL ANSWER: {t.answer}",
            }
            for t in make_synthetic.VALIDATION
        ],
    )
    return (
        run_plugin(folder, "replayed.jsonl", f"--gaia-path={root}", f"--model-path=replay:{replay}"),
        run_plugin(folder, "oracle.jsonl", f"--gaia-path={root}", f"--model-path=replay:{oracle}"),
    )


def test_gaia_report_has_levels_and_drop_rates(gaia_runs, tmp_path: Path) -> None:
    replayed, oracle = gaia_runs
    assert (
        main(
            [
                str(replayed),
                str(oracle),
                "--html",
                str(tmp_path / "r.html"),
                "--markdown",
                str(tmp_path / "r.md"),
            ]
        )
        == 0
    )
    text = (tmp_path / "r.md").read_text()
    assert "| Run | level 1 | level 2 | level 3 | drop 1->2 | drop 2->3 |" in text
    assert "| replayed | 80.0% (4/5) | 75.0% (3/4) | 33.3% (1/3) | 6.3% | 55.6% |" in text
    assert "| oracle | 100.0% (5/5) | 100.0% (4/4) | 100.0% (3/3) | 0.0% | 0.0% |" in text
    assert "| replayed (reference) | 1 | 12 | 66.7% [39.1%, 86.2%] |" in text
    assert (tmp_path / "r.html").read_text().count('src="data:image/png;base64,') == 2  # levels, stop reasons


RETOOL = ("--mode=retool", "--limit=1", "--val-n=2", "--sandbox-timeout=5")


def _solve_with_tool(code: str) -> list:
    """Turn 0 calls the tool; turn 1 boxes whatever the tool printed."""
    from pytest_agenteval.testing import Reply

    return [
        Reply(text="Let me compute.", tool_calls=[{"name": "code_interpreter", "arguments": {"code": code}}]),
        lambda observation, body: (
            f"The tool printed {observation.strip()}, so \\boxed{{{observation.strip()}}}."
        ),
    ]


def _always_call() -> list:
    from pytest_agenteval.testing import Reply

    return [
        Reply(tool_calls=[{"name": "code_interpreter", "arguments": {"code": f"print({i})"}}])
        for i in range(10)
    ]


@pytest.fixture(scope="module")
def retool_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from pytest_agenteval.testing import OpenAITestServer, ServerConfig
    from tests.conftest import SUITE_FILE, TINY_PROBLEMS

    folder = tmp_path_factory.mktemp("retool")
    (folder / "test_tiny.py").write_text(SUITE_FILE)
    write_jsonl(folder / "tiny.jsonl", TINY_PROBLEMS)
    made = []
    for name, turns, extra in (
        ("solver", _solve_with_tool("print(30 + 40)"), ()),
        ("looper", _always_call(), ("--max-code-calls=2",)),
    ):
        from pytest_agenteval.testing import ScriptedToolModel

        with OpenAITestServer(ServerConfig(script=ScriptedToolModel(turns))) as server:
            made.append(
                run_plugin(
                    folder,
                    f"{name}.jsonl",
                    "--dataset-path=tiny.jsonl",
                    f"--endpoint={server.url}",
                    *RETOOL,
                    *extra,
                )
            )
    return made[0], made[1]


def test_retool_report_has_tool_use_and_stop_reasons(retool_runs, tmp_path: Path) -> None:
    solver, looper = retool_runs
    charts = tmp_path / "charts"
    assert main([str(solver), str(looper), "--markdown", str(tmp_path / "r.md"), "--png", str(charts)]) == 0
    text = (tmp_path / "r.md").read_text()
    assert "| Run | code calls / gen | turns / gen | code ok | timeouts |" in text
    assert "| solver | 1.00 | 2.00 | 100.0% | 0 |" in text
    assert "| looper | 2.00 | 3.00 | 100.0% | 0 |" in text
    assert "| Run | answer | call_budget |" in text
    assert "| solver | 2 | 0 |" in text and "| looper | 0 | 2 |" in text
    assert "- solved in solver, not now (1): `0`" in text
    assert (charts / "aime25-stop-reasons.png").stat().st_size > 10_000  # stop reasons beside calls and turns
