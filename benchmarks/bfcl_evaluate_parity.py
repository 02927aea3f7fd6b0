"""Does the official `bfcl evaluate` accept a fresh export unchanged, and do its scores
equal ours? Runs the plugin on BFCL outputs (`replay:`; the first K items of every AST
category, half of them the reference call and half a refusal, or the outputs of an earlier
run with --outputs), exports with --bfcl-export-dir, then runs the exact command the
summary prints (`bfcl_evaluate`) with the `bfcl` of a separate virtual environment that
has bfcl-eval and its dependencies, and compares per-category correct/total.

    python benchmarks/bfcl_evaluate_parity.py --install            # makes /tmp/bfcl-eval-venv first
    python benchmarks/bfcl_evaluate_parity.py --per-category 10
    python benchmarks/bfcl_evaluate_parity.py --outputs agenteval-results/bfcl-....jsonl

--install: `pip install bfcl-eval==2026.3.23` with its dependencies, plus `soundfile`
(imported, not declared). --without-ml leaves out sentence-transformers (and so torch
with CUDA, about 4 GB), which only the memory categories use.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.tasks.bfcl import load_bfcl  # noqa: E402
from pytest_agenteval.tasks.bfcl._data import CATEGORIES  # noqa: E402
from tests.suites.test_bfcl_suite import SUITE, oracle_text  # noqa: E402

BFCL_EVAL = "bfcl-eval==2026.3.23"


def install(venv: Path, without_ml: bool) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "install", "-q"]
    if not without_ml:
        subprocess.run([*pip, BFCL_EVAL, "soundfile"], check=True)
        return
    from importlib.metadata import requires

    needed = [
        r for r in requires("bfcl-eval") or [] if "extra ==" not in r and "sentence-transformers" not in r
    ]
    subprocess.run([*pip, "--no-deps", BFCL_EVAL], check=True)
    subprocess.run([*pip, *needed, "soundfile"], check=True)


def synthetic_outputs(per_category: int) -> list[dict]:
    rows = []
    call = None
    for category in CATEGORIES:
        for index, entry in enumerate(load_bfcl([category])[:per_category]):
            if entry.ground_truth:
                call = call or oracle_text(entry)
                text = oracle_text(entry) if index % 2 == 0 else "I cannot help with that."
            else:  # irrelevance, live_relevance: no reference call
                text = "No function fits this request." if index % 2 == 0 else (call or "[f(x=1)]")
            rows.append({"problem_id": entry.id, "sample_index": 0, "text": text})
    return rows


def our_run(folder: Path, replay: Path, ids: list[str]) -> dict:
    (folder / "test_bfcl.py").write_text(SUITE)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--model-path=replay:{replay}",
            "--bfcl-export-dir=export",
            "--agenteval-out=ours.jsonl",
            *(f"test_bfcl.py::test_bfcl[{i}]" for i in ids),
        ],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
        capture_output=True,
    )
    return [json.loads(line) for line in (folder / "ours.jsonl").read_text().splitlines()][-1]


def official_scores(folder: Path, venv: Path, command: str) -> dict[str, tuple[int, int]]:
    argv = command.split()
    argv[0] = str(venv / "bin" / "bfcl")
    env = {**os.environ, "BFCL_PROJECT_ROOT": str(folder / "bfcl-root")}
    done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, check=False)
    last = (done.stdout.strip() or done.stderr.strip() or "(no output)").splitlines()[-1]
    print(f"$ {command}\n  exit {done.returncode}; last line: {last}")
    if done.returncode != 0:
        sys.exit(done.stderr[-3000:])
    score_dir = Path(argv[argv.index("--score-dir") + 1])
    scores = {}
    for path in score_dir.rglob("BFCL_v4_*_score.json"):
        header = json.loads(path.read_text().splitlines()[0])
        scores[path.name[len("BFCL_v4_") : -len("_score.json")]] = (
            header["correct_count"],
            header["total_count"],
        )
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--venv", type=Path, default=Path("/tmp/bfcl-eval-venv"))
    parser.add_argument("--install", action="store_true", help="create --venv with bfcl-eval first")
    parser.add_argument(
        "--without-ml", action="store_true", help="with --install: no sentence-transformers/torch"
    )
    parser.add_argument("--per-category", type=int, default=6)
    parser.add_argument("--outputs", type=Path, help="replay these outputs (a results file or replay lines)")
    args = parser.parse_args()
    args.venv = args.venv.absolute()  # `bfcl` runs in the run's own folder
    if args.install:
        install(args.venv, args.without_ml)
    if not (args.venv / "bin" / "bfcl").exists():
        sys.exit(f"no bfcl in {args.venv}: run with --install (pip install {BFCL_EVAL} soundfile)")
    folder = Path(tempfile.mkdtemp(prefix="bfcl-parity-"))
    if args.outputs:
        replay = args.outputs.resolve()
        lines = [json.loads(line) for line in replay.read_text().splitlines()]
        ids = [str(x["problem_id"]) for x in lines if x.get("type", "problem") == "problem"]
    else:
        rows = synthetic_outputs(args.per_category)
        replay = folder / "replay.jsonl"
        replay.write_text("".join(json.dumps(r) + "\n" for r in rows))
        ids = [r["problem_id"] for r in rows]
    summary = our_run(folder, replay, list(dict.fromkeys(ids)))
    official = official_scores(folder, args.venv, summary["bfcl_evaluate"])
    ours = {c: (v["correct"], v["total"]) for c, v in summary["per_category"].items()}
    print(f"{'category':<24} {'ours':>8} {'official':>9}")

    def shown(pair: tuple[int, int] | None) -> str:
        return f"{pair[0]}/{pair[1]}" if pair else "-"

    for category in ours:
        mark = "" if ours[category] == official.get(category) else "   <- differs"
        print(f"{category:<24} {shown(ours[category]):>8} {shown(official.get(category)):>9}{mark}")
    same = all(ours[c] == official.get(c) for c in ours)
    items = sum(total for _, total in ours.values())
    print(f"{len(ours)} categories, {items} items: {'identical' if same else 'DIFFERENT'}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
