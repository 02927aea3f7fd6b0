"""A small synthetic GAIA dataset in the real on-disk formats, for tests.

The real GAIA is gated and cannot be downloaded here, so these 12 validation
and 4 test questions (our own, across levels 1-3, with number, string and
list answers) are written in both layouts the loader reads: the current
``2023/<split>/metadata.parquet`` and the older ``metadata.jsonl``, with the
attachments beside them (.txt, .csv, .json, .md, a hand-written .pdf and a
hand-written .xlsx, so no optional library is needed to *write* them).

``write_replay`` writes one recorded agent output per validation task
(``{problem_id, sample_index, text}`` lines, the replay format of SPEC 2):
some right, some wrong, each exercising an extraction method or a scorer
pitfall. ``REPLAY_EXPECTED`` is the official verdict for each.

Run ``python tests/gaia/make_synthetic.py OUT_DIR [parquet|jsonl]`` to write
the dataset and ``OUT_DIR/replay.jsonl`` by hand.
"""

from __future__ import annotations

import json
import sys
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Layout = Literal["parquet", "jsonl"]


@dataclass(frozen=True)
class SyntheticTask:
    key: str
    level: int
    question: str
    answer: str
    file_name: str = ""
    steps: int = 3
    tools: str = "1. Web browser\n2. Calculator"
    replay: str = ""  # the recorded agent output (validation only)


