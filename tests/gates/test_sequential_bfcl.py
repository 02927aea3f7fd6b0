"""`--agenteval-sequential` on BFCL: each draw is a problem drawn uniformly (N = 1, its
single sample on its first draw), its verdict the item's; a per-category gate runs on the
draws of its category alone (uniform over the suite, so uniform over each category). The
model is a recorded run (`replay:`): every simple_python call right, every irrelevance item
answered with a call (wrong)."""

from __future__ import annotations

import pytest

from pytest_agenteval.tasks.bfcl import load_bfcl
from tests.bfcl.entries_guard import bfcl_entries_untouched  # noqa: F401 (checks the shared entries at the end)
from tests.conftest import read_results, write_jsonl
from tests.suites.test_bfcl_suite import SUITE, oracle_text

pytest.importorskip("tree_sitter", reason="BFCL java/javascript decoding needs: pip install -e '.[bfcl]'")
SIMPLE = "bfcl.per_category.simple_python.accuracy >= 0.5 @ 0.9"
IRRELEVANCE = "bfcl.per_category.irrelevance.accuracy >= 0.5 @ 0.9"


def test_per_category_gates_are_decided_on_their_categories_draws(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bfcl=SUITE)
    simple, irrelevant = load_bfcl(["simple_python"])[:15], load_bfcl(["irrelevance"])[:15]
    texts = {e.id: oracle_text(e) for e in simple} | {e.id: oracle_text(simple[0]) for e in irrelevant}
    rows = [{"problem_id": k, "sample_index": j, "text": v} for k, v in texts.items() for j in range(8)]
    replay = write_jsonl(pytester.path / "replay.jsonl", rows)
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--agenteval-out=r.jsonl",
        f"--model-path=replay:{replay}",
        "--agenteval-sequential",
        f"--agenteval-gate={SIMPLE}",
        f"--agenteval-gate={IRRELEVANCE}",
        *(f"test_bfcl.py::test_bfcl[{item}]" for item in texts),
    )
    assert result.ret == 1, result.stdout.str()[-3000:]  # the irrelevance gate fails
    problems, (summary,) = read_results(pytester.path / "r.jsonl")
    block = summary["sequential"]
    assert block["stop"] == "decided" and block["draws_used"] < 30
    by_gate = {g["gate"]: g for g in block["gates"]}
    category = {e.id: "simple_python" for e in simple} | {e.id: "irrelevance" for e in irrelevant}
    used = block["draws"][: block["draws_used"]]
    for gate, name, decision in ((SIMPLE, "simple_python", "PASS"), (IRRELEVANCE, "irrelevance", "FAIL")):
        assert by_gate[gate]["decision"] == decision
        assert by_gate[gate]["observations"] == sum(1 for d in used if category[d[1]] == name)
        line = next(x for x in result.outlines if x.startswith(f"gate {decision} {gate}: "))
        assert (
            f"after {block['draws_used']} of 30 generations, {by_gate[gate]['observations']} of them {name}"
            in line
        )
    # every draw's verdict is its item's: right in simple_python, wrong in irrelevance
    assert all(d[4] is (category[d[1]] == "simple_python") for d in used)
    assert {p["problem_id"] for p in problems} == {d[1] for d in used}
