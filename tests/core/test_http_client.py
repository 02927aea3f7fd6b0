"""The sampler's HTTP client (aiohttp) against scripted servers on real sockets: every
body framing, keep-alive reuse and when a connection must not be reused, a kept-alive
connection the server closed as the request went out, the two timeouts, broken replies,
the body cap, proxies from the environment, TLS, and header values kept out of errors."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import json
import shutil
import socket
import struct
import subprocess
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from pytest_agenteval.models import FatalRequestError, OpenAISampler, SamplingParams
from pytest_agenteval.models.http import client as http_client
from pytest_agenteval.models.http.client import HttpClient, HttpError, IdleTimeout
from pytest_agenteval.models.http.replies import Retryable

Reply = Callable[[asyncio.StreamReader, asyncio.StreamWriter, dict], Awaitable[bool]]


class Scripted:
    """A TCP server whose every request is answered by `reply(reader, writer, request)`;
    the reply returns whether to keep the connection for another request. Each request
    records its connection's number and its place on that connection."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict] = []
        self.connections = 0

    async def __aenter__(self) -> Scripted:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1/chat/completions"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection, index = self.connections, 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)
                }
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                request = {
                    "line": lines[0],
                    "headers": headers,
                    "body": json.loads(body) if body else None,
                    "connection": connection,
                    "index": index,
                }
                self.requests.append(request)
                index += 1
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


def hang_up(writer: asyncio.StreamWriter, how: str) -> None:
    """Close without a reply: "FIN" as a server's idle timeout does, "RST" as a reset."""
    if how == "RST":
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