def task_id(split: str, key: str) -> str:
    """A stable UUID-shaped id, like GAIA's."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"synthetic-gaia/{split}/{key}"))


VALIDATION: tuple[SyntheticTask, ...] = (
    SyntheticTask(
        "spider-legs",
        1,
        "How many legs do three spiders have in total?",
        "24",
        steps=2,
        tools="None",
        replay="Each spider has 8 legs.\nFINAL ANSWER: 24",
    ),
    SyntheticTask(
        "red-disc-capital",
        1,
        "What is the capital of the country whose flag is a red disc on white?",
        "Tokyo",
        replay="That flag is Japan's.\nFINAL ANSWER: tokyo.",
    ),
    SyntheticTask(
        "shopping-total",
        1,
        "How much was spent in total on the trip described in the attached file, in dollars?",
        "42.5",
        file_name="shopping.txt",
        replay="Adding the three items.\nAnswer: $42.50",
    ),
    SyntheticTask(
        "top-student",
        1,
        "Which student has the highest score in the attached CSV file?",
        "Dana",
        file_name="scores.csv",
        replay="Dana scored 97.\nFINAL ANSWER: [Dana]",
    ),
    SyntheticTask(
        "primary-colours",
        1,
        "List the primary colours of light by increasing wavelength, comma separated.",
        "blue, green, red",
        replay="FINAL ANSWER: red, green, blue",
    ),
    SyntheticTask(
        "out-of-stock",
        2,
        "According to the attached JSON file, which items are out of stock? "
        "Answer in alphabetical order, comma separated.",
        "bolts, washers",
        file_name="inventory.json",
        steps=4,
        replay="**FINAL ANSWER:** Bolts,Washers",
    ),
    SyntheticTask(
        "next-patch",
        2,
        "The attached release notes announce a version. What is the next patch version after it?",
        "2.4.1",
        file_name="RELEASE.md",
        replay="The notes announce 2.4.0.\nFINAL ANSWER: 2.4.1",
    ),
    SyntheticTask(
        "fifteen-percent",
        2,
        "What is 15% of 2,400?",
        "360",
        steps=5,
        replay="0.15 * 2400 = 360\nFINAL ANSWER: 360 dollars",
    ),
    SyntheticTask(
        "q3-total",
        2,
        "What is the total of the Q3 column in the attached spreadsheet?",
        "1234",
        file_name="budget.xlsx",
        steps=6,
        replay="Q3 sums to 1234.\n答案：1234",
    ),
    SyntheticTask(
        "summit-height",
        3,
        "The attached PDF reports a survey. What height, in metres, did it measure?",
        "8848",
        file_name="survey.pdf",
        steps=7,
        replay="The report says 8,848 m.\nFINAL ANSWER: 8,848",
    ),
    SyntheticTask(
        "largest-planets",
        3,
        "Name the three largest planets, largest first, separated by semicolons.",
        "Jupiter; Saturn; Uranus",
        steps=8,
        replay="I think they are:\nJupiter; Saturn; Neptune",
    ),
    SyntheticTask(
        "prime-sum",
        3,
        "What is the sum of the first ten prime numbers?",
        "129",
        steps=9,
        replay="FINAL ANSWER: The sum is 129",
    ),
)

TEST: tuple[SyntheticTask, ...] = (
    SyntheticTask("moon-count", 1, "How many moons does Mars have?", "?"),
    SyntheticTask(
        "notes-word", 2, "What is the last word of the attached notes?", "?", file_name="notes.txt"
    ),
    SyntheticTask("alloy-list", 2, "Which two metals make bronze? Comma separated.", "?"),
    SyntheticTask("deep-chain", 3, "What is the 12th Fibonacci number?", "?"),
)

# The official verdict on each replayed output, and with unordered lists.
REPLAY_EXPECTED: dict[str, bool] = {
    "spider-legs": True,
    "red-disc-capital": True,
    "shopping-total": True,
    "top-student": True,
    "primary-colours": False,  # in-order comparison; True with unordered_lists
    "out-of-stock": True,
    "next-patch": True,
    "fifteen-percent": False,  # units are not stripped
    "q3-total": True,
    "summit-height": True,
    "largest-planets": False,
    "prime-sum": False,
}
REPLAY_EXPECTED_UNORDERED = {**REPLAY_EXPECTED, "primary-colours": True}
REPLAY_METHODS: dict[str, str] = {
    "shopping-total": "answer_label",
    "q3-total": "answer_label",
    "largest-planets": "last_line",
}


def make_synthetic_gaia(root: Path, layout: Layout = "parquet") -> Path:
    """Write ``root/2023/{validation,test}/`` in ``layout``; returns ``root``."""
    for split, tasks in (("validation", VALIDATION), ("test", TEST)):
        split_dir = root / "2023" / split
        split_dir.mkdir(parents=True, exist_ok=True)
        rows = [_row(split, task) for task in tasks]
        if layout == "parquet":
            write_parquet(split_dir / "metadata.parquet", rows)
        else:
            write_jsonl(split_dir / "metadata.jsonl", rows)
        for task in tasks:
            if task.file_name:
                ATTACHMENT_WRITERS[task.file_name](split_dir / task.file_name)
    return root


def write_replay(path: Path, split: str = "validation") -> Path:
    """One recorded agent output per task: ``{problem_id, sample_index, text}`` lines."""
    lines = [
        json.dumps({"problem_id": task_id(split, t.key), "sample_index": 0, "text": t.replay})
        for t in VALIDATION
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _row(split: str, task: SyntheticTask) -> dict[str, Any]:
    is_test = split == "test"
    return {
        "task_id": task_id(split, task.key),
        "Question": task.question,
        # Level is a string in the older JSONL loader and an int in the Parquet files;
        # the loader accepts both. The writers below convert.
        "Level": task.level,
        "Final answer": task.answer,
        "file_name": task.file_name,
        "Annotator Metadata": {
            "Steps": "" if is_test else f"1. Think about {task.key}\n2. Answer",
            "Number of steps": "" if is_test else str(task.steps),
            "How long did this take?": "" if is_test else "5 minutes",
            "Tools": "" if is_test else task.tools,
            "Number of tools": "" if is_test else str(len(task.tools.splitlines())),
        },
    }


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps({**row, "Level": str(row["Level"])}) + "\n" for row in rows)
    path.write_text(text, encoding="utf-8")


# --- attachments -------------------------------------------------------------


def _write_text(content: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(content, encoding="utf-8")


SHOPPING_TXT = "Shopping trip\n- bread: $3.50\n- cheese: $14.00\n- wine: $25.00\n"
SCORES_CSV = "student,score\nAlex,81\nBo,77\nDana,97\nEli,90\n"
INVENTORY_JSON = json.dumps(
    {
        "items": [
            {"name": "washers", "stock": 0},
            {"name": "nuts", "stock": 12},
            {"name": "bolts", "stock": 0},
        ]
    },
    indent=2,
)
RELEASE_MD = "# Release notes\n\n## Version 2.4.0\n\n- Faster loading\n- `--gaia-path` option\n"
NOTES_TXT = "Remember to water the plants tomorrow\n"
PDF_TEXT = "Summit survey: measured height 8848 metres"
XLSX_ROWS: list[list[str | int]] = [
    ["Item", "Q1", "Q2", "Q3"],
    ["Rent", 400, 400, 410],
    ["Food", 300, 310, 512],
    ["Travel", 100, 150, 312],
]


def write_minimal_pdf(path: Path, text: str = PDF_TEXT) -> None:
    """A one-page PDF with one line of Helvetica text, xref offsets computed."""
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref_at = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref_at,
    )
    path.write_bytes(bytes(out))


_NS_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_NS_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_NS_PKG = "http://schemas.openxmlformats.org/package/2006/relationships"
_CT = "application/vnd.openxmlformats-officedocument.spreadsheetml"


def write_minimal_xlsx(path: Path, rows: list[list[str | int]] = XLSX_ROWS) -> None:
    """A one-sheet XLSX ("Budget") written as raw OOXML parts in a zip."""
    cols = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    xml_rows = []
    for r, row in enumerate(rows, start=1):
        cells = []
        for c, value in enumerate(row):
            ref = f"{cols[c]}{r}"
            if isinstance(value, int):
                cells.append(f'<c r="{ref}"><v>{value}</v></c>')
            else:
                cells.append(f'<c r="{ref}" t="inlineStr"><is><t>{value}</t></is></c>')
        xml_rows.append(f'<row r="{r}">{"".join(cells)}</row>')
    parts = {
        "[Content_Types].xml": (
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/xl/workbook.xml" ContentType="{_CT}.sheet.main+xml"/>'
            '<Override PartName="/xl/worksheets/sheet1.xml" '
            f'ContentType="{_CT}.worksheet+xml"/></Types>'
        ),
        "_rels/.rels": (
            f'<Relationships xmlns="{_NS_PKG}"><Relationship Id="rId1" '
            f'Type="{_NS_REL}/officeDocument" Target="xl/workbook.xml"/></Relationships>'
        ),
        "xl/workbook.xml": (
            f'<workbook xmlns="{_NS_MAIN}" xmlns:r="{_NS_REL}"><sheets>'
            '<sheet name="Budget" sheetId="1" r:id="rId1"/></sheets></workbook>'
        ),
        "xl/_rels/workbook.xml.rels": (
            f'<Relationships xmlns="{_NS_PKG}"><Relationship Id="rId1" '
            f'Type="{_NS_REL}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>'
        ),
        "xl/worksheets/sheet1.xml": (
            f'<worksheet xmlns="{_NS_MAIN}"><sheetData>{"".join(xml_rows)}</sheetData></worksheet>'
        ),
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in parts.items():
            archive.writestr(name, '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n' + body)


ATTACHMENT_WRITERS: dict[str, Callable[[Path], None]] = {
    "shopping.txt": _write_text(SHOPPING_TXT),
    "scores.csv": _write_text(SCORES_CSV),
    "inventory.json": _write_text(INVENTORY_JSON),
    "RELEASE.md": _write_text(RELEASE_MD),
    "notes.txt": _write_text(NOTES_TXT),
    "survey.pdf": write_minimal_pdf,
    "budget.xlsx": write_minimal_xlsx,
}


if __name__ == "__main__":
    out = Path(sys.argv[1])
    make_synthetic_gaia(out, sys.argv[2] if len(sys.argv) > 2 else "parquet")  # type: ignore[arg-type]
    write_replay(out / "replay.jsonl")
    print(out)
