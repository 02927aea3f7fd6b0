"""The default attachment reader: turn a GAIA attachment into text for the prompt.

Text-like files (plain text, CSV/TSV, JSON/JSONL, Markdown, XML/HTML, source
code, and unknown extensions whose bytes are UTF-8 without NULs) are read as
they are. PDF needs ``pypdf`` and XLSX needs ``openpyxl``; both are imported
only when such a file is read, and a missing one is reported in ``error``
with the ``pip install`` line. Images, audio, video, archives and other
binary files are not read: ``error`` says so, and an agent with its own tools
can still open the file from its path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MAX_CHARS = 20_000

_TEXT_KINDS: dict[str, str] = {
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".csv": "csv",
    ".tsv": "tsv",
    ".json": "json",
    ".jsonld": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".md": "markdown",
    ".markdown": "markdown",
    ".xml": "xml",
    ".html": "html",
    ".htm": "html",
    ".yaml": "text",
    ".yml": "text",
    ".toml": "text",
    ".ini": "text",
    ".pdb": "text",
}
_CODE_SUFFIXES = frozenset(
    ".py .js .ts .java .c .h .cpp .hpp .cc .cs .go .rs .rb .php .sh .bash .sql .r .jl"
    " .kt .swift .scala .m .pl .lua .css".split()
)
_BINARY_KINDS: dict[str, str] = {
    **dict.fromkeys(".png .jpg .jpeg .gif .bmp .webp .tif .tiff .svg .heic".split(), "image"),
    **dict.fromkeys(".mp3 .wav .m4a .flac .ogg .aac .opus".split(), "audio"),
    **dict.fromkeys(".mp4 .mov .avi .mkv .webm".split(), "video"),
    **dict.fromkeys(".zip .tar .gz .tgz .bz2 .xz .7z .rar".split(), "archive"),
}
_SNIFF_BYTES = 8192
_READER = "the default file reader"


@dataclass(frozen=True)
class AttachmentText:
    """What the reader got out of one attachment.

    ``text`` is at most ``max_chars`` characters (``truncated`` says whether
    more was there); ``error`` is a one-line note when no text could be read.
    """

    text: str
    kind: str
    truncated: bool
    error: str | None = None


def read_attachment(path: Path | str, max_chars: int = DEFAULT_MAX_CHARS) -> AttachmentText:
    """Read ``path`` as text for a prompt, capped at ``max_chars`` characters."""
    path = Path(path)
    suffix = path.suffix.lower()
    if not path.is_file():
        return AttachmentText("", "missing", False, f"attachment not found: {path}")
    if suffix == ".pdf":
        return _read_pdf(path, max_chars)
    if suffix in (".xlsx", ".xlsm"):
        return _read_xlsx(path, max_chars)
    if suffix in _TEXT_KINDS:
        return _read_text(path, _TEXT_KINDS[suffix], max_chars)
    if suffix in _CODE_SUFFIXES:
        return _read_text(path, "code", max_chars)
    kind = _BINARY_KINDS.get(suffix)
    if kind is None and _looks_like_text(path):
        return _read_text(path, "text", max_chars)
    if kind is not None:
        what = f"{kind} files ({suffix})"
    else:
        what = f"{suffix} files" if suffix else "binary files without an extension"
    return AttachmentText(
        "", kind or "unsupported", False, f"{path.name}: {what} are not supported by {_READER}"
    )


def _cap(text: str, max_chars: int, more: bool = False) -> tuple[str, bool]:
    """Cut ``text`` to ``max_chars``; ``more`` says the source had more than ``text``."""
    if len(text) > max_chars:
        return text[:max_chars], True
    return text, more


def _read_text(path: Path, kind: str, max_chars: int) -> AttachmentText:
    # Read a little more than max_chars could need (UTF-8 is at most 4 bytes a
    # character), so a huge file is never loaded whole.
    limit = max_chars * 4 + 4
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        return AttachmentText("", kind, False, f"cannot read {path.name}: {exc.strerror or exc}")
    more = len(data) > limit
    text = data[:limit].decode("utf-8-sig", errors="replace")
    capped, truncated = _cap(text, max_chars, more)
    return AttachmentText(capped, kind, truncated)


def _looks_like_text(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError:
        return False
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the end of the sniffed block is fine.
        return exc.start >= len(head) - 3
    return True


class _Collector:
    """Joins parts with ``sep`` and reports when the text passes ``max_chars``."""

    def __init__(self, max_chars: int, sep: str) -> None:
        self.max_chars, self.sep = max_chars, sep
        self.parts: list[str] = []
        self.size = 0

    def add(self, part: str) -> bool:
        """Add ``part``; False once the joined text is longer than ``max_chars``."""
        self.size += len(part) + (len(self.sep) if self.parts else 0)
        self.parts.append(part)
        return self.size <= self.max_chars

    def result(self, kind: str) -> AttachmentText:
        text, truncated = _cap(self.sep.join(self.parts), self.max_chars)
        return AttachmentText(text, kind, truncated)


def _read_pdf(path: Path, max_chars: int) -> AttachmentText:
    try:
        import pypdf
    except ImportError:
        return AttachmentText("", "pdf", False, "reading PDF attachments needs pypdf: pip install pypdf")
    collector = _Collector(max_chars, "\n\n")
    try:
        reader = pypdf.PdfReader(str(path))
        for number, page in enumerate(reader.pages, start=1):
            text = (page.extract_text() or "").strip()
            if not collector.add(f"--- page {number} ---\n{text}"):
                break
    except Exception as exc:  # pypdf raises many types on malformed files
        return AttachmentText("", "pdf", False, f"cannot read PDF {path.name}: {_one_line(exc)}")
    return collector.result("pdf")


def _read_xlsx(path: Path, max_chars: int) -> AttachmentText:
    try:
        import openpyxl
    except ImportError:
        return AttachmentText(
            "", "xlsx", False, "reading XLSX attachments needs openpyxl: pip install openpyxl"
        )
    collector = _Collector(max_chars, "\n")
    try:
        workbook = openpyxl.load_workbook(str(path), read_only=True, data_only=True)
        try:
            _collect_sheets(workbook, collector)
        finally:
            workbook.close()
    except Exception as exc:  # openpyxl raises many types on malformed files
        return AttachmentText("", "xlsx", False, f"cannot read XLSX {path.name}: {_one_line(exc)}")
    return collector.result("xlsx")


def _collect_sheets(workbook: Any, collector: _Collector) -> None:
    """One ``## sheet: NAME`` header per sheet, then rows as tab-separated values."""
    for sheet in workbook.worksheets:
        if not collector.add(f"## sheet: {sheet.title}"):
            return
        for row in sheet.iter_rows(values_only=True):
            cells = ["" if value is None else str(value) for value in row]
            if not collector.add("\t".join(cells).rstrip("\t")):
                return


def _one_line(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__
