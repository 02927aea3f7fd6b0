"""The human verification page in a real headless Chromium (Debian's chromium and
chromium-driver, driven by Selenium; never a downloaded browser), against the real
`python -m pytest_agenteval review` server over a real socket."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.report._review_page import PAGE
from pytest_agenteval.tasks.datagen import verifications_path
from tests.datagen import review_child

CHROMIUM = next((p for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium") if Path(p).exists()), None)
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
)
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (extra datagen-test)")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("no chromium/chromedriver: apt-get install chromium chromium-driver", allow_module_level=True)

from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ITEMS = [
    {"problem_id": "gen-1", "problem": "Find $x$ with \\frac{x}{3} = 10.", "answer": "30",
     "solution": "x = 30.", "topic": "algebra"},
    {"problem_id": "gen-2", "problem": "<script>alert(1)</script> a<b &amp; c", "answer": "7", "solution": "",
     "topic": "geometry"},
    {"problem_id": "gen-3", "problem": "How many divisors has 12?", "answer": "6",
     "solution": "1,2,3,4,6,12.", "topic": "number theory"},
]  # fmt: skip


# Children forked from a forkserver: a fork of the xdist worker itself would copy a process
# with threads (execnet's) and every open descriptor; the forkserver is one clean process a
# worker, with the review command imported once (about 1 s of CPU) for all its children.
_CHILDREN = multiprocessing.get_context("forkserver")
_CHILDREN.set_forkserver_preload(["tests.datagen.review_child"])


class ReviewServer:
    """`pytest_agenteval review DATA --port 0` in a process of its own: the product's main()
    serving over a real socket until SIGTERM, as the command does, without an interpreter
    start and the package's imports (numpy, aiohttp: about 1 s of CPU) per test. The command
    line itself (`python -m pytest_agenteval review`) is test_cli's and test_review_host's."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.store = verifications_path(data)
        self.process: Any = None
        self.url = ""

    def start(self) -> str:
        stdout = self.data.with_name(f"review-{time.monotonic_ns()}.out")
        argv = [str(self.data), "--port", "0", "--annotator", "ann"]
        self.process = _CHILDREN.Process(target=review_child.serve, args=(argv, str(stdout)))
        self.process.start()
        deadline = time.monotonic() + 60
        printed, match = "", None
        while match is None and self.process.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
            printed = stdout.read_text(encoding="utf-8") if stdout.exists() else ""
            match = re.search(r"REVIEW (http://127\.0\.0\.1:\d+/).*\n", printed)  # the whole line
        assert match, f"review server did not start: {printed!r} (exit code {self.process.exitcode})"
        self.url = match.group(1)
        return self.url

    def stop(self) -> None:
        if self.process is not None and self.process.is_alive():
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.join(timeout=10)
            if self.process.exitcode is None:  # ignored SIGTERM: never left behind
                self.process.kill()
                self.process.join(timeout=10)
            assert self.process.exitcode == 0, self.process.exitcode

    def saved(self) -> dict[str, Any]:
        return json.loads(self.store.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ReviewServer]:
    data = tmp_path / "generated.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ITEMS), encoding="utf-8")
    review = ReviewServer(data)
    review.start()
    yield review
    review.stop()


def open_page(driver: Any, url: str) -> None:
    driver.get(url)
    WebDriverWait(driver, 15).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1"
    )


CTRL_ENTER = "ctrl+enter"  # a held modifier: ActionChains.send_keys would release it at once


def keys(driver: Any, *sequence: str) -> None:
    chain = ActionChains(driver)
    for key in sequence:
        if key == CTRL_ENTER:
            chain.key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL)
        else:
            chain.send_keys(key)
    chain.perform()


