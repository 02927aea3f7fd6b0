"""An append-only file of results lines, read back by offset: where finished problem
lines live during a run, so the controller's memory does not grow with the run.

Writes go straight to the OS (`os.pwrite`, no buffer: a line survives SIGKILL once
`append` returns); a failed append is cut off again so the file stays whole lines."""

from __future__ import annotations

import os
import tempfile
import weakref
from pathlib import Path

_CHUNK = 1 << 20


class Spool:
    def __init__(self, fd: int, path: Path | None) -> None:
        self.fd = fd
        self.path = path  # None: a private file, unlinked at once (gone when closed)
        self.end = 0
        # a run that never gets to close it (an error in sessionfinish) does not leak it
        self._finalizer = weakref.finalize(self, _close_quietly, fd)

    @classmethod
    def create(cls, path: Path) -> Spool:
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(_open(path), path)

    @classmethod
    def private(cls, folder: Path | None = None) -> Spool:
        """A file only this process can reach (mode 0600, no name) in `folder`, else in
        $TMPDIR. Raises OSError."""
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".agenteval-lines-", dir=folder)
        try:
            os.unlink(name)
        except OSError:
            os.close(fd)
            _unlink_quietly(Path(name))
            raise
        return cls(fd, None)

    def append(self, data: bytes) -> int:
        """Write `data` at the end; its offset. Raises OSError with nothing left behind."""
        offset = self.end
        try:
            _write_all(self.fd, data, offset)
        except OSError:
            try:
                os.ftruncate(self.fd, offset)
            except OSError:
                pass
            raise
        self.end = offset + len(data)
        return offset

    def read(self, offset: int, length: int) -> bytes:
        parts = []
        while length > 0:
            part = os.pread(self.fd, min(length, _CHUNK), offset)
            if not part:
                raise OSError(f"{self.path or 'the private results spool'} is shorter than expected")
            parts.append(part)
            offset += len(part)
            length -= len(part)
        return b"".join(parts)

    def deleted(self) -> bool:
        return os.fstat(self.fd).st_nlink == 0

    def recreate(self) -> int:
        """Write the file again at its path (someone deleted it) from the still-open old
        one, at the same offsets; the number of lines in it. Raises OSError, and then
        keeps reading (and nothing else) from the old one."""
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)  # the folder may be gone too
        fd = _open(self.path)
        lines = 0
        try:
            for offset in range(0, self.end, _CHUNK):
                block = self.read(offset, min(_CHUNK, self.end - offset))
                _write_all(fd, block, offset)
                lines += block.count(b"\n")
        except OSError:
            os.close(fd)
            _unlink_quietly(self.path)  # a cut-off copy would read as a crash's leftovers
            raise
        self._finalizer.detach()
        os.close(self.fd)
        self.fd = fd
        self._finalizer = weakref.finalize(self, _close_quietly, fd)
        return lines

    def close(self) -> None:
        if self.fd >= 0:
            self._finalizer.detach()
            _close_quietly(self.fd)
            self.fd = -1


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
