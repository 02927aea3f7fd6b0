"""A small copy of the installed BFCL data folder, for runs that select a few items but
would parse (and collect) all 10,306 entries in each process they start: an xdist worker
or a subprocess spends about 2.5 s of CPU parsing them and as much collecting them.
Each category file keeps its first `per_file` entries (and their possible answers, line
for line), the format-sensitivity ids those leave; the function docs and memory
conversations are copied whole. Passed to a run as `--bfcl-data-dir`."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

from pytest_agenteval.tasks.bfcl._data import find_data_dir
from pytest_agenteval.tasks.bfcl.suite import _LOADED
from tests.bfcl.entries_guard import assert_untouched

FORMAT = "BFCL_v4_format_sensitivity.json"


def _head(path: Path, count: int) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle if line.strip()][:count]


def small_bfcl_data(dest: Path, per_file: int = 5) -> Path:
    root = find_data_dir()
    dest.mkdir(parents=True)
    (dest / "possible_answer").mkdir()
    for folder in ("memory_prereq_conversation", "multi_turn_func_doc"):
        shutil.copytree(root / folder, dest / folder)
    kept: set[str] = set()
    for path in sorted(root.glob("BFCL_v4_*.json")):
        if path.name == FORMAT:
            continue
        head = _head(path, per_file)
        kept.update(json.loads(line)["id"] for line in head)
        (dest / path.name).write_text("\n".join(head), encoding="utf-8")
        answers = root / "possible_answer" / path.name
        if answers.exists():
            (dest / "possible_answer" / path.name).write_text(
                "\n".join(_head(answers, per_file)), encoding="utf-8"
            )
    ids = json.loads((root / FORMAT).read_text(encoding="utf-8"))
    (dest / FORMAT).write_text(json.dumps({c: [i for i in v if i in kept] for c, v in ids.items()}))
    return dest


@contextlib.contextmanager
def memo_kept() -> Iterator[None]:
    """Around an in-process run on a small copy: the suite keeps one folder's entries a
    process (`all_entries`), and that run (its xdist controller too: the export's command
    counts the folder's items) replaces the installed data's with the copy's. Put back, the
    next run on the installed data finds its entries parsed (and gc-frozen) as before, not
    parsed again. The copy's entries the runs left must equal a fresh parse of the copy, as
    `bfcl_entries_untouched` checks the installed data's (no session changes what the next
    one reads)."""
    saved = dict(_LOADED)
    try:
        yield
        for (folder, stamp), entries in _LOADED.items():
            if (folder, stamp) not in saved:
                assert_untouched(entries, Path(folder))
    finally:
        _LOADED.clear()
        _LOADED.update(saved)
