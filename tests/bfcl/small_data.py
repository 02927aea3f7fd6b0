"""A small copy of the installed BFCL data folder, for runs that select a few items but
would parse (and collect) all 10,306 entries in each process they start: an xdist worker
or a subprocess spends about 2.5 s of CPU parsing them and as much collecting them.
Each category file keeps its first `per_file` entries (and their possible answers, line
for line), the format-sensitivity ids those leave; the function docs and memory
conversations are copied whole. Passed to a run as `--bfcl-data-dir`."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

from pytest_agenteval.tasks.bfcl._data import find_data_dir

FORMAT = "BFCL_v4_format_sensitivity.json"


def _head(path: Path, count: int) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return list(itertools.islice((line.rstrip("\n") for line in handle if line.strip()), count))


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
