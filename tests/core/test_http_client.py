"""The sampler's HTTP/1.1 client against scripted servers on real sockets: every body
framing, keep-alive reuse and when a connection must not be reused, the two timeouts,
broken replies, TLS, and a body larger than its read-ahead limit."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from pytest_agenteval.models import _http
from pytest_agenteval.models._http import HttpClient, HttpError, IdleTimeout
from pytest_agenteval.models._openai import OpenAISampler, _Retryable

Reply = Callable[[asyncio.StreamReader, asyncio.StreamWriter, dict], Awaitable[bool]]


class Scripted:
    """A TCP server whose every request is answered by `reply(reader, writer, request)`;
    the reply returns whether to keep the connection for another request."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict] = []
        self.connections = 0

    async def __aenter__(self) -> Scripted:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1/chat/completions"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)
                }
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                request = {"line": lines[0], "headers": headers, "body": json.loads(body) if body else None}
                self.requests.append(request)
                if not await self.reply(reader, writer, request):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def raw(data: bytes, keep: bool = True) -> Reply:
    async def reply(reader, writer, request) -> bool:
        writer.write(data)
        await writer.drain()
        return keep

    return reply


OK_JSON = b'{"ok": true}'
FRAMINGS = [
    ("content-length", b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + OK_JSON, True),
    (
        "chunked, extensions and trailers",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5;name=value\r\n{"ok"\r\n7\r\n: true}\r\n0\r\nX-Trailer: 1\r\n\r\n',
        True,
    ),
    ("read to close", b"HTTP/1.1 200 OK\r\n\r\n" + OK_JSON, False),
    ("HTTP/1.0 without keep-alive", b"HTTP/1.0 200 OK\r\nContent-Length: 12\r\n\r\n" + OK_JSON, False),
    (
        "HTTP/1.0 with keep-alive",
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 12\r\n\r\n" + OK_JSON,
        True,
    ),
    (
        "Connection: close",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 12\r\n\r\n" + OK_JSON,
        False,
    ),
    (
        "100 Continue first",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + OK_JSON,
        True,
    ),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("name", "response", "reused"), FRAMINGS, ids=[f[0] for f in FRAMINGS])
async def test_every_framing_reads_the_same_body_and_keeps_the_connection_only_when_allowed(
    name: str, response: bytes, reused: bool
) -> None:
    async with Scripted(raw(response, keep=name != "read to close")) as server:
        client = HttpClient()
        bodies = []
        for _ in range(3):
            async with await client.post(server.url, {"n": 1}, {}, timeout=5) as response_:
                bodies.append((response_.status, json.loads(await response_.read())))
        client.close()
    assert bodies == [(200, {"ok": True})] * 3
    assert server.connections == (1 if reused else 3)


@pytest.mark.asyncio
async def test_the_request_is_json_with_its_length_host_and_headers() -> None:
    async with Scripted(raw(b"HTTP/1.1 204 No Content\r\n\r\n")) as server:
        client = HttpClient()
        async with await client.post(
            server.url, {"messages": ["é"]}, {"Authorization": "Bearer k"}, timeout=5
        ) as r:
            assert (r.status, await r.read()) == (204, b"")
        client.close()
    (request,) = server.requests
    host = server.url.split("/")[2]
    assert request["line"] == "POST /v1/chat/completions HTTP/1.1"
    assert request["body"] == {"messages": ["é"]}
    assert (request["headers"]["host"], request["headers"]["authorization"]) == (host, "Bearer k")
    assert request["headers"]["accept-encoding"] == "identity"


@pytest.mark.asyncio
async def test_a_path_beyond_ascii_is_percent_encoded() -> None:
    async with Scripted(raw(b"HTTP/1.1 204 No Content\r\n\r\n")) as server:
        client = HttpClient()
        url = server.url.replace("/v1/chat/completions", "/modèle/v1/chat/completions?q=é")
        async with await client.post(url, {}, {"X-Note": "naïve"}, timeout=5) as r:
            assert r.status == 204
        client.close()
    (request,) = server.requests
    assert request["line"] == "POST /mod%C3%A8le/v1/chat/completions?q=%C3%A9 HTTP/1.1"


