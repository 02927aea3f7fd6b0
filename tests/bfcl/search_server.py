"""A local SerpAPI-compatible search server for the BFCL web search tests (real sockets).

``GET /search?q=...`` answers in SerpAPI's shape (``organic_results`` with ``title``,
``link``, ``snippet``); the links point at ``GET /page/<n>`` on the same server, an HTML
page. ``pages`` maps a query substring to the text of its page; the request log records
every query and fetch.
"""

from __future__ import annotations

import html
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class SearchServer:
    def __init__(self, pages: dict[str, str]) -> None:
        self.pages = list(pages.items())
        self.log: list[dict[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> SearchServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _results(self, query: str) -> dict:
        hits = [i for i, (key, _) in enumerate(self.pages) if key.lower() in query.lower()]
        return {
            "organic_results": [
                {"title": f"Result {i}", "link": f"{self.url}/page/{i}", "snippet": self.pages[i][1][:80]}
                for i in hits
            ]
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                parsed = urlparse(self.path)
                if parsed.path == "/search":
                    query = parse_qs(parsed.query).get("q", [""])[0]
                    server.log.append({"kind": "search", "q": query})
                    self._send(json.dumps(server._results(query)), "application/json")
                elif parsed.path.startswith("/page/"):
                    index = int(parsed.path.rsplit("/", 1)[1])
                    server.log.append({"kind": "fetch", "page": str(index)})
                    text = html.escape(server.pages[index][1])
                    self._send(f"<html><body><script>x=1</script><p>{text}</p></body></html>", "text/html")
                else:
                    self.send_error(404)

            def _send(self, body: str, content_type: str) -> None:
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
