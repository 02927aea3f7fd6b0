"""The HTML report is one self-contained file: no script, no external resource, charts
embedded; opened in headless Chromium (Debian's `chromium`) with JavaScript off, its
tables read and its charts decode, and the screenshot is not blank."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pytest_agenteval.report import main

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def html(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report.html"
    assert (
        main([str(runs["step20"]), str(runs["step50"]), "--baseline", str(runs["base"]), "--html", str(out)])
        == 0
    )
    return out


def test_the_file_needs_nothing_but_itself(html: Path) -> None:
    text = html.read_text()
    assert "<script" not in text.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "url(" not in text and "@import" not in text
    assert text.count('src="data:image/png;base64,') == 3  # checkpoints, pass@k, stop reasons


def test_changed_problems_open_onto_both_runs_texts(html: Path) -> None:
    text = html.read_text()
    assert text.count("<details>") == 2 + 3  # Step 20 gains 0 and 1; Step 50 gains 0, 1 and 2
    assert "<code>2</code>: now solved (Base 0/2, Step 50 1/2)" in text
    assert "What is 2 to the power 4?" in text and "<pre>no box</pre>" in text


@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver (apt-get)")
def test_headless_chromium_renders_tables_and_charts_without_javascript(html: Path, tmp_path: Path) -> None:
    webdriver = pytest.importorskip("selenium.webdriver", reason="pip install selenium")
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,1900"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
    try:
        driver.get("data:text/html,<title>static</title><script>document.title='scripted'</script>")
        assert driver.title == "static"  # JavaScript is really off for what follows
        driver.get(html.as_uri())
        rows = driver.find_elements(By.CSS_SELECTOR, "table:first-of-type tr")
        assert [r.text.split(" 2 4 ")[0] for r in rows[1:]] == ["Base (reference)", "Step 20", "Step 50 ★"]
        images = driver.find_elements(By.TAG_NAME, "img")
        assert len(images) == 3 and all(
            img.size["width"] > 300 and img.size["height"] > 200 for img in images
        )
        shot = tmp_path / "report.png"
        assert driver.save_screenshot(str(shot))
    finally:
        driver.quit()
    from PIL import Image

    with Image.open(shot) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert image.size == (1300, 1900) or image.size[0] >= 1000
    assert colours is not None and len(colours) > 50  # text, tables and charts, not a blank page
