"""The default attachment reader, one file kind at a time."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_agenteval.tasks.gaia import AttachmentText, read_attachment


@pytest.mark.parametrize(
    ("name", "kind", "constant"),
    [
        ("shopping.txt", "text", "SHOPPING_TXT"),
        ("scores.csv", "csv", "SCORES_CSV"),
        ("inventory.json", "json", "INVENTORY_JSON"),
        ("RELEASE.md", "markdown", "RELEASE_MD"),
    ],
)
def test_text_like_attachments_are_read_verbatim(
    tmp_path: Path, synthetic: ModuleType, name: str, kind: str, constant: str
) -> None:
    synthetic.ATTACHMENT_WRITERS[name](tmp_path / name)
    expected = getattr(synthetic, constant)
    assert read_attachment(tmp_path / name) == AttachmentText(expected, kind, False)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("data.tsv", "tsv"),
        ("rows.jsonl", "jsonl"),
        ("page.html", "html"),
        ("tree.xml", "xml"),
        ("solve.py", "code"),
        ("Main.java", "code"),
        ("protein.pdb", "text"),
    ],
)
def test_kind_follows_the_extension(tmp_path: Path, name: str, kind: str) -> None:
    (tmp_path / name).write_text("a\tb\n", encoding="utf-8")
    assert read_attachment(tmp_path / name) == AttachmentText("a\tb\n", kind, False)


def test_binary_file_without_extension_is_not_supported(tmp_path: Path) -> None:
    (tmp_path / "blob").write_bytes(b"\x00")
    assert read_attachment(tmp_path / "blob").error == (
        "blob: binary files without an extension are not supported by the default file reader"
    )


def test_office_documents_are_not_supported(tmp_path: Path, synthetic: ModuleType) -> None:
    synthetic.write_minimal_xlsx(tmp_path / "report.docx")  # any zip
    assert read_attachment(tmp_path / "report.docx") == AttachmentText(
        "",
        "unsupported",
        False,
        "report.docx: .docx files are not supported by the default file reader",
    )


def test_unknown_extension_with_text_content_is_read_as_text(tmp_path: Path) -> None:
    (tmp_path / "notes.weird").write_text("héllo\n", encoding="utf-8")
    assert read_attachment(tmp_path / "notes.weird") == AttachmentText("héllo\n", "text", False)


def test_unknown_binary_file_is_not_supported(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    assert read_attachment(tmp_path / "blob.bin") == AttachmentText(
        "",
        "unsupported",
        False,
        "blob.bin: .bin files are not supported by the default file reader",
    )


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("photo.png", "image"),
        ("chart.JPG", "image"),
        ("clip.mp3", "audio"),
        ("talk.wav", "audio"),
        ("movie.mp4", "video"),
        ("bundle.zip", "archive"),
    ],
)
def test_media_files_get_a_not_supported_note(tmp_path: Path, name: str, kind: str) -> None:
    (tmp_path / name).write_bytes(b"\x89PNG\x00")
    suffix = Path(name).suffix.lower()
    assert read_attachment(tmp_path / name) == AttachmentText(
        "",
        kind,
        False,
        f"{name}: {kind} files ({suffix}) are not supported by the default file reader",
    )


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "gone.txt"
    assert read_attachment(path) == AttachmentText("", "missing", False, f"attachment not found: {path}")


def test_text_is_capped_at_max_chars(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("x" * 100, encoding="utf-8")
    assert read_attachment(tmp_path / "long.txt", max_chars=10) == AttachmentText("x" * 10, "text", True)


def test_text_of_exactly_max_chars_is_not_truncated(tmp_path: Path) -> None:
    (tmp_path / "exact.txt").write_text("é" * 10, encoding="utf-8")
    assert read_attachment(tmp_path / "exact.txt", max_chars=10) == AttachmentText("é" * 10, "text", False)


def test_huge_file_is_not_read_whole(tmp_path: Path) -> None:
    (tmp_path / "huge.csv").write_bytes(b"1,2\n" * 1_000_000)
    result = read_attachment(tmp_path / "huge.csv", max_chars=8)
    assert result == AttachmentText("1,2\n1,2\n", "csv", True)


def test_utf8_bom_is_dropped_and_bad_bytes_are_replaced(tmp_path: Path) -> None:
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbfok \xff\n")
    assert read_attachment(tmp_path / "bom.txt").text == "ok \ufffd\n"


def test_pdf_text_is_extracted_per_page(tmp_path: Path, synthetic: ModuleType) -> None:
    pytest.importorskip("pypdf")
    synthetic.write_minimal_pdf(tmp_path / "survey.pdf")
    assert read_attachment(tmp_path / "survey.pdf") == AttachmentText(
        "--- page 1 ---\nSummit survey: measured height 8848 metres", "pdf", False
    )


def test_pdf_text_is_capped(tmp_path: Path, synthetic: ModuleType) -> None:
    pytest.importorskip("pypdf")
    synthetic.write_minimal_pdf(tmp_path / "survey.pdf")
    assert read_attachment(tmp_path / "survey.pdf", max_chars=14) == AttachmentText(
        "--- page 1 ---", "pdf", True
    )


def test_malformed_pdf_is_an_error_not_a_crash(tmp_path: Path) -> None:
    pytest.importorskip("pypdf")
    (tmp_path / "bad.pdf").write_bytes(b"this is not a pdf")
    result = read_attachment(tmp_path / "bad.pdf")
    assert (result.text, result.kind, result.truncated) == ("", "pdf", False)
    assert result.error is not None and result.error.startswith("cannot read PDF bad.pdf: ")
    assert "\n" not in result.error


def test_xlsx_rows_become_tab_separated_lines(tmp_path: Path, synthetic: ModuleType) -> None:
    pytest.importorskip("openpyxl")
    synthetic.write_minimal_xlsx(tmp_path / "budget.xlsx")
    expected = (
        "## sheet: Budget\nItem\tQ1\tQ2\tQ3\nRent\t400\t400\t410\nFood\t300\t310\t512\nTravel\t100\t150\t312"
    )
    assert read_attachment(tmp_path / "budget.xlsx") == AttachmentText(expected, "xlsx", False)


def test_xlsx_text_is_capped(tmp_path: Path, synthetic: ModuleType) -> None:
    pytest.importorskip("openpyxl")
    synthetic.write_minimal_xlsx(tmp_path / "budget.xlsx")
    assert read_attachment(tmp_path / "budget.xlsx", max_chars=20) == AttachmentText(
        "## sheet: Budget\nIte", "xlsx", True
    )


def test_malformed_xlsx_is_an_error_not_a_crash(tmp_path: Path) -> None:
    pytest.importorskip("openpyxl")
    (tmp_path / "bad.xlsx").write_bytes(b"not a zip")
    result = read_attachment(tmp_path / "bad.xlsx")
    assert result.error is not None and result.error.startswith("cannot read XLSX bad.xlsx: ")


def test_missing_pypdf_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pypdf", None)
    (tmp_path / "doc.pdf").write_bytes(b"%PDF-1.4")
    assert read_attachment(tmp_path / "doc.pdf") == AttachmentText(
        "", "pdf", False, "reading PDF attachments needs pypdf: pip install pypdf"
    )


def test_missing_openpyxl_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openpyxl", None)
    (tmp_path / "sheet.xlsx").write_bytes(b"PK")
    assert read_attachment(tmp_path / "sheet.xlsx") == AttachmentText(
        "", "xlsx", False, "reading XLSX attachments needs openpyxl: pip install openpyxl"
    )


def test_path_may_be_a_string(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hi", encoding="utf-8")
    assert read_attachment(str(tmp_path / "a.txt")).text == "hi"
