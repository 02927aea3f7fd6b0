"""The HTTP/1.1 client of the OpenAI-protocol sampler: keep-alive connections, JSON
POSTs, bodies framed by Content-Length, chunked or read to close, TLS, and the two
timeouts a generation needs (the whole request; silence between bytes, the stall signal).

Why not aiohttp here: importing its client costs about 90 ms of CPU (it loads the CA
bundle into two SSL contexts at import, and its parser and helpers), and every worker
paid it on the way to its first request. This module imports nothing asyncio has not;
TLS loads its context on the first https request only. What it leaves out, because
OpenAI-protocol servers do not need it: redirects, cookies, proxies (aiohttp ignores
them too unless told), credentials in the URL (refused at start-up: they would be
recorded with the results), compression (it asks for none), HTTP/2."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

MAX_HEAD = 64 * 1024  # a status line and headers; more is not an HTTP server
MAX_LINE = 2 * 1024 * 1024  # a streamed line (one chunk can be a whole tool call)
HIGH_WATER = 8 * 1024 * 1024  # unread bytes at which the socket stops being read
# A pooled connection idle longer is closed, not reused (aiohttp's keepalive_timeout): a
# NAT or load balancer may have forgotten the flow without a FIN, and a request sent into
# it would wait out the idle timeout as a stall.
KEEPALIVE_S = 15.0
HEX = frozenset(b"0123456789abcdefABCDEF")
USER_AGENT = "pytest-agenteval"


class HttpError(OSError):
    """The connection failed or ended before the response did, or the reply is not
    HTTP/1.x; the request's outcome is unknown (an OSError, as a reset is)."""


class IdleTimeout(Exception):
    """Nothing arrived for the idle timeout while a response was awaited or read."""


_tls_context: Any = None


def _tls() -> Any:
    global _tls_context
    if _tls_context is None:
        import ssl

        _tls_context = ssl.create_default_context()
    return _tls_context


def _limit(loop: asyncio.AbstractEventLoop, deadline: float, idle: float | None) -> tuple[float, bool]:
    """How long the next wait may last, and whether the idle timeout (not the request's
    deadline) is what bounds it."""
    left = deadline - loop.time()
    return (idle, True) if idle is not None and idle < left else (left, False)


class _Connection(asyncio.Protocol):
    """One socket: what arrived (unread), whether it ended, and one waiter."""

    def __init__(self, loop: asyncio.AbstractEventLoop, key: tuple[str, str, int]) -> None:
        self.loop = loop
        self.key = key
        self.transport: Any = None
        self.buffer = bytearray()
        self.ended = False  # EOF or closed: no byte will come
        self.error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.idle_since = 0.0  # when it went back to the pool

    # asyncio.Protocol
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > HIGH_WATER and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: BaseException | None) -> None:
        self.ended = True
        self.error = exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # the reader's side
    @property
    def reusable(self) -> bool:
        return (
            not self.ended
            and not self.buffer
            and self.transport is not None
            and not self.transport.is_closing()
        )

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()  # unread bytes or a request in flight: nothing to flush
        self.ended = True

    def take(self, n: int) -> bytes:
        piece = bytes(self.buffer[:n])
        del self.buffer[:n]
        if self._paused and len(self.buffer) < HIGH_WATER // 2:
            self._paused = False
            self.transport.resume_reading()
        return piece

    async def more(self, deadline: float, idle: float | None) -> bool:
        """Wait for bytes past those buffered; False when the connection has ended.
        Raises asyncio.TimeoutError at the deadline, IdleTimeout after `idle` silent
        seconds, HttpError when the connection broke."""
        if self.ended:
            if self.error is not None:
                raise HttpError(f"connection lost: {self.error}") from self.error
            return False
        seconds, stall = _limit(self.loop, deadline, idle)
        if seconds <= 0:
            raise asyncio.TimeoutError
        waiter = self._waiter = self.loop.create_future()
        timer = self.loop.call_later(seconds, self._expire, waiter, stall)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
        if self.ended and self.error is not None:
            raise HttpError(f"connection lost: {self.error}") from self.error
        return not self.ended or bool(self.buffer)

    @staticmethod
    def _expire(waiter: asyncio.Future[None], stall: bool) -> None:
        if not waiter.done():
            waiter.set_exception(IdleTimeout() if stall else asyncio.TimeoutError())

    async def pieces(self, n: int, deadline: float, idle: float | None, cut: str) -> AsyncIterator[bytes]:
        """The next `n` bytes as they arrive; HttpError(`cut`, formatted with `got` and `n`)
        when the connection ends first."""
        left = n
        while left:
            if not self.buffer and not await self.more(deadline, idle):
                raise HttpError(cut.format(got=n - left, n=n))
            piece = self.take(min(left, len(self.buffer)))
            left -= len(piece)
            yield piece

    async def line(self, deadline: float, idle: float | None, limit: int) -> bytes:
        """Up to and without CRLF (or LF)."""
        start = 0
        while True:
            end = self.buffer.find(b"\n", start)
            if end >= 0:
                return self.take(end + 1).rstrip(b"\r\n")
            if len(self.buffer) > limit:
                raise HttpError(f"a line of the response is over {limit} bytes")
            start = len(self.buffer)
            if not await self.more(deadline, idle):
                raise HttpError("the server closed the connection mid-response")