OK_JSON = b'{"ok": true}'
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + OK_JSON
FRAMINGS = [
    ("content-length", OK, True),
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
    ("100 Continue first", b"HTTP/1.1 100 Continue\r\n\r\n" + OK, True),
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
        await client.close()
    assert bodies == [(200, {"ok": True})] * 3
    assert server.connections == (1 if reused else 3)
    assert client.counts["stale_connection_retries"] == 0


@pytest.mark.asyncio
async def test_the_request_is_json_with_its_length_host_and_headers() -> None:
    async with Scripted(raw(b"HTTP/1.1 204 No Content\r\n\r\n")) as server:
        client = HttpClient()
        async with await client.post(
            server.url, {"messages": ["é"]}, {"Authorization": "Bearer k"}, timeout=5
        ) as r:
            assert (r.status, await r.read()) == (204, b"")
        await client.close()
    (request,) = server.requests
    host = server.url.split("/")[2]
    assert request["line"] == "POST /v1/chat/completions HTTP/1.1"
    assert request["body"] == {"messages": ["é"]}
    assert (request["headers"]["host"], request["headers"]["authorization"]) == (host, "Bearer k")
    assert (request["headers"]["accept-encoding"], request["headers"]["user-agent"]) == (
        "identity",
        "pytest-agenteval",
    )
    assert "cookie" not in request["headers"]


@pytest.mark.asyncio
async def test_a_path_beyond_ascii_is_percent_encoded() -> None:
    async with Scripted(raw(b"HTTP/1.1 204 No Content\r\n\r\n")) as server:
        client = HttpClient()
        url = server.url.replace("/v1/chat/completions", "/modèle/v1/chat/completions?q=é")
        async with await client.post(url, {}, {"X-Note": "naïve"}, timeout=5) as r:
            assert r.status == 204
        await client.close()
    (request,) = server.requests
    assert request["line"] == "POST /mod%C3%A8le/v1/chat/completions?q=%C3%A9 HTTP/1.1"


@pytest.mark.asyncio
async def test_headers_are_found_whatever_their_case_and_the_content_type_is_lower_case() -> None:
    response = (
        b"HTTP/1.1 429 Too Many\r\nRETRY-AFTER: 2\r\n"
        b"Content-Type: Text/Event-Stream; charset=utf-8\r\nContent-Length: 0\r\n\r\n"
    )
    async with Scripted(raw(response)) as server:
        client = HttpClient()
        async with await client.post(server.url, {}, {}, timeout=5) as r:
            assert (r.status, r.headers.get("retry-after")) == (429, "2")
            assert r.content_type == "text/event-stream"
        await client.close()


@pytest.mark.asyncio
async def test_a_redirect_is_not_followed() -> None:
    """A POST redirected elsewhere would go out again (as a GET, and maybe to another host):
    the sampler sees the 3xx itself."""
    redirect = b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n"
    async with Scripted(raw(redirect)) as server:
        client = HttpClient()
        async with await client.post(server.url, {}, {}, timeout=5) as r:
            assert r.status == 302
        await client.close()
    assert [r["line"] for r in server.requests] == ["POST /v1/chat/completions HTTP/1.1"]


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
        await client.close()
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
        await client.close()
    assert (server.connections, len(server.requests)) == (1, 3)


@pytest.mark.asyncio
async def test_drain_gives_up_on_a_body_that_does_not_end_and_the_connection_is_not_reused() -> None:
    finished = asyncio.Event()

    async def reply(reader, writer, request) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        await asyncio.sleep(3)  # far past drain's wait
        finished.set()
        writer.write(b"0\r\n\r\n")
        return True

    async with Scripted(reply) as server:
        client = HttpClient()
        async with await client.post(server.url, {}, {}, timeout=30, idle=20) as r:
            await r.drain(wait_s=0.2)
        gave_up_first = not finished.is_set()
        async with await client.post(server.url, {}, {}, timeout=30, idle=20) as r:
            await r.drain(wait_s=0.2)
        await client.close()
    assert gave_up_first and server.connections == 2


@pytest.mark.asyncio
async def test_a_line_over_the_limit_is_a_value_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_client, "MAX_LINE", 1000)
    async with Scripted(raw(b"HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n" + b"x" * 3000)) as server:
        client = HttpClient()
        with pytest.raises(ValueError, match="over 1000 bytes"):
            async with await client.post(server.url, {}, {}, timeout=5) as r:
                async for _ in r.lines():
                    pass
        await client.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    ],
    ids=["declared", "chunked"],
)
async def test_a_body_over_the_cap_is_an_http_error_naming_it(
    head: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_client, "MAX_BODY", 1000)
    body = b"x" * 3000 if b"Content-Length" in head else b"bb8\r\n" + b"x" * 3000 + b"\r\n0\r\n\r\n"
    async with Scripted(raw(head + body)) as server:
        client = HttpClient()
        with pytest.raises(HttpError, match=r"over MAX_BODY \(1000 bytes\)"):
            async with await client.post(server.url, {}, {}, timeout=5) as r:
                await r.read()
        await client.close()