@pytest.mark.asyncio
async def test_headers_are_lower_case_and_repeated_ones_joined() -> None:
    response = (
        b"HTTP/1.1 429 Too Many\r\nRetry-After: 2\r\nX-A: 1\r\nx-a: 2\r\n"
        b"Content-Type: Text/Event-Stream; charset=utf-8\r\nContent-Length: 0\r\n\r\n"
    )
    async with Scripted(raw(response)) as server:
        client = HttpClient()
        async with await client.post(server.url, {}, {}, timeout=5) as r:
            assert (r.status, r.headers["retry-after"], r.headers["x-a"]) == (429, "2", "1, 2")
            assert r.content_type == "text/event-stream"
        client.close()


def _sse(pieces: tuple[bytes, ...], pause_s: float) -> Reply:
    """A chunked event stream, a chunk a piece with `pause_s` after each, then its end."""

    async def reply(reader, writer, request) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(pause_s)
        writer.write(b"0\r\n\r\n")
        return True

    return reply


@pytest.mark.asyncio
async def test_lines_split_across_chunk_boundaries_keep_their_newline() -> None:
    reply = _sse((b'data: {"a"', b": 1}\n\nda", b"ta: [DONE]\n", b"tail"), pause_s=0.01)
    async with Scripted(reply) as server:
        client = HttpClient()
        async with await client.post(server.url, {}, {}, timeout=5, idle=2) as r:
            lines = [line async for line in r.lines()]
        client.close()
    assert lines == [b'data: {"a": 1}\n', b"\n", b"data: [DONE]\n", b"tail"]


@pytest.mark.asyncio
async def test_a_stream_read_to_its_done_line_keeps_its_connection() -> None:
    """The sampler stops reading at `data: [DONE]`; the chunked body's end comes after it
    (here in a later packet), and drain() reads it so the connection is reused."""
    reply = _sse((b"data: [DONE]\n",), pause_s=0.05)
    async with Scripted(reply) as server:
        client = HttpClient()
        for _ in range(3):
            async with await client.post(server.url, {}, {}, timeout=5, idle=2) as r:
                async for line in r.lines():
                    if line.startswith(b"data: [DONE]"):
                        break
                await r.drain()
        client.close()
    assert (server.connections, len(server.requests)) == (1, 3)


@pytest.mark.asyncio
async def test_drain_gives_up_on_a_body_that_does_not_end() -> None:
    async def reply(reader, writer, request) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        await asyncio.sleep(5)
        return False

    async with Scripted(reply) as server:
        client = HttpClient()
        started = time.monotonic()
        async with await client.post(server.url, {}, {}, timeout=30, idle=20) as r:
            await r.drain(wait_s=0.2)
        elapsed = time.monotonic() - started
        client.close()
    assert elapsed < 2.0


@pytest.mark.asyncio
async def test_a_line_over_the_limit_is_a_value_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http, "MAX_LINE", 1000)
    async with Scripted(raw(b"HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n" + b"x" * 3000)) as server:
        client = HttpClient()
        with pytest.raises(ValueError, match="over 1000 bytes"):
            async with await client.post(server.url, {}, {}, timeout=5) as r:
                async for _ in r.lines():
                    pass
        client.close()


