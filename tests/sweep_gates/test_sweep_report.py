"""The report a sweep writes at its end, from the real results files of three one-model
runs: `pytest-agenteval report`'s own HTML with the checkpoint chart over the models in
order, paired deltas against the first model and the problems that changed; opened in
headless Chromium (Debian's `chromium`), and the Markdown report when matplotlib is missing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agenteval.report import check_comparable, load_run, write_sweep_report
from tests.sweep_gates.conftest import LABELS, REPO

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def html(sweep_files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep-report") / "report" / "sweep.html"
    assert write_sweep_report([sweep_files[label] for label in LABELS], LABELS, out) == out
    return out


def test_report_does_not_refuse_a_sweeps_files(sweep_files: dict[str, Path]) -> None:
    """Different models (two endpoints, a replay) are the point; N, data and selection agree."""
    runs = [load_run(sweep_files[label], label) for label in LABELS]
    assert check_comparable(runs, allow_mixed=False) is None


def test_the_html_has_the_chart_over_the_models_in_order(html: Path) -> None:
    text = html.read_text()
    assert text.count('src="data:image/png;base64,') == 3  # checkpoints, pass@k, stop reasons
    assert '<img alt="Average@N, Pass@N and format rate"' in text
    assert re.findall(r"<li><b>([^<]+)</b>", text) == list(LABELS)
    assert "<script" not in text.lower()


def test_the_deltas_are_paired_against_the_first_model(html: Path) -> None:
    text = html.read_text()
    assert "base is the reference: each delta is another model minus it." in text
    assert "<th>Δ vs base (95% CI)</th>" in text
    rows = re.findall(r"<tr[^>]*><td>([^<]+)</td>.*?</tr>", text.split("<h3>")[0])
    assert rows == ["base (reference)", "step-100", "step-200 ★"]
    assert '<td>+8.3 pp<br><span class="ci">[+0.0, +25.0]</span></td><td>no significant change</td>' in text
    assert '<td>+66.7 pp<br><span class="ci">[+41.7, +91.7]</span></td><td>significant gain</td>' in text


def test_the_changed_problems_are_listed_per_model(html: Path) -> None:
    text = html.read_text()
    assert (
        "<h3>Changed problems: step-100 vs base</h3><p>1 solved now and not in base, 0 the reverse.</p>"
        in text
    )
    assert (
        "<h3>Changed problems: step-200 vs base</h3><p>8 solved now and not in base, 0 the reverse.</p>"
        in text
    )
    assert "<code>3</code>: now solved (base 0/2, step-100 2/2)" in text
    assert re.findall(r"<code>(\d+)</code>: now solved \(base 0/2, step-200", text) == [
        str(p) for p in range(3, 11)
    ]
    assert "Problem 3: what is 3 + 100?" in text and "<pre>so \\boxed{103}</pre>" in text


def test_a_model_whose_run_did_not_finish_is_left_out_with_a_note(
    sweep_files: dict[str, Path], tmp_path: Path
) -> None:
    unfinished = tmp_path / "aime25-step-300.jsonl.partial"
    unfinished.write_text(sweep_files["step-200"].read_text().splitlines()[0] + "\n")
    out = write_sweep_report([sweep_files["base"], unfinished], ["base", "step-300"], tmp_path / "r.html")
    text = out.read_text()
    assert (
        f"step-300 is left out: {unfinished}: no summary line (the run did not finish (a .partial file)); "
        "give the results file of a finished run" in text
    )
    assert re.findall(r"<li><b>([^<]+)</b>", text) == ["base"]


def test_without_matplotlib_the_markdown_report_is_written_and_says_so(
    sweep_files: dict[str, Path], tmp_path: Path
) -> None:
    """A missing install, as Python sees one: the import of matplotlib fails."""
    paths = [str(sweep_files[label]) for label in LABELS]
    script = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from pathlib import Path\n"
        "from pytest_agenteval.report import write_sweep_report\n"
        f"print(write_sweep_report({paths!r}, {list(LABELS)!r}, Path({str(tmp_path / 'sweep.html')!r})))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(tmp_path / "sweep.md")
    assert not (tmp_path / "sweep.html").exists()
    text = (tmp_path / "sweep.md").read_text()
    assert (
        "**matplotlib is not installed, so this is the Markdown report, without charts; pip install "
        "'pytest-agenteval[report]' for the HTML one.**" in text
    )
    assert "| step-100 | 2 | 12 |" in text and "| +8.3 pp [+0.0, +25.0] | no significant change |" in text
    assert "- solved now, not in base (1): `3`" in text


@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver (apt-get)")
def test_headless_chromium_shows_the_sweep_report(html: Path, tmp_path: Path) -> None:
    webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium")
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,1900"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
    shot = tmp_path / "sweep-report.png"
    try:
        driver.get(html.as_uri())
        rows = driver.find_elements(By.CSS_SELECTOR, "table:first-of-type tr")
        assert [r.text.split(" 2 12 ")[0] for r in rows[1:]] == ["base (reference)", "step-100", "step-200 ★"]
        images = driver.find_elements(By.TAG_NAME, "img")
        assert len(images) == 3 and all(i.size["width"] > 300 and i.size["height"] > 200 for i in images)
        changed = driver.find_elements(By.CSS_SELECTOR, "details > summary")
        assert len(changed) == 1 + 8
        assert driver.save_screenshot(str(shot))
    finally:
        driver.quit()
    from PIL import Image

    with Image.open(shot) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, tables and charts, not a blank page
    print(f"screenshot: {shot}")