PAYLOAD = "the response body is cut short or badly framed"
PARSE = "not a valid HTTP/1.x response"
BROKEN = [
    ("cut Content-Length body", b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n" + OK_JSON, PAYLOAD),
    ("cut chunk", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n" + OK_JSON, PAYLOAD),
    (
        "no terminating chunk",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nc\r\n" + OK_JSON + b"\r\n",
        PAYLOAD,
    ),
    ("bad chunk size", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", PARSE),
    (
        "chunk longer than said",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n" + OK_JSON,
        PARSE,
    ),
    ("closed before answering", b"", "closed the connection before answering"),
    ("half a head", b"HTTP/1.1 200 OK\r\nContent-Le", "closed the connection before answering"),
    ("not HTTP", b"SSH-2.0-OpenSSH_9.2\r\n\r\n", PARSE),
    ("bad status", b"HTTP/1.1 abc OK\r\n\r\n", PARSE),
    ("bad Content-Length", b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", PARSE),
    ("negative Content-Length", b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello", PARSE),
    ("Content-Length 1_0", b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\n" + OK_JSON, PARSE),
    (
        "negative chunk size",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello world\r\n0\r\n\r\n",
        PARSE,
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
            with pytest.raises(HttpError, match=message) as caught:
                async with await client.post(server.url, {}, {}, timeout=5) as r:
                    await r.read()
            assert "\n" not in str(caught.value)  # one line, for the log
        await client.close()
    assert (server.connections, len(server.requests)) == (2, 2)  # nothing sent twice
    assert issubclass(HttpError, OSError)  # the sampler counts it as a connection fault


@pytest.mark.asyncio
async def test_a_reset_mid_body_is_an_http_error() -> None:
    async def reply(reader, writer, request) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()
        hang_up(writer, "RST")
        return False

    async with Scripted(reply) as server:
        client = HttpClient()
        with pytest.raises(HttpError):
            async with await client.post(server.url, {}, {}, timeout=5) as r:
                await r.read()
        await client.close()


@pytest.mark.asyncio
async def test_a_refused_connection_is_an_http_error() -> None:
    async with Scripted(raw(b"")) as server:
        url, port = server.url, server.port
    client = HttpClient()
    with pytest.raises(HttpError, match=f"cannot connect to 127.0.0.1:{port}"):
        await client.post(url, {}, {}, timeout=5)
    await client.close()


# -- a kept-alive connection the server closed as the request went out ---------------


def _answer_first_then_hang_up(how: str, pooled: int = 1) -> Reply:
    """The first request of each of the first `pooled` connections is answered; any later
    one on them is met with a close and no reply (the server's idle timeout crossing the
    request). Later connections are answered."""

    async def reply(reader, writer, request) -> bool:
        if request["connection"] <= pooled and request["index"] > 0:
            hang_up(writer, how)
            return False
        if request["connection"] <= pooled:
            await asyncio.sleep(0.1)  # the first requests overlap: one connection each
        writer.write(OK)
        await writer.drain()
        return True

    return reply


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["FIN", "RST"])
async def test_a_request_on_a_kept_alive_connection_the_server_closed_is_sent_again(how: str) -> None:
    async with Scripted(_answer_first_then_hang_up(how)) as server:
        client = HttpClient()
        for _ in range(2):
            async with await client.post(server.url, {}, {}, timeout=5) as r:
                assert await r.read() == OK_JSON
        await client.close()
    assert [(r["connection"], r["index"]) for r in server.requests] == [(1, 0), (1, 1), (2, 0)]
    assert client.counts["stale_connection_retries"] == 1


@pytest.mark.asyncio
async def test_a_request_is_sent_again_once_at_most() -> None:
    """Two kept-alive connections, both closed by the server: the request fails on the
    first, is sent again on the second, fails there too, and that failure is the
    sampler's to see (a server closing every connection is not a stale socket)."""

    async def post(client: HttpClient, url: str) -> bytes:
        async with await client.post(url, {}, {}, timeout=5) as r:
            return await r.read()

    async with Scripted(_answer_first_then_hang_up("FIN", pooled=2)) as server:
        client = HttpClient()
        assert await asyncio.gather(post(client, server.url), post(client, server.url)) == [OK_JSON] * 2
        with pytest.raises(HttpError, match="closed the connection before answering"):
            await post(client, server.url)
        await client.close()
    assert sorted((r["connection"], r["index"]) for r in server.requests) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert client.counts["stale_connection_retries"] == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["FIN", "RST"])
async def test_a_kept_alive_connection_lost_after_the_server_worked_on_the_request_is_not_sent_again(
    how: str,
) -> None:
    """The server spent a generation on the request (and billed it) before the connection
    went: the failure is the sampler's, which settles that attempt and reserves the next
    (before: sent again silently, inside the first attempt's reservation)."""
    generated = asyncio.Event()

    async def reply(reader, writer, request) -> bool:
        if request["index"] == 0:
            writer.write(OK)
            await writer.drain()
            return True
        await asyncio.sleep(0.3)  # generating: past STALE_WINDOW_S (0.1 s)
        generated.set()
        hang_up(writer, how)
        return False

    async with Scripted(reply) as server:
        client = HttpClient()
        async with await client.post(server.url, {}, {}, timeout=5) as r:
            assert await r.read() == OK_JSON
        with pytest.raises(HttpError, match="before answering|connection lost"):
            await client.post(server.url, {}, {}, timeout=5)
        await client.close()
    assert generated.is_set()
    assert [(r["connection"], r["index"]) for r in server.requests] == [(1, 0), (1, 1)]
    assert client.counts["stale_connection_retries"] == 0


@pytest.mark.asyncio
async def test_a_new_connection_closed_before_answering_is_not_sent_again() -> None:
    """On a connection of its own the request surely reached the server: the sampler
    decides (and counts) what to do with the failure."""

    async def reply(reader, writer, request) -> bool:
        hang_up(writer, "FIN")
        return False

    async with Scripted(reply) as server:
        client = HttpClient()
        with pytest.raises(HttpError, match="before answering"):
            await client.post(server.url, {}, {}, timeout=5)
        await client.close()
    assert len(server.requests) == 1 and client.counts["stale_connection_retries"] == 0


@pytest.mark.asyncio
async def test_the_sampler_never_sees_a_stale_connection_as_a_failure() -> None:
    """Neither a retry nor a mark against the endpoint's health: one attempt, counted apart."""
    reply = _answer_first_then_hang_up("FIN")

    async def chat(reader, writer, request) -> bool:
        if request["connection"] == 1 and request["index"] == 1:
            return await reply(reader, writer, request)
        body = json.dumps(
            {"choices": [{"index": 0, "message": {"content": "70"}, "finish_reason": "stop"}]}
        ).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        return True

    async with Scripted(chat) as server:
        endpoint = server.url.removesuffix("/chat/completions")
        sampler = OpenAISampler([endpoint], "m", stream=False)
        params = SamplingParams(0.6, 0.9, -1, 8, 1)
        first = await sampler.complete([{"role": "user", "content": "hi"}], params)
        second = await sampler.complete([{"role": "user", "content": "hi"}], params)
        await sampler.aclose()
    assert (first.text, second.text, second.attempts) == ("70", "70", 1)
    stats = sampler.stats()
    assert (stats["ok"], stats["stale_connection_retries"], stats.get("retries")) == (2, 1, None)
    assert list(sampler.health._states[endpoint].outcomes) == [False, False]  # two successes


# -- timeouts ------------------------------------------------------------------------


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
    async with Scripted(_stall_after(head, 3)) as server:  # deadline 30 s: only the idle timeout fits
        client = HttpClient()
        with pytest.raises(IdleTimeout):
            async with await client.post(server.url, {}, {}, timeout=30, idle=0.3) as r:
                await r.read()
        await client.close()

    # a byte every 0.1 s for 0.5 s, past the 0.3 s idle timeout: alive
    async with Scripted(_trickle(5, every_s=0.1, length=5)) as server:
        client = HttpClient()
        async with await client.post(server.url, {}, {}, timeout=30, idle=0.3) as r:
            assert await r.read() == b"x" * 5
        await client.close()


@pytest.mark.asyncio
async def test_the_whole_request_has_one_deadline_even_while_bytes_keep_coming() -> None:
    async with Scripted(_trickle(100, every_s=0.05, length=1000)) as server:
        client = HttpClient()
        with pytest.raises(asyncio.TimeoutError) as caught:
            async with await client.post(server.url, {}, {}, timeout=0.5, idle=0.3) as r:
                await r.read()
        await client.close()
    assert not isinstance(caught.value, (IdleTimeout, HttpError))  # the deadline, not a stall


@pytest.mark.asyncio
async def test_a_server_that_accepts_and_never_speaks_tls_is_a_stall_within_the_idle_timeout() -> None:
    async with Scripted(_stall_after(b"", 5)) as server:  # TCP accepted; no handshake, no byte
        client = HttpClient()
        with pytest.raises(IdleTimeout):
            await client.post(server.url.replace("http://", "https://"), {}, {}, timeout=30, idle=0.3)
        await client.close()


# -- which connections are kept ------------------------------------------------------


@pytest.mark.asyncio
async def test_a_pooled_connection_the_server_closed_is_not_used_again() -> None:
    async def once(reader, writer, request) -> bool:
        writer.write(OK)
        await writer.drain()
        return False  # closes after answering, without saying Connection: close

    async with Scripted(once) as server:
        client = HttpClient()
        for _ in range(3):
            async with await client.post(server.url, {}, {}, timeout=5) as r:
                assert await r.read() == OK_JSON
            await asyncio.sleep(0.05)  # the FIN arrives while the connection is idle
        await client.close()
    assert (server.connections, len(server.requests)) == (3, 3)
    assert client.counts["stale_connection_retries"] == 0  # seen closed in the pool, never tried


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("response", "connections"),
    [(OK, 1), (b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + OK_JSON, 2)],
    ids=["arrived whole", "still arriving"],
)
async def test_an_unread_body_keeps_its_connection_only_when_it_has_arrived_whole(
    response: bytes, connections: int
) -> None:
    async with Scripted(raw(response)) as server:
        client = HttpClient()
        for _ in range(2):
            async with await client.post(server.url, {}, {}, timeout=5) as r:
                assert r.status == 200
            await asyncio.sleep(0.05)
        await client.close()
    assert server.connections == connections


@pytest.mark.asyncio
async def test_a_body_larger_than_the_read_ahead_limit_arrives_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_client, "READ_BUFSIZE", 64 * 1024)
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
        await client.close()
    assert b"".join(pieces) == payload
    # aiohttp pauses the socket at twice the read-ahead; one read of the socket on top
    assert max(map(len, pieces)) <= 2 * 64 * 1024 + 256 * 1024


@pytest.mark.asyncio
async def test_a_pooled_connection_idle_past_the_keepalive_is_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A NAT or firewall may forget an idle flow without a FIN, and uvicorn closes one idle
    5 s: past KEEPALIVE_S idle the next request takes a new socket. Here the server answers
    once per connection and then ignores it, as such a black hole does."""
    monkeypatch.setattr(http_client, "KEEPALIVE_S", 0.3)

    async def once_then_black_hole(reader, writer, request) -> bool:
        writer.write(OK)
        await writer.drain()
        await asyncio.sleep(3600)  # the flow is forgotten: nothing more is read or answered
        return False

    async with Scripted(once_then_black_hole) as server:
        client = HttpClient()
        for pause in (0.0, 0.5):
            await asyncio.sleep(pause)
            async with await client.post(server.url, {}, {}, timeout=3) as r:
                assert await r.read() == OK_JSON
        await client.close()
    assert server.connections == 2


def test_the_keepalive_is_shorter_than_uvicorns() -> None:
    assert http_client.KEEPALIVE_S < 5.0  # uvicorn's timeout_keep_alive: vLLM, SGLang, llama-cpp-python


def test_connections_are_not_carried_into_another_event_loop() -> None:
    async def run(client: HttpClient, url: str, close: bool) -> bytes:
        async with await client.post(url, {}, {}, timeout=5) as r:
            body = await r.read()
        if close:
            await client.close()
        return body

    async def main() -> tuple[list[bytes], int]:
        async with Scripted(raw(OK)) as server:
            client = HttpClient()
            first = await run(client, server.url, close=False)
            second = await asyncio.get_running_loop().run_in_executor(
                None, asyncio.run, run(client, server.url, close=True)
            )
            return [first, second], server.connections

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bodies, connections = asyncio.run(main())
        gc.collect()
    assert bodies == [OK_JSON, OK_JSON] and connections == 2
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.asyncio
async def test_a_closed_sampler_leaves_no_session_or_socket_open() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with Scripted(_sse((b"data: [DONE]\n",), pause_s=0)) as server:
            sampler = OpenAISampler([server.url.removesuffix("/chat/completions")], "m")
            with pytest.raises(Retryable):  # [DONE] without a reply: not the point here
                await sampler._post(sampler._ensure_session(), sampler.endpoints[0], BODY, "chat/completions")
            await sampler.aclose()
        del sampler
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


# -- proxies from the environment ----------------------------------------------------


@pytest.fixture
def proxy_env(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Set the proxy variables given, and no others (the host's own are cleared)."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)

    def set_(**variables: str) -> None:
        for name, value in variables.items():
            monkeypatch.setenv(name, value)

    return set_


@pytest.mark.asyncio
async def test_http_proxy_from_the_environment_gets_the_request_in_absolute_form(proxy_env) -> None:
    async with Scripted(raw(OK)) as proxy:
        proxy_env(HTTP_PROXY=f"http://127.0.0.1:{proxy.port}")
        client = HttpClient()
        url = "http://model.invalid:8000/v1/chat/completions"  # resolvable by the proxy only
        async with await client.post(url, {"n": 1}, {}, timeout=5) as r:
            assert await r.read() == OK_JSON
        await client.close()
    (request,) = proxy.requests
    assert request["line"] == f"POST {url} HTTP/1.1"
    assert (request["headers"]["host"], request["body"]) == ("model.invalid:8000", {"n": 1})


@pytest.mark.asyncio
async def test_no_proxy_sends_the_request_past_the_proxy(proxy_env) -> None:
    async with Scripted(raw(OK)) as proxy, Scripted(raw(OK)) as server:
        proxy_env(HTTP_PROXY=f"http://127.0.0.1:{proxy.port}", NO_PROXY="127.0.0.1")
        client = HttpClient()
        async with await client.post(server.url, {}, {}, timeout=5) as r:
            assert await r.read() == OK_JSON
        await client.close()
    assert (len(proxy.requests), [r["line"] for r in server.requests]) == (
        0,
        ["POST /v1/chat/completions HTTP/1.1"],
    )


@pytest.mark.asyncio
async def test_https_proxy_from_the_environment_is_asked_for_a_tunnel_without_the_api_key(proxy_env) -> None:
    async with Scripted(raw(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", keep=False)) as proxy:
        proxy_env(HTTPS_PROXY=f"http://127.0.0.1:{proxy.port}")
        client = HttpClient()
        with pytest.raises(HttpError) as refused:
            await client.post(
                "https://model.invalid/v1/chat/completions",
                {},
                {"Authorization": "Bearer sk-1234"},
                timeout=5,
            )
        await client.close()
    (request,) = proxy.requests
    assert request["line"] == "CONNECT model.invalid:443 HTTP/1.1"
    assert "authorization" not in request["headers"] and "sk-1234" not in str(refused.value)


@pytest.mark.asyncio
async def test_credentials_in_the_proxys_url_go_to_the_proxy(proxy_env) -> None:
    async with Scripted(raw(OK)) as proxy:
        proxy_env(HTTP_PROXY=f"http://user:pw@127.0.0.1:{proxy.port}")
        client = HttpClient()
        async with await client.post("http://model.invalid/v1/chat/completions", {}, {}, timeout=5) as r:
            assert await r.read() == OK_JSON
        await client.close()
    (request,) = proxy.requests
    assert request["headers"]["proxy-authorization"] == "Basic dXNlcjpwdw=="  # user:pw


@pytest.mark.asyncio
async def test_credentials_in_the_https_proxys_url_go_with_the_tunnel_request(proxy_env) -> None:
    async with Scripted(raw(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", keep=False)) as proxy:
        proxy_env(HTTPS_PROXY=f"http://user:pw@127.0.0.1:{proxy.port}")
        client = HttpClient()
        with pytest.raises(HttpError) as refused:
            await client.post("https://model.invalid/v1/chat/completions", {}, {}, timeout=5)
        await client.close()
    (request,) = proxy.requests
    assert request["line"] == "CONNECT model.invalid:443 HTTP/1.1"
    assert request["headers"]["proxy-authorization"] == "Basic dXNlcjpwdw=="
    assert "dXNlcjpwdw" not in str(refused.value)


@pytest.mark.asyncio
async def test_a_netrc_entry_for_the_endpoint_neither_replaces_nor_refuses_the_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiohttp's trust_env would add ~/.netrc credentials for the host, and refuse them
    beside an Authorization header: every request of a run with an API key would fail."""
    netrc = tmp_path / "netrc"
    netrc.write_text("default login someone password elsewhere\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    async with Scripted(raw(OK)) as server:
        client = HttpClient()
        for headers in ({"Authorization": "Bearer sk-1234"}, {}):
            async with await client.post(server.url, {}, headers, timeout=5) as r:
                assert await r.read() == OK_JSON
        await client.close()
    assert [r["headers"].get("authorization") for r in server.requests] == ["Bearer sk-1234", None]


# -- header values -------------------------------------------------------------------


HELLO = [{"role": "user", "content": "hi"}]


@pytest.mark.asyncio
@pytest.mark.parametrize("call", ["a completion", "counting tokens"])
async def test_an_api_key_that_is_not_a_header_value_is_refused_at_once_and_never_shown(call: str) -> None:
    """A CR/LF in the key would inject headers; aiohttp refuses it, the sampler fails at
    once (retrying cannot help), and neither message nor cause names the key."""
    async with Scripted(raw(OK)) as server:
        key = "sk-secret-0123\r\nX-Injected: 1"
        sampler = OpenAISampler([server.url.removesuffix("/chat/completions")], "m", api_key=key)
        with pytest.raises(FatalRequestError) as refused:
            if call == "a completion":
                await sampler.complete(HELLO, SamplingParams(0.6, 0.9, -1, 8, 1))
            else:
                await sampler.counter.probe()
        await sampler.aclose()
    chain, exc = [], refused.value
    while exc is not None:
        chain.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    assert len(chain) >= 2 and not any("sk-secret" in text or "Injected" in text for text in chain)
    assert server.requests == []


SECRET = "sk-secret-0123456789"
FAILURES = [
    ("not HTTP", b"SSH-2.0-OpenSSH_9.2\r\n\r\n"),
    ("bad Content-Length", b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n"),
    ("cut body", b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n" + OK_JSON),
    ("closed before answering", b""),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("name", "response"), FAILURES, ids=[f[0] for f in FAILURES])
async def test_no_traceback_of_a_failed_request_shows_the_api_key(name: str, response: bytes) -> None:
    """aiohttp's ClientResponseError holds the request's headers (its repr shows them): it
    is not the cause of ours. The traceback a user sees, and the repr of every cause in
    it, never have the key."""
    import traceback

    headers = {"Authorization": f"Bearer {SECRET}"}
    async with Scripted(raw(response, keep=False)) as server:
        client = HttpClient()
        with pytest.raises(HttpError) as caught:
            async with await client.post(server.url, {}, headers, timeout=5) as r:
                await r.read()
        await client.close()
    printed = "".join(traceback.format_exception(caught.value))
    causes, exc = [], caught.value
    while exc is not None:
        causes.append(repr(exc))
        exc = exc.__cause__
    assert "HttpError" in printed and SECRET not in printed + "".join(causes)


# -- TLS -----------------------------------------------------------------------------


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
    scripted = Scripted(raw(OK))
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
        client = HttpClient()
        with pytest.raises(HttpError) as refused:  # not trusted: refused
            await client.post(url, {}, {}, timeout=5)
        await client.close()
        assert isinstance(refused.value.__cause__, ssl.SSLCertVerificationError)
        monkeypatch.setenv("SSL_CERT_FILE", str(self_signed / "cert.pem"))
        client = HttpClient()  # SSL_CERT_FILE is read when a client makes its first https request
        async with await client.post(url, {}, {}, timeout=5) as r:
            assert (r.status, await r.read()) == (200, OK_JSON)
        await client.close()
    assert len(scripted.requests) == 1


BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


async def _cause_of_post(endpoint: str, stream: bool = False) -> Retryable:
    sampler = OpenAISampler([endpoint], "m", stream=stream)
    try:
        with pytest.raises(Retryable) as caught:
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
    attempts = []

    async def sock_connect(sock: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError(errno.ETIMEDOUT, f"Connect call failed {address}")

    monkeypatch.setattr(asyncio.get_running_loop(), "sock_connect", sock_connect)
    failure = await _cause_of_post("http://127.0.0.1:9/v1")
    assert failure.cause == "connection" and attempts == [("127.0.0.1", 9)]


@pytest.mark.asyncio
async def test_an_untrusted_certificate_is_a_connection_failure(self_signed: Path) -> None:
    """ssl.SSLCertVerificationError is a ValueError too: not a "truncated" reply."""
    import ssl

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
