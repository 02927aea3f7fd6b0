"""The HTTP client of the OpenAI-protocol sampler: aiohttp, with the two timeouts a
generation needs (the whole request; silence between bytes, the stall signal), a cap on
the body, and errors the sampler's retry taxonomy understands.

- Proxies: HTTP_PROXY / HTTPS_PROXY / NO_PROXY, as aiohttp's `trust_env` reads them
  (credentials in the proxy's URL or ~/.netrc for the proxy), looked up once per origin:
  `trust_env` itself looks them up, and ~/.netrc for the endpoint, on two threads for
  every request (about 0.3 ms of CPU each), and an API key beside a ~/.netrc entry for
  the endpoint's host is a ValueError. Certificates: SSL_CERT_FILE / SSL_CERT_DIR, read
  by `ssl.create_default_context` when the first https request is made.
- Keep-alive: an idle pooled connection lives KEEPALIVE_S, under the 5 s after which
  uvicorn (vLLM, SGLang, llama-cpp-python) closes it; a request sent as the server's FIN
  crosses it would fail. One that fails anyway on a reused connection before any byte of
  its reply, within STALE_WINDOW_S of its headers going out (a closed socket answers at
  once), is sent once more on another (`counts["stale_connection_retries"]`), before the
  sampler sees a failure. A later failure is the sampler's: the server may have spent a
  whole generation on the request (and billed it), so the budget settles that attempt.
- Errors: HttpError (an OSError) when the connection failed or the reply is broken,
  IdleTimeout after `idle` silent seconds, asyncio.TimeoutError at the request's deadline,
  InvalidRequest when aiohttp refuses to send the request as given. No message names a
  header value: the API key rides in `Authorization`.

aiohttp is imported on the first request: its import (~90 ms of CPU, two SSL contexts
built from the CA bundle) is paid only by a process that talks to an endpoint."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import aiohttp

KEEPALIVE_S = 4.0  # below uvicorn's timeout_keep_alive (5 s)
# A stale pooled connection fails one round trip after the request is written; a failure
# later than this may have come after the server generated the reply.
STALE_WINDOW_S = 0.1
MAX_BODY = 64 * 1024 * 1024  # a reply past this is not a chat completion
MAX_LINE = 2 * 1024 * 1024  # a streamed line (one chunk can be a whole tool call)
READ_BUFSIZE = 2**16  # aiohttp's read-ahead: reading pauses at twice this unread
USER_AGENT = "pytest-agenteval"


class HttpError(OSError):
    """The connection failed or ended before the response did, or the reply is not
    HTTP/1.x or is framed wrongly; the request's outcome is unknown (an OSError, as a
    reset is)."""


class NotSent(HttpError):
    """The connection was never made (refused, no route, DNS, the TLS handshake): the
    request provably never reached the server."""


class IdleTimeout(Exception):
    """Nothing arrived for the idle timeout while connecting, or while a response was
    awaited or read."""


class InvalidRequest(Exception):
    """aiohttp refused to send the request as given (a control character in a header
    value, an Authorization header beside ~/.netrc credentials for the host): sending it
    again cannot help."""


def _aiohttp() -> Any:
    import aiohttp

    return aiohttp


def _scrub(text: str, headers: Mapping[str, str]) -> str:
    """`text` without any header value (or the token of `Bearer <token>`) in it."""
    for value in headers.values():
        for secret in {value, value.rpartition(" ")[2]}:
            if len(secret) >= 4:
                text = text.replace(secret, "***")
    return text


def _reraise(exc: BaseException, secrets: Mapping[str, str], when: str) -> NoReturn:
    """Raise what an aiohttp exception raised `when` ("before answering", "mid-response")
    is to the sampler: IdleTimeout, HttpError, or itself (the request's deadline)."""
    aiohttp = _aiohttp()
    if isinstance(exc, aiohttp.ServerTimeoutError):  # sock_read / sock_connect: silence
        raise IdleTimeout(str(exc)) from exc
    if isinstance(exc, asyncio.TimeoutError) and not isinstance(exc, aiohttp.ClientError):
        raise exc  # the whole request's deadline (total)
    if isinstance(exc, aiohttp.ClientConnectorError):  # refused, DNS, TLS, the kernel's ETIMEDOUT
        message = f"cannot connect to {exc.host}:{exc.port}: {exc.os_error}"
        raise NotSent(_scrub(" ".join(message.split()), secrets)) from exc
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        message = f"the server closed the connection {when}"
    elif isinstance(exc, aiohttp.ClientPayloadError):
        message = f"the response body is cut short or badly framed: {exc}"
    elif isinstance(exc, aiohttp.ClientHttpProxyError):
        message = f"the proxy refused the tunnel: {exc.status} {exc.message}"
    elif isinstance(exc, aiohttp.ClientResponseError):  # the status line or a header would not parse
        message = f"not a valid HTTP/1.x response: {exc.message}"
    elif isinstance(exc, aiohttp.ClientOSError):
        message = f"connection lost {when}: {exc}"
    else:
        message = f"{type(exc).__name__} {when}: {exc}"
    # A ClientResponseError carries the request's headers, the API key among them, in its
    # request_info (and its repr): its text is in the message, the exception is not chained.
    cause = None if isinstance(exc, aiohttp.ClientResponseError) else exc
    raise HttpError(_scrub(" ".join(message.split()), secrets)) from cause  # one line


class Response:
    """Status, headers (case-insensitive) and a body read once: `read()` or `lines()`.
    Use it as an async context manager; the connection goes back to the pool only when
    the body has arrived whole."""

    def __init__(
        self, raw: aiohttp.ClientResponse, secrets: Mapping[str, str], max_body: int | None = None
    ) -> None:
        self._raw = raw
        self._secrets = secrets  # the header values sent: kept out of error messages
        self._max_body = MAX_BODY if max_body is None else max_body
        self.status = raw.status
        self.headers = raw.headers
        self._body: AsyncGenerator[bytes, None] | None = None  # one reader of the body, resumable
        self._readers: list[AsyncGenerator[bytes, None]] = []  # lines() given out

    @property
    def content_type(self) -> str:
        return self._raw.content_type.lower()

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        # Readers left at a yield (a stream read to its [DONE] line) are closed here: left
        # to the loop's finalizer, each cost a wake-up of the loop and a task.
        for reader in (*self._readers, *([self._body] if self._body is not None else [])):
            await reader.aclose()
        self._raw.release()  # kept alive when the body has ended, closed otherwise
        await self._raw.wait_for_close()

    def _pieces(self) -> AsyncGenerator[bytes, None]:
        if self._body is None:
            self._body = self._read_body()
        return self._body

    async def _read_body(self) -> AsyncGenerator[bytes, None]:
        length = self._raw.content_length
        if length is not None and length > self._max_body:
            raise HttpError(f"the response body is {length} bytes, over MAX_BODY ({self._max_body} bytes)")
        seen = 0
        try:
            async for piece in self._raw.content.iter_any():
                seen += len(piece)
                if seen > self._max_body:
                    raise HttpError(f"the response body is over MAX_BODY ({self._max_body} bytes)")
                yield piece
        except HttpError:
            raise
        except (OSError, asyncio.TimeoutError, _aiohttp().ClientError) as exc:
            _reraise(exc, self._secrets, "mid-response")

    async def read(self) -> bytes:
        return b"".join([piece async for piece in self._pieces()])

    def lines(self) -> AsyncIterator[bytes]:
        """The body split after each LF (the LF kept, as aiohttp's StreamReader has it);
        a line over MAX_LINE bytes is a ValueError."""
        reader = self._lines()
        self._readers.append(reader)
        return reader

    async def _lines(self) -> AsyncGenerator[bytes, None]:
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

    async def drain(self, limit: int = 64 * 1024, wait_s: float = 1.0) -> None:
        """Read what is left of a body its reader stopped short of (a stream read to its
        `data: [DONE]` line: the chunked body's end comes after it), so that the connection
        is kept. A rest over `limit` bytes, or not there within `wait_s`, is left: the
        connection is closed instead."""
        if self._raw.content.is_eof():
            return

        async def rest() -> None:
            seen = 0
            async for piece in self._pieces():
                seen += len(piece)
                if seen > limit:
                    return

        try:
            await asyncio.wait_for(rest(), wait_s)
        except (OSError, IdleTimeout, asyncio.TimeoutError, ValueError):
            return


async def _on_reused_connection(session: Any, context: SimpleNamespace, params: Any) -> None:
    context.trace_request_ctx.reused = True


async def _on_headers_sent(session: Any, context: SimpleNamespace, params: Any) -> None:
    context.trace_request_ctx.sent_at = asyncio.get_running_loop().time()


class HttpClient:
    """One aiohttp session (and its pool of kept-alive connections) for the event loop in
    use; `close()` it on that loop."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tls: ssl.SSLContext | None = None
        self._proxies: dict[str, tuple[Any, dict[str, str]]] = {}  # origin -> (proxy, its credentials)
        self.counts = Counter[str]()

    def _session_here(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is not None and self._loop is not loop:
            self._leave(self._session, self._loop)  # type: ignore[arg-type]
            self._session = None
        if self._session is None:
            aiohttp = _aiohttp()
            tracing = aiohttp.TraceConfig()
            tracing.on_connection_reuseconn.append(_on_reused_connection)
            tracing.on_request_headers_sent.append(_on_headers_sent)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_S),
                trust_env=False,  # the proxy comes from _proxy_for, once per origin
                cookie_jar=aiohttp.DummyCookieJar(),  # an API has no use for cookies
                read_bufsize=READ_BUFSIZE,
                trace_configs=[tracing],
            )
            self._loop = loop
        return self._session

    @staticmethod
    def _leave(session: aiohttp.ClientSession, loop: asyncio.AbstractEventLoop) -> None:
        """A session of another event loop: closed on that loop if it still runs; if it
        has ended, its sockets cannot be closed from here and are left to the collector."""
        if loop.is_running() and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(session.close(), loop)
        else:
            session.detach()

    def _proxy_for(self, url: str) -> tuple[Any, dict[str, str]]:
        """The proxy for `url` from the environment, as `trust_env` has it, and the
        Proxy-Authorization header for it (from its URL or ~/.netrc), if any."""
        origin = "/".join(url.split("/", 3)[:3])  # scheme://host:port
        if origin not in self._proxies:
            aiohttp = _aiohttp()
            from yarl import URL

            try:
                proxy, auth = aiohttp.helpers.get_env_proxy_for_url(URL(url))
            except LookupError:  # none for this scheme, or NO_PROXY names the host
                proxy, auth = None, None
            self._proxies[origin] = (proxy, {"Proxy-Authorization": auth.encode()} if auth else {})
        return self._proxies[origin]

    def _tls_for(self, url: str) -> ssl.SSLContext | bool:
        if not url[:6].lower() == "https:":
            return True  # aiohttp's default; no TLS on a plain http URL
        if self._tls is None:  # here, not at import: SSL_CERT_FILE as it is now
            self._tls = ssl.create_default_context()
        return self._tls

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
        `idle` set, silence of that many seconds anywhere (the connect and TLS handshake
        included) is IdleTimeout."""
        body = json.dumps(payload).encode()
        return await self.send("POST", url, headers, body=body, timeout=timeout, idle=idle)

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        idle: float | None = None,
        body: bytes | Callable[[], Any] | None = None,
        max_body: int | None = None,
    ) -> Response:
        """`post`'s request with any method and body: bytes, or a function making a fresh
        aiohttp payload for each attempt (a multipart form is read once). `max_body`: the
        most the reply may hold (default MAX_BODY; a batch's output file is no chat reply)."""
        session = self._session_here()
        aiohttp = _aiohttp()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        proxy, credentials = self._proxy_for(url)
        tunnel = url[:6].lower() == "https:"  # credentials go with the CONNECT, else with the request
        sent = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **headers}
        secrets = {**sent, **credentials}  # what no error message may show
        if not tunnel:
            sent.update(credentials)
        for attempt in (1, 2):
            left = deadline - loop.time()
            if left <= 0:
                raise asyncio.TimeoutError
            trace = SimpleNamespace(reused=False, sent_at=None)
            try:
                raw = await session.request(
                    method,
                    url,
                    data=body() if callable(body) else body,
                    headers=sent,
                    timeout=aiohttp.ClientTimeout(total=left, sock_connect=idle, sock_read=idle),
                    allow_redirects=False,
                    ssl=self._tls_for(url),
                    proxy=proxy,
                    proxy_headers=credentials if tunnel and credentials else None,
                    trace_request_ctx=trace,
                )
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                stale = trace.reused and not isinstance(exc, aiohttp.ClientConnectorError)
                at_once = trace.sent_at is None or loop.time() - trace.sent_at <= STALE_WINDOW_S
                if stale and at_once and attempt == 1:  # the server closed it as the request went out
                    self.counts["stale_connection_retries"] += 1
                    continue
                _reraise(exc, secrets, "before answering")
            except (OSError, asyncio.TimeoutError, aiohttp.ClientError) as exc:
                _reraise(exc, secrets, "before answering")
            except ValueError as exc:  # a header aiohttp will not send: no retry helps
                names = ", ".join(sorted(sent))
                raise InvalidRequest(_scrub(f"the request was not sent ({names}): {exc}", secrets)) from exc
            return Response(raw, secrets, max_body)
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        """Close the session's connections (call it on the loop that used it last)."""
        session, self._session = self._session, None
        if session is None:
            return
        if self._loop is asyncio.get_running_loop():
            await session.close()
        else:
            self._leave(session, self._loop)  # type: ignore[arg-type]
