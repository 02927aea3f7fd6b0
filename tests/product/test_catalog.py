"""`pytest-agenteval list` as a user reads it (issue 33's review): BFCL's size is the number
of items its suite collects, not the lines of its data files; a listing cut short by a pipe
(`| head`) ends quietly; a suite without categories shows no empty categories line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytest_agenteval.cli import main as cli

# bfcl-eval 2026.3.23 (the pinned version), as `pytest --pyargs pytest_agenteval.suites.bfcl --co` collects it
BFCL_ITEMS = 10306
BFCL_NOTES = [
    "BFCL_v4_format_sensitivity.json: 10 lines, 200 entries x 26 formats -> format_sensitivity 5200",
    "BFCL_v4_memory.json: 155 lines -> memory_kv 155, memory_vector 155, memory_rec_sum 155",
    "BFCL_v4_web_search.json: 100 lines -> web_search_base 100, web_search_no_snippet 100",
]


def _bfcl_data() -> None:
    from pytest_agenteval.tasks.bfcl._data import BfclDataError, find_data_dir

    try:
        find_data_dir(None)
    except BfclDataError:
        pytest.skip("BFCL's data ships in bfcl-eval: pip install --no-deps bfcl-eval==2026.3.23")


def test_bfcl_size_is_the_items_its_suite_collects(capsys: pytest.CaptureFixture[str]) -> None:
    _bfcl_data()
    assert cli(["list", "--json"]) == 0
    bfcl = {s["name"]: s for s in json.loads(capsys.readouterr().out)["suites"]}["bfcl"]
    assert (bfcl["size"], bfcl["size_notes"]) == (BFCL_ITEMS, BFCL_NOTES)
    assert cli(["list"]) == 0
    text = capsys.readouterr().out
    assert (
        f"    size        {BFCL_ITEMS} (items the suite collects from the installed bfcl-eval's data files)"
        in text
    )
    assert "".join(f"    counted     {note}\n" for note in BFCL_NOTES) in text


def test_a_suite_without_groups_has_no_groups_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["list"]) == 0
    aime = capsys.readouterr().out.split("  aime25  ")[1].split("\n\n")[0]
    assert "categories" not in aime and "    markers     aime25" in aime


def test_a_listing_cut_short_by_its_reader_ends_quietly() -> None:
    """`pytest-agenteval list --json | head`: the reader leaves before the listing is written."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_agenteval", "list", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the catalog is built and printed
    err = process.stderr.read().decode()
    assert (process.wait(), err) == (0, "")