BROKEN = [
    ("cut Content-Length body", b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n" + OK_JSON, "after 12 of 50"),
    ("cut chunk", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n" + OK_JSON, "mid-chunk"),
    (
        "no terminating chunk",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nc\r\n" + OK_JSON + b"\r\n",
        "mid-response",
    ),
    ("bad chunk size", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
    (
        "chunk longer than said",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n" + OK_JSON,
        "longer",
    ),
    ("closed before answering", b"", "before answering"),
    ("half a head", b"HTTP/1.1 200 OK\r\nContent-Le", "before answering"),
    ("not HTTP", b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "not an HTTP/1.x response"),
    ("bad status", b"HTTP/1.1 abc OK\r\n\r\n", "not an HTTP/1.x response"),
    ("bad Content-Length", b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", "bad Content-Length"),
    # int() takes a sign: a negative length used to be read in a busy loop, forever
    ("negative Content-Length", b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello", "bad Content-Length"),
    ("Content-Length 1_0", b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\n" + OK_JSON, "bad Content-Length"),
    (
        "negative chunk size",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello world\r\n0\r\n\r\n",
        "bad chunk size",
    ),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("name", "response", "message"), BROKEN, ids=[b[0] for b in BROKEN])
async def test_a_broken_reply_is_an_http_error_and_the_connection_is_not_reused(
    name: str, response: bytes, message: str
) -> None:
    async with Scripted(raw(response, keep=False)) as server:
        client = HttpClient()
        for _ in range(2):
            with pytest.raises(HttpError, match=message):
                async with await client.post(server.url, {}, {}, timeout=5) as r:
                    await r.read()
        client.close()
    assert server.connections == 2
    assert issubclass(HttpError, OSError)  # the sampler counts it as a connection fault


@pytest.mark.asyncio
async def test_a_reset_mid_body_is_an_http_error() -> None:
    async def reply(reader, writer, request) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()
        writer.transport.abort()  # RST, not FIN
        return False

    async with Scripted(reply) as server:
        client = HttpClient()
        with pytest.raises(HttpError):
            async with await client.post(server.url, {}, {}, timeout=5) as r:
                await r.read()
        client.close()


@pytest.mark.asyncio
async def test_a_refused_connection_is_an_oserror() -> None:
    async with Scripted(raw(b"")) as server:
        url = server.url
    client = HttpClient()
    with pytest.raises(OSError):
        await client.post(url, {}, {}, timeout=5)


def _stall_after(head: bytes, seconds: float) -> Reply:
    async def reply(reader, writer, request) -> bool:
        writer.write(head)
        await writer.drain()
        await asyncio.sleep(seconds)
        return False

    return reply


def _trickle(count: int, every_s: float, length: int) -> Reply:
    """A body of `length` bytes declared, `count` of them sent one every `every_s`."""

    async def reply(reader, writer, request) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length)
        for _ in range(count):
            await asyncio.sleep(every_s)
            writer.write(b"x")
            await writer.drain()
        return count == length

    return reply


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "head",
    [b"", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\ndata:\r\n"],
    ids=["before the head", "mid-stream"],
)
async def test_silence_past_the_idle_timeout_is_a_stall_and_honest_traffic_is_not(head: bytes) -> None:
    async with Scripted(_stall_after(head, 3)) as server:
        client = HttpClient()
        started = time.monotonic()
        with pytest.raises(IdleTimeout):
            async with await client.post(server.url, {}, {}, timeout=30, idle=0.3) as r:
                await r.read()
        elapsed = time.monotonic() - started
        client.close()
    assert 0.3 <= elapsed < 2.0

    async with Scripted(_trickle(10, every_s=0.1, length=10)) as server:  # a byte every 0.1 s: alive
        client = HttpClient()
        async with await client.post(server.url, {}, {}, timeout=30, idle=0.3) as r:
            assert await r.read() == b"x" * 10
        client.close()


@pytest.mark.asyncio
async def test_the_whole_request_has_one_deadline_even_while_bytes_keep_coming() -> None:
    async with Scripted(_trickle(100, every_s=0.05, length=1000)) as server:
        client = HttpClient()
        started = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            async with await client.post(server.url, {}, {}, timeout=0.5, idle=0.3) as r:
                await r.read()
        elapsed = time.monotonic() - started
        client.close()
    assert 0.5 <= elapsed < 2.0


@pytest.mark.asyncio
async def test_a_pooled_connection_the_server_closed_is_not_used_again() -> None:
    async def once(reader, writer, request) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + OK_JSON)
        await writer.drain()
        return False  # closes after answering, without saying Connection: close

    async with Scripted(once) as server:
        client = HttpClient()
        for _ in range(3):
            async with await client.post(server.url, {}, {}, timeout=5) as r:
                assert await r.read() == OK_JSON
            await asyncio.sleep(0.05)  # the FIN arrives while the connection is idle
        client.close()
    assert (server.connections, len(server.requests)) == (3, 3)


@pytest.mark.asyncio
async def test_an_unread_body_closes_its_connection() -> None:
    async with Scripted(raw(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + OK_JSON)) as server:
        client = HttpClient()
        for _ in range(2):
            async with await client.post(server.url, {}, {}, timeout=5) as r:
                assert r.status == 200
        client.close()
    assert server.connections == 2


@pytest.mark.asyncio
async def test_a_body_larger_than_the_read_ahead_limit_arrives_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http, "HIGH_WATER", 64 * 1024)
    payload = bytes(range(256)) * 20_000  # 5 MB
    async with Scripted(
        raw(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
    ) as server:
        client = HttpClient()
        async with await client.post(server.url, {}, {}, timeout=30) as r:
            pieces = []
            async for piece in r._pieces():
                pieces.append(piece)
                await asyncio.sleep(0.01)  # a slow reader: the socket must pause, not the memory grow
        client.close()
    assert b"".join(pieces) == payload
    assert max(map(len, pieces)) <= 64 * 1024 + 256 * 1024  # the limit and one read of the socket


def test_connections_are_not_carried_into_another_event_loop() -> None:
    async def run(client: HttpClient, url: str) -> bytes:
        async with await client.post(url, {}, {}, timeout=5) as r:
            return await r.read()

    async def main() -> tuple[list[bytes], int]:
        async with Scripted(raw(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + OK_JSON)) as server:
            client = HttpClient()
            first = await run(client, server.url)
            second = await asyncio.get_running_loop().run_in_executor(
                None, asyncio.run, run(client, server.url)
            )
            client.close()
            return [first, second], server.connections

    bodies, connections = asyncio.run(main())
    assert bodies == [OK_JSON, OK_JSON] and connections == 2


@pytest.fixture
def self_signed(tmp_path: Path) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a self-signed certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return tmp_path


@contextlib.asynccontextmanager
async def tls_scripted(certs: Path) -> AsyncIterator[tuple[Scripted, int]]:
    """A Scripted server behind TLS with the self-signed certificate; yields it and its port."""
    import ssl

    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(certs / "cert.pem", certs / "key.pem")
    scripted = Scripted(raw(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + OK_JSON))
    server = await asyncio.start_server(scripted._serve, "127.0.0.1", 0, ssl=server_side)
    try:
        yield scripted, server.sockets[0].getsockname()[1]
    finally:
        server.close()


@pytest.mark.asyncio
async def test_https_verifies_the_server_against_the_trusted_certificates(
    self_signed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ssl

    async with tls_scripted(self_signed) as (scripted, port):
        url = f"https://localhost:{port}/v1/chat/completions"
        monkeypatch.setattr(_http, "_tls_context", None)
        client = HttpClient()
        with pytest.raises(HttpError) as refused:  # not trusted: refused
            await client.post(url, {}, {}, timeout=5)
        assert isinstance(refused.value.__cause__, ssl.SSLCertVerificationError)
        monkeypatch.setenv("SSL_CERT_FILE", str(self_signed / "cert.pem"))
        monkeypatch.setattr(_http, "_tls_context", None)
        async with await client.post(url, {}, {}, timeout=5) as r:
            assert (r.status, await r.read()) == (200, OK_JSON)
        client.close()
    assert len(scripted.requests) == 1


@pytest.mark.asyncio
async def test_a_pooled_connection_idle_past_the_keepalive_is_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A NAT or firewall may forget an idle flow without a FIN: a request sent into it would
    wait out its timeout. Here the server answers once per connection and then ignores it,
    as such a black hole does; past KEEPALIVE_S idle the next request takes a new socket."""
    monkeypatch.setattr(_http, "KEEPALIVE_S", 0.3)

    async def once_then_black_hole(reader, writer, request) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + OK_JSON)
        await writer.drain()
        await asyncio.sleep(3600)  # the flow is forgotten: nothing more is read or answered
        return False

    async with Scripted(once_then_black_hole) as server:
        client = HttpClient()
        for pause in (0.0, 0.5):
            await asyncio.sleep(pause)
            async with await client.post(server.url, {}, {}, timeout=3) as r:
                assert await r.read() == OK_JSON
        client.close()
    assert server.connections == 2


BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


async def _cause_of_post(endpoint: str, stream: bool = False) -> _Retryable:
    sampler = OpenAISampler([endpoint], "m", stream=stream)
    try:
        with pytest.raises(_Retryable) as caught:
            await sampler._post(sampler._ensure_session(), endpoint, BODY, "chat/completions")
    finally:
        await sampler.aclose()
    return caught.value


@pytest.mark.asyncio
async def test_a_connect_the_kernel_times_out_is_a_connection_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OSError(ETIMEDOUT) from connect() (SYNs unanswered) is built as TimeoutError, which
    on Python >= 3.11 is asyncio.TimeoutError: it must not pass for the request's own
    deadline (a stall, retried without backoff)."""

    async def create_connection(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ETIMEDOUT, "Connect call failed ('10.255.255.1', 80)")

    monkeypatch.setattr(asyncio.get_running_loop(), "create_connection", create_connection)
    assert (await _cause_of_post("http://10.255.255.1/v1")).cause == "connection"


@pytest.mark.asyncio
async def test_an_untrusted_certificate_is_a_connection_failure(
    self_signed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ssl.SSLCertVerificationError is a ValueError too: not a "truncated" reply."""
    import ssl

    monkeypatch.setattr(_http, "_tls_context", None)
    async with tls_scripted(self_signed) as (_, port):
        failure = await _cause_of_post(f"https://localhost:{port}/v1")
    assert failure.cause == "connection" and isinstance(failure.__cause__, HttpError)
    assert isinstance(failure.__cause__.__cause__, ssl.SSLCertVerificationError)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "chunk",
    [b"null", b"[1]", b'{"choices": [{"index": 0, "delta": {"content": ["a"]}}]}', b'{"choices": [7]}'],
    ids=["null", "a-list", "content-a-list", "choice-a-number"],
)
async def test_a_streamed_chunk_of_another_shape_is_a_retryable_failure(chunk: bytes) -> None:
    """JSON, but not the protocol's objects: retried like a broken body, never an
    exception of its own escaping the sampler (it was a TypeError or AttributeError)."""
    async with Scripted(_sse((b"data: " + chunk + b"\n\n", b"data: [DONE]\n\n"), pause_s=0)) as server:
        failure = await _cause_of_post(server.url.removesuffix("/chat/completions"), stream=True)
    assert failure.cause == "truncated"


@pytest.mark.asyncio
async def test_a_server_that_accepts_and_never_speaks_tls_is_a_stall_within_the_idle_timeout() -> None:
    async with Scripted(_stall_after(b"", 5)) as server:  # TCP accepted; no handshake, no byte
        client = HttpClient()
        started = time.monotonic()
        with pytest.raises(IdleTimeout):
            await client.post(server.url.replace("http://", "https://"), {}, {}, timeout=30, idle=0.3)
        elapsed = time.monotonic() - started
        client.close()
    assert 0.3 <= elapsed < 2.0