def text(driver: Any, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def wait_text(driver: Any, element_id: str, expected: str) -> None:
    WebDriverWait(driver, 10).until(lambda d: expected in d.find_element(By.ID, element_id).text)


def wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


SCORE_KEYS = ("4", Keys.TAB, "5", Keys.TAB, "3", Keys.TAB, "4")


def test_keyboard_only_verification_writes_the_seed_schema(browser: Any, server: ReviewServer) -> None:
    open_page(browser, server.url)
    assert text(browser, "item-id") == "gen-1" and text(browser, "progress") == "0/3 verified"
    keys(browser, *SCORE_KEYS, "a", "c", "typed 345 and a r n here", Keys.ESCAPE, CTRL_ENTER)
    wait_text(browser, "progress", "1/3 verified")
    assert text(browser, "item-id") == "gen-2" and text(browser, "position") == "item 2 of 3"
    entry = server.saved()["gen-1"]
    verified_at, spent = entry.pop("verified_at"), entry.pop("time_spent_s")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", verified_at)
    assert isinstance(spent, float) and spent >= 0
    assert entry == {
        "problem_id": "gen-1",
        "scores": {"correctness": 4, "clarity": 5, "difficulty_match": 3, "completeness": 4},
        "total_score": 4.0,
        "status": "approved",  # the "r" and "n" typed in the comment changed nothing
        "comments": "typed 345 and a r n here",
        "annotator": "ann",
        "item_sha256": entry["item_sha256"],
        "revision": 1,
        "schema_version": 1,
        "history": [],
    }
    assert len(entry["item_sha256"]) == 64


def test_submit_stays_disabled_until_four_scores_and_a_status(browser: Any, server: ReviewServer) -> None:
    open_page(browser, server.url)
    submit = browser.find_element(By.ID, "submit")
    keys(browser, "4", Keys.TAB, "5", Keys.TAB, "3")
    assert not submit.is_enabled()
    keys(browser, Keys.TAB, "2")
    assert not submit.is_enabled()
    keys(browser, "n")
    assert submit.is_enabled()
    keys(browser, CTRL_ENTER)
    wait_text(browser, "progress", "1/3 verified")
    assert server.saved()["gen-1"]["status"] == "needs_revision"


def test_rapid_keys_keep_the_last_score(browser: Any, server: ReviewServer) -> None:
    open_page(browser, server.url)
    keys(browser, "5", "3", Keys.TAB, "1", Keys.TAB, "1", Keys.TAB, "1", "r", CTRL_ENTER)
    wait_text(browser, "progress", "1/3 verified")
    assert server.saved()["gen-1"]["scores"]["correctness"] == 3


def test_markup_in_an_item_is_shown_as_text(browser: Any, server: ReviewServer) -> None:
    open_page(browser, server.url)
    keys(browser, "j")
    assert text(browser, "problem-rendered") == "<script>alert(1)</script> a<b &amp; c"
    keys(browser, "s")  # the source, as written
    assert text(browser, "problem") == "<script>alert(1)</script> a<b &amp; c"
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - raises when no dialog opened


def test_the_page_loads_nothing_from_outside(browser: Any, server: ReviewServer) -> None:
    open_page(browser, server.url)
    loaded = browser.execute_script(
        "return [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]"
        ".map(e => e.name)"
    )
    assert f"{server.url}api/items" in loaded
    assert all(name.startswith(server.url) for name in loaded)
    assert not re.search(r"https?://", PAGE)  # no CDN, no absolute URL at all


MATH = (
    "Inline $\\frac{1}{2}$, display $$\\frac{3}{4}$$, parenthesised \\(\\frac{5}{6}\\), bracketed "
    "\\[\\frac{7}{8}\\] and bare \\frac{9}{10} = \\sqrt{x}."
)


def tex_of(driver: Any, element_id: str) -> list[str]:
    """The TeX source KaTeX keeps in each formula's MathML annotation, in page order."""
    found = driver.find_elements(By.CSS_SELECTOR, f"#{element_id} .katex annotation")
    return [a.get_attribute("textContent") for a in found]


def test_math_is_typeset_in_every_delimiter_and_bare(browser: Any, tmp_path: Path) -> None:
    data = tmp_path / "math.jsonl"
    row = {
        "problem_id": "m-1",
        "problem": MATH,
        "answer": "$30$",
        "solution": "So \\boxed{30}.",
        "topic": "algebra",
    }
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    review = ReviewServer(data)
    try:
        open_page(browser, review.start())
        assert tex_of(browser, "problem-rendered") == [
            "\\frac{1}{2}", "\\frac{3}{4}", "\\frac{5}{6}", "\\frac{7}{8}", "\\frac{9}{10}", "\\sqrt{x}"
        ]  # fmt: skip
        fractions = browser.find_elements(By.CSS_SELECTOR, "#problem-rendered .katex .mfrac")
        displays = browser.find_elements(By.CSS_SELECTOR, "#problem-rendered .katex-display")
        assert (len(fractions), len(displays)) == (5, 2)
        assert tex_of(browser, "answer-rendered") == ["30"]
        assert tex_of(browser, "solution-rendered") == ["\\boxed{30}"]
        assert not browser.find_elements(By.CSS_SELECTOR, ".katex-error")
        assert browser.save_screenshot(str(tmp_path / "review_katex_delimiters.png"))
    finally:
        review.stop()


def test_a_fraction_is_typeset_and_the_toggle_shows_the_source(
    browser: Any, server: ReviewServer, tmp_path: Path
) -> None:
    open_page(browser, server.url)
    fraction = browser.find_element(By.CSS_SELECTOR, "#problem-rendered .katex .mfrac")
    assert fraction.is_displayed() and not browser.find_element(By.ID, "problem").is_displayed()
    assert tex_of(browser, "problem-rendered") == ["x", "\\frac{x}{3}"]
    browser.execute_script("return document.fonts.ready")
    wait_for(lambda: browser.execute_script("return document.fonts.check('16px KaTeX_Main')"))
    loaded = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert f"{server.url}katex/fonts/KaTeX_Main-Regular.woff2" in loaded
    assert browser.save_screenshot(str(tmp_path / "review_katex.png"))
    keys(browser, "s")
    assert text(browser, "problem") == "Find $x$ with \\frac{x}{3} = 10."
    assert not fraction.is_displayed()
    assert browser.find_element(By.ID, "raw-toggle").get_attribute("aria-pressed") == "true"
    browser.find_element(By.ID, "raw-toggle").click()  # the button does the same
    assert fraction.is_displayed() and not browser.find_element(By.ID, "problem").is_displayed()


def test_a_reload_restores_the_draft(browser: Any, server: ReviewServer) -> None:
    open_page(browser, server.url)
    keys(browser, "2", Keys.TAB, "4", "r")
    drafts = server.store.with_name(server.store.stem + ".drafts.json")
    wait_for(lambda: drafts.exists() and json.loads(drafts.read_text())["gen-1"]["status"] == "rejected")
    open_page(browser, server.url)
    on = [b.get_attribute("id") for b in browser.find_elements(By.CSS_SELECTOR, "button.on")]
    assert on == ["score-correctness-2", "score-clarity-4", "status-rejected"]


def test_a_restarted_server_resumes_at_the_first_unverified_item(browser: Any, server: ReviewServer) -> None:
    open_page(browser, server.url)
    keys(browser, *SCORE_KEYS, "a", CTRL_ENTER)
    wait_text(browser, "progress", "1/3 verified")
    server.stop()
    open_page(browser, server.start())
    assert text(browser, "item-id") == "gen-2" and text(browser, "progress") == "1/3 verified"


def test_a_second_tab_cannot_silently_overwrite_the_first(browser: Any, server: ReviewServer) -> None:
    open_page(browser, server.url)
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    open_page(browser, server.url)
    second = browser.current_window_handle
    browser.switch_to.window(first)
    keys(browser, *SCORE_KEYS, "a", CTRL_ENTER)
    wait_text(browser, "progress", "1/3 verified")
    browser.switch_to.window(second)
    keys(browser, "1", Keys.TAB, "1", Keys.TAB, "1", Keys.TAB, "1", "r", CTRL_ENTER)
    wait_text(browser, "message", "saved elsewhere")
    assert browser.find_element(By.ID, "reload").is_displayed()
    saved = server.saved()["gen-1"]
    assert (saved["status"], saved["revision"]) == ("approved", 1)
    browser.close()
    browser.switch_to.window(first)


def test_editing_a_verified_item_keeps_its_history(browser: Any, server: ReviewServer) -> None:
    open_page(browser, server.url)
    keys(browser, *SCORE_KEYS, "a", CTRL_ENTER)
    wait_text(browser, "progress", "1/3 verified")
    keys(browser, "k")
    assert text(browser, "item-id") == "gen-1" and "verified: approved" in text(browser, "item-state")
    keys(browser, "1", "r", CTRL_ENTER)
    wait_for(lambda: server.saved()["gen-1"]["revision"] == 2)
    entry = server.saved()["gen-1"]
    assert (entry["status"], entry["scores"]["correctness"]) == ("rejected", 1)
    assert [(h["revision"], h["status"], h["scores"]["correctness"]) for h in entry["history"]] == [
        (1, "approved", 4)
    ]


def test_changed_data_marks_a_verification_stale(browser: Any, server: ReviewServer) -> None:
    open_page(browser, server.url)
    keys(browser, *SCORE_KEYS, "a", CTRL_ENTER)
    wait_text(browser, "progress", "1/3 verified")
    keys(browser, "k")
    assert "verified: approved" in text(browser, "item-state")
    assert not browser.find_element(By.ID, "stale").is_displayed()  # same data: not stale
    keys(browser, "j")
    assert not browser.find_element(By.ID, "stale").is_displayed()  # unverified: never stale
    server.stop()
    rows = [dict(ITEMS[0], problem="Find $x$ with \\frac{x}{3} = 11."), *ITEMS[1:]]
    server.data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    open_page(browser, server.start())
    keys(browser, "k")
    assert browser.find_element(By.ID, "stale").is_displayed()


def test_chinese_and_long_comments_round_trip_exactly(browser: Any, server: ReviewServer) -> None:
    comment = "答案正确，但解答缺少一步。" + "x" * 10_000
    open_page(browser, server.url)
    keys(browser, *SCORE_KEYS, "a")
    browser.execute_script(
        "const c = document.getElementById('comments'); c.value = arguments[0];"
        "c.dispatchEvent(new Event('input'));",
        comment,
    )
    keys(browser, CTRL_ENTER)
    wait_text(browser, "progress", "1/3 verified")
    assert server.saved()["gen-1"]["comments"] == comment


def test_screenshot(browser: Any, server: ReviewServer, tmp_path: Path) -> None:
    open_page(browser, server.url)
    keys(browser, "4", Keys.TAB, "5", Keys.TAB, "a")
    path = tmp_path / "review.png"
    assert browser.save_screenshot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
