"""The screenshot in docs/trackers.md: a 3-checkpoint sweep (the recorded runs of
docs/examples/sweep/, re-scored with `replay:`, labelled step-100, step-200, step-300)
logged with `--agenteval-log` to a local `mlflow server` (SQLite, artifacts in a temporary
folder), and MLflow's own UI showing AIME Average@N and its 95% interval against the step,
in headless Chromium (Debian's `chromium` and `chromium-driver`, through Selenium).

    python benchmarks/mlflow_screenshot.py --screenshot docs/trackers-mlflow.png
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests/trackers/mlflow_server.py, the tests' own server start
from tests.trackers import mlflow_server  # noqa: E402

SUITE = "from pytest_agenteval.tasks.aime25 import Aime25\n\nagenteval_suite = Aime25()\n\n\n"
SUITE += "def test_aime25(evaluation):\n    evaluation.check()\n"
RECORDED = {"step-100": "base", "step-200": "step-100", "step-300": "step-200"}
METRICS = ["aime25/average_at_n", "aime25/average_at_n/ci95_low", "aime25/average_at_n/ci95_high"]


def start_server(folder: Path) -> tuple[subprocess.Popen, str]:
    try:
        return mlflow_server.start(folder)
    except RuntimeError as exc:
        sys.exit(str(exc))


def log_sweep(folder: Path, url: str) -> str:
    """Run the sweep with --agenteval-log; the MLflow run id it logged to."""
    (folder / "test_sweep.py").write_text(SUITE, encoding="utf-8")
    shutil.copytree(REPO / "docs" / "examples" / "sweep", folder / "sweep", dirs_exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "test_sweep.py", "-q", "-p", "no:cacheprovider",
         "--dataset-path=sweep/problems.jsonl", "--mode=text-only", "--val-n=2",
         "--agenteval-out=out/aime25.jsonl", "--agenteval-gate=aime25.average_at_n >= 0.2",
         f"--agenteval-log=mlflow:{url}?experiment=aime25-sweep",
         *(f"--model-path={label}=replay:sweep/{name}.jsonl" for label, name in RECORDED.items())],
        cwd=folder, capture_output=True, text=True, check=False,
    )  # fmt: skip
    logged = [x for x in done.stdout.splitlines() if x.startswith("agenteval: logged to")]
    if not logged:
        sys.exit(f"the sweep did not log:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    print(logged[0])
    return logged[0].split(": run ")[1].split()[0]


def chart_url(url: str, run_id: str) -> str:
    from mlflow import MlflowClient

    experiment = MlflowClient(url).get_run(run_id).info.experiment_id
    query = {  # the page's own URL (MLflow's metric view: the query is JSON values)
        "runs": json.dumps([run_id]),
        "metric": json.dumps(METRICS[0]),
        "experiments": json.dumps([experiment]),
        "plot_metric_keys": json.dumps(METRICS),
        "plot_layout": json.dumps({}),
        "x_axis": "step",
        "y_axis_scale": "linear",
        "line_smoothness": "1",
        "show_point": "true",
        "deselected_curves": json.dumps([]),
        "last_linear_y_axis_range": json.dumps([]),
    }
    return f"{url}/#/metric?{urllib.parse.urlencode(query)}"


def screenshot(page: str, target: Path) -> None:
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or sys.exit("no chromium: apt-get install chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1500,860"):
        options.add_argument(flag)
    driver_path = shutil.which("chromedriver") or sys.exit("no chromedriver: apt-get install chromium-driver")
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver_path), options=options)
    try:
        driver.get(page)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # the chart is drawn by the page's scripts
            if driver.find_elements("css selector", ".js-plotly-plot .scatterlayer .trace"):
                break
            time.sleep(0.5)
        for button in driver.find_elements("css selector", "button[aria-label*='lose']"):
            if button.is_displayed():  # the assistant's side panel: the chart gets its width
                button.click()
        time.sleep(2)  # the axes' transition
        target.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(target))
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--screenshot", type=Path, default=REPO / "docs" / "trackers-mlflow.png")
    parser.add_argument("--url", help="a running mlflow server to use instead of starting one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agenteval-mlflow-") as tmp:
        folder = Path(tmp)
        server, url = start_server(folder) if args.url is None else (None, args.url)
        try:
            run_id = log_sweep(folder, url)
            page = chart_url(url, run_id)
            print(f"chart: {page}")
            screenshot(page, args.screenshot)
            print(f"screenshot: {args.screenshot}")
        finally:
            if server is not None:
                mlflow_server.stop(server)


if __name__ == "__main__":
    main()
