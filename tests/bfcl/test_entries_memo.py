"""The BFCL entries are parsed once a process while the data folder's files are unchanged
(`all_entries`), and parsed again when a file changes."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_agenteval.tasks.bfcl.suite import all_entries
from tests.bfcl.entries_guard import fresh_entries
from tests.bfcl.small_data import small_bfcl_data


def test_the_installed_folder_parses_once_and_equals_a_fresh_parse() -> None:
    first, second = all_entries(None), all_entries(None)
    assert first == fresh_entries() and len(first) == 10306
    assert all(a is b for a, b in zip(first, second, strict=True))
    first.pop()  # each session gets its own list
    assert len(all_entries(None)) == 10306


def test_a_changed_file_is_parsed_again(tmp_path: Path) -> None:
    # a copy with each file's first 5 entries: the memo is keyed on the folder's files, not on
    # their size, and each of the four parses below takes milliseconds, not 2 s
    folder = small_bfcl_data(tmp_path / "data", per_file=5)
    before = all_entries(folder)
    assert all(a is b for a, b in zip(before, all_entries(folder), strict=True))

    for name in ("BFCL_v4_simple_python.json", "possible_answer/BFCL_v4_simple_python.json"):
        path = folder / name
        path.write_text("\n".join(path.read_text(encoding="utf-8").splitlines()[:-1]), encoding="utf-8")
    after = all_entries(folder)
    simple = [getattr(e, "id", None) for e in after if getattr(e, "category", None) == "simple_python"]
    assert len(simple) == 4 and "simple_python_4" not in simple

    # the same size, the old modification time put back (as `cp -p` or `rsync -a` do)
    path = folder / "BFCL_v4_irrelevance.json"
    stat, text = path.stat(), path.read_text(encoding="utf-8")
    path.write_text(text.replace("What", "Wha7", 1), encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    changed = all_entries(folder)
    assert changed != after and any("Wha7" in str(e.question) for e in changed if e.category == "irrelevance")

    stat = (folder / "BFCL_v4_irrelevance.json").stat()
    os.utime(folder / "BFCL_v4_irrelevance.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    touched = all_entries(folder)
    assert touched == changed and touched[0] is not changed[0]  # same content, parsed again