class Response:
    """Status, headers (lower-case names) and a body read once: `read()` or `lines()`.
    Use it as an async context manager; the connection goes back to the pool only when
    the body was read to its end."""

    def __init__(
        self,
        client: HttpClient,
        conn: _Connection,
        status: int,
        headers: dict[str, str],
        framing: tuple[str, int],
        keep_alive: bool,
        deadline: float,
        idle: float | None,
    ) -> None:
        self.status = status
        self.headers = headers
        self._client = client
        self._conn: _Connection | None = conn
        self._framing = framing
        self._keep_alive = keep_alive
        self._deadline = deadline
        self._idle = idle
        self._body: AsyncIterator[bytes] | None = None  # one reader of the body, resumable

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Return the connection if the body was read whole and both ends keep it; else
        close it."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._framing[0] == "done" and self._keep_alive and conn.reusable:
            self._client._put(conn)
        else:
            conn.close()

    def _pieces(self) -> AsyncIterator[bytes]:
        if self._body is None:
            self._body = self._read_body()
        return self._body

    async def read(self) -> bytes:
        return b"".join([piece async for piece in self._pieces()])

    async def drain(self, limit: int = 64 * 1024, wait_s: float = 1.0) -> None:
        """Read what is left of a body its reader stopped short of (a stream read to its
        `data: [DONE]` line: the chunked body's end comes after it), so that the connection
        is kept. A rest over `limit` bytes, or not there within `wait_s`, is left: the
        connection is closed instead."""
        if self._conn is None or self._framing[0] in ("done", "close"):  # "close": never kept
            return
        self._idle, self._deadline = None, min(self._deadline, self._conn.loop.time() + wait_s)
        seen = 0
        try:
            async for piece in self._pieces():
                seen += len(piece)
                if seen > limit:
                    return
        except (OSError, IdleTimeout, asyncio.TimeoutError):
            return

    async def lines(self) -> AsyncIterator[bytes]:
        """The body split after each LF (the LF kept, as aiohttp's StreamReader has it);
        a line over MAX_LINE bytes is a ValueError."""
        pending = bytearray()
        async for piece in self._pieces():
            pending += piece
            start = 0
            while (end := pending.find(b"\n", start)) >= 0:
                yield bytes(pending[start : end + 1])
                start = end + 1
            del pending[:start]
            if len(pending) > MAX_LINE:
                raise ValueError(f"a streamed line is over {MAX_LINE} bytes")
        if pending:
            yield bytes(pending)

    async def _read_body(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            raise RuntimeError("the response was released")
        kind, size = self._framing
        mid_chunk = "the server closed the connection mid-chunk"
        if kind == "length":
            cut = "the server closed the connection after {got} of {n} body bytes"
            async for piece in conn.pieces(size, self._deadline, self._idle, cut):
                yield piece
        elif kind == "chunked":
            while True:
                header = await conn.line(self._deadline, self._idle, MAX_HEAD)
                digits = header.split(b";", 1)[0].strip()
                if not digits or not HEX.issuperset(digits):  # int() would take a sign
                    raise HttpError(f"a bad chunk size line: {header[:40]!r}")
                left = int(digits, 16)
                if left == 0:  # the trailers, to the empty line
                    while await conn.line(self._deadline, self._idle, MAX_HEAD):
                        pass
                    break
                async for piece in conn.pieces(left, self._deadline, self._idle, mid_chunk):
                    yield piece
                end = [p async for p in conn.pieces(2, self._deadline, self._idle, mid_chunk)]
                if b"".join(end) != b"\r\n":
                    raise HttpError("a chunk is longer than its size line says")
        elif kind == "close":  # no length: the body is what comes until the server closes
            while conn.buffer or await conn.more(self._deadline, self._idle):
                yield conn.take(len(conn.buffer))
        self._framing = ("done", 0)


class HttpClient:
    """Connections kept alive per (scheme, host, port), for one event loop at a time."""

    def __init__(self, max_idle: int = 64) -> None:
        self.max_idle = max_idle
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def _get(self, key: tuple[str, str, int]) -> _Connection | None:
        pool = self._idle.get(key)
        while pool:
            conn = pool.pop()
            if conn.reusable and conn.loop.time() - conn.idle_since <= KEEPALIVE_S:
                return conn
            conn.close()
        return None

    def _put(self, conn: _Connection) -> None:
        if conn.loop is not self._loop:
            conn.close()
            return
        pool = self._idle.setdefault(conn.key, [])
        if len(pool) < self.max_idle:
            conn.idle_since = conn.loop.time()
            pool.append(conn)
        else:
            conn.close()

    async def post(
        self,
        url: str,
        payload: Mapping[str, Any],
        headers: Mapping[str, str],
        *,
        timeout: float,
        idle: float | None = None,
    ) -> Response:
        """POST `payload` as JSON. The status and headers are awaited here; the body is
        read from the Response within the same `timeout` (seconds from now), and with
        `idle` set, silence of that many seconds anywhere is IdleTimeout."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop: the old one's sockets are not usable here
            self._idle.clear()
            self._loop = loop
        deadline = loop.time() + timeout
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise HttpError(f"not an http(s) URL: {url}")
        host = parts.hostname
        port = parts.port or (443 if scheme == "https" else 80)
        key = (scheme, host, port)
        body = json.dumps(payload).encode()
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if not target.isascii():  # a request line is ASCII: percent-encode, as a browser does
            target = quote(target, safe="/%?=&:@!$'()*+,;~")
        authority = parts.netloc.rpartition("@")[2]
        head = [
            f"POST {target} HTTP/1.1",
            f"Host: {authority}",
            f"User-Agent: {USER_AGENT}",
            "Accept: */*",
            "Accept-Encoding: identity",
            f"Content-Length: {len(body)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        message = ("\r\n".join(head) + "\r\n\r\n").encode() + body  # UTF-8 header values, if any
        conn = self._get(key) or await self._connect(loop, key, deadline, idle)
        try:
            conn.transport.write(message)
            response = await self._head(conn, deadline, idle)
        except BaseException:
            conn.close()
            raise
        return response

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, key: tuple[str, str, int], deadline: float, idle: float | None
    ) -> _Connection:
        """A new connection (TLS handshake included) within the deadline, and within `idle`
        when set: a server that accepts and says nothing is a stall here too."""
        scheme, host, port = key
        tls = _tls() if scheme == "https" else None
        conn = _Connection(loop, key)
        connect = loop.create_connection(
            lambda: conn, host, port, ssl=tls, server_hostname=host if tls else None
        )
        seconds, stall = _limit(loop, deadline, idle)
        try:
            await asyncio.wait_for(connect, max(0.0, seconds))
        except asyncio.TimeoutError as exc:
            if getattr(exc, "errno", None) is not None:  # the kernel's ETIMEDOUT, not wait_for's
                raise HttpError(f"cannot connect to {host}:{port}: {exc}") from exc
            if stall:
                raise IdleTimeout() from exc
            raise
        except (OSError, UnicodeError) as exc:  # refused, unreachable, DNS (UnicodeError: not a
            # name IDNA can encode), TLS (a certificate error is a ValueError too)
            raise HttpError(f"cannot connect to {host}:{port}: {exc}") from exc
        return conn

    async def _head(self, conn: _Connection, deadline: float, idle: float | None) -> Response:
        while True:  # 1xx answers (100 Continue) precede the real one
            end = conn.buffer.find(b"\r\n\r\n")
            while end < 0:
                if len(conn.buffer) > MAX_HEAD:
                    raise HttpError(f"the response's headers are over {MAX_HEAD} bytes")
                if not await conn.more(deadline, idle):
                    raise HttpError("the server closed the connection before answering")
                end = conn.buffer.find(b"\r\n\r\n")
            lines = conn.take(end + 4).decode("latin-1").split("\r\n")
            version, _, rest = lines[0].partition(" ")
            try:
                status = int(rest[:3])
            except ValueError:
                status = 0
            if not version.startswith("HTTP/1.") or not 100 <= status <= 599:
                raise HttpError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
            if status >= 200:
                break
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                name, value = name.strip().lower(), value.strip()
                headers[name] = f"{headers[name]}, {value}" if name in headers else value
        connection = headers.get("connection", "").lower()
        keep_alive = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
        if status in (204, 304):
            framing = ("done", 0)
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            framing = ("chunked", 0)
        elif "content-length" in headers:
            length = headers["content-length"]
            if not length.isascii() or not length.isdigit():  # int() would take "-5", "1_0"
                raise HttpError(f"a bad Content-Length: {length[:40]!r}")
            size = int(length)
            framing = ("length", size) if size else ("done", 0)
        else:
            framing, keep_alive = ("close", 0), False
        return Response(self, conn, status, headers, framing, keep_alive, deadline, idle)

    def close(self) -> None:
        """Close the idle connections (those of a loop that has ended went with it)."""
        for pool in self._idle.values():
            for conn in pool:
                if not conn.loop.is_closed():
                    conn.close()
        self._idle.clear()
