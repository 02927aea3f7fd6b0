"""The report's demo, and docs/report.png: four "checkpoints" of a model on 30 synthetic
arithmetic problems (ours, not AIME's), N = 4, run by the real plugin against the
OpenAI-protocol test server. Each checkpoint is right more often (drawn from the request
seed, so reruns agree); wrong replies ramble past --max-tokens (stop reason `length`),
forget the box, or box a wrong number. Then `pytest-agenteval report --html` and a
screenshot from headless Chromium (Debian's `chromium`).

    python benchmarks/report_demo.py                       # writes into a temporary folder
    python benchmarks/report_demo.py --out /tmp/demo --screenshot docs/report.png
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.testing import OpenAITestServer, ServerConfig  # noqa: E402

CHECKPOINTS = {"base": 0.12, "step20": 0.3, "step50": 0.45, "step100": 0.55}  # skill
PROBLEMS = [
    {"id": i, "problem": f"What is {7 * i + 3} + {11 * i + 5}?", "answer": str(18 * i + 8)} for i in range(30)
]
SUITE = (
    "from pytest_agenteval.tasks.aime25 import Aime25\n\nagenteval_suite = Aime25()\n\n\n"
    "def test_aime25(evaluation):\n    evaluation.check()\n"
)


def _draw(*parts: object) -> float:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:4], "big") / 2**32


def responder(name: str, skill: float):
    def reply(body: dict) -> str:
        question = body["messages"][-1]["content"]
        a, b = map(int, re.search(r"What is (\d+) \+ (\d+)\?", question).groups())
        hard = 1.0 - (a % 10) / 12  # some problems are harder for every checkpoint
        # mostly the same draw for every checkpoint (a better one solves more), plus a little noise
        draw = 0.85 * _draw(body.get("seed"), question) + 0.15 * _draw(name, body.get("seed"), question)
        if draw < skill * hard * 1.6:
            return f"{a} plus {b} is {a + b}, so the answer is \\boxed{{{a + b}}}."
        kind = _draw("kind", name, body.get("seed"), question)
        if kind < 0.5 * (1 - skill):
            return "Let me think step by step. " * 30  # past --max-tokens: stop reason `length`
        if kind < 0.8 * (1 - skill):
            return f"I believe the sum is {a + b + 1}."  # no box: not formatted
        return f"The answer is \\boxed{{{a + b - 10}}}."

    return reply


def run_checkpoint(folder: Path, name: str, skill: float) -> Path:
    out = folder / f"aime25-demo-{name}.jsonl"
    with OpenAITestServer(ServerConfig(script=responder(name, skill), model=f"demo-{name}")) as server:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--dataset-path=problems.jsonl",
                "--mode=text-only",
                f"--endpoint={server.url}",
                "--val-n=4",
                "--max-tokens=64",
                f"--agenteval-out={out}",
            ],
            cwd=folder,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
            capture_output=True,
        )
    return out


def screenshot(html: Path, target: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("no chromium: apt-get install chromium (the screenshot needs it)")
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1300,2300",
            f"--screenshot={target.resolve()}",
            html.as_uri(),
        ],
        check=True,
        capture_output=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="folder for the results files and the report")
    parser.add_argument("--screenshot", type=Path, help="also write a PNG screenshot of the HTML report here")
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="agenteval-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_demo.py").write_text(SUITE)
    (folder / "problems.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    runs = [run_checkpoint(folder, name, skill) for name, skill in CHECKPOINTS.items()]
    html = folder / "report.html"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_agenteval",
            "report",
            *map(str, runs[1:]),
            "--baseline",
            str(runs[0]),
            "--html",
            str(html),
            "--markdown",
            str(folder / "report.md"),
        ],
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    print((folder / "report.md").read_text())
    if args.screenshot:
        screenshot(html, args.screenshot)
        print(f"screenshot: {args.screenshot}")
    print(f"report: {html}")


if __name__ == "__main__":
    main()
