"""`pytest-agenteval review DATA.jsonl`: a human verification page on 127.0.0.1.

aiohttp, one static page and a JSON API, no CDN: KaTeX is vendored in the package
(`report/static/katex/`) and served from `/katex/`; the raw source is a toggle away.
Saves are atomic (temp file and os.replace) to `<data>_verifications.json`; a save
carries the revision it edited and a stale one (a second tab, a second annotator) gets
409 instead of overwriting. Drafts are kept server-side in
`<data>_verifications.drafts.json`, so a reload or a restart loses nothing. Requests from
another Origin, or without the page's token, get 403; a request whose Host is not a
loopback name with the bound port (a DNS-rebinding page) gets 421 with no body."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import secrets
import signal
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from pytest_agenteval.report._review_page import PAGE
from pytest_agenteval.tasks.datagen.data import DatagenDataError, load_generated
from pytest_agenteval.tasks.datagen.human import (
    Conflict,
    InvalidVerification,
    apply_verification,
    atomic_write_json,
    load_verifications,
    verifications_path,
)

KATEX_DIR = Path(__file__).parent / "static" / "katex"  # vendored: see VENDORED.md there
HOST = "127.0.0.1"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def disagreement_order(results: Path) -> list[str]:
    """`panel.review_order` of the datagen summary in a results file (most disagreement
    first); [] without a panel."""
    for line in results.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("type") == "summary" and row.get("suite") == "datagen":
            return [str(i) for i in (row.get("panel") or {}).get("review_order", [])]
    raise ValueError(f"--results {results}: no datagen summary line; give a results file of suites/datagen")


class ReviewState:
    def __init__(self, data_path: Path, store_path: Path, annotator: str, order: Sequence[str] = ()) -> None:
        report = load_generated(data_path)
        self.items = [
            {
                "id": p.problem_id,
                "problem": p.problem,
                "answer": p.answer,
                "solution": p.solution,
                "topic": p.topic,
                "sha256": p.sha256,
            }
            for p in report.problems
        ]
        rank = {problem_id: i for i, problem_id in enumerate(order)}
        self.items.sort(key=lambda item: rank.get(item["id"], len(rank)))  # stable: the rest in file order
        self.by_id = {item["id"]: item for item in self.items}
        self.load_errors = list(report.load_errors)
        self.store_path = store_path
        self.drafts_path = store_path.with_name(store_path.stem + ".drafts.json")
        self.annotator = annotator
        self.token = secrets.token_urlsafe(24)
        self.lock = asyncio.Lock()
        self.origins: set[str] = set()
        self.hosts: set[str] = set()  # Host values served: loopback names with the bound port

    def bind(self, port: int) -> None:
        self.hosts = {f"{name}:{port}" for name in LOOPBACK_NAMES}
        if port == 80:  # a browser leaves the default port out of Host
            self.hosts.update(LOOPBACK_NAMES)
        self.origins = {f"http://{host}" for host in self.hosts}

    def snapshot(self) -> dict[str, Any]:
        store = load_verifications(self.store_path)
        drafts = load_verifications(self.drafts_path)
        first = next((i for i, item in enumerate(self.items) if item["id"] not in store), len(self.items))
        return {
            "items": self.items,
            "verifications": store,
            "drafts": drafts,
            "first_unverified": first,
            "annotator": self.annotator,
            "token": self.token,
            "load_errors": self.load_errors,
        }


def _guard(state: ReviewState, request: web.Request) -> web.Response | None:
    origin = request.headers.get("Origin")
    if origin is not None and origin not in state.origins:
        return web.json_response({"error": f"foreign origin {origin}"}, status=403)
    if request.headers.get("X-Review-Token") != state.token:
        return web.json_response({"error": "missing or wrong page token; reload the page"}, status=403)
    return None


@web.middleware
async def _loopback_host(request: web.Request, handler: Any) -> web.StreamResponse:
    """A DNS-rebinding page reaches this server under its own name: refuse every Host but
    the loopback names, before any route (the items and the token are behind a plain GET)."""
    state: ReviewState = request.app["state"]
    if (request.headers.get("Host") or "").lower() not in state.hosts:
        return web.Response(status=421)
    return await handler(request)


async def _page(request: web.Request) -> web.Response:
    return web.Response(text=PAGE, content_type="text/html", headers={"Cache-Control": "no-store"})


async def _items(request: web.Request) -> web.Response:
    state: ReviewState = request.app["state"]
    return web.json_response(state.snapshot(), headers={"Cache-Control": "no-store"})


async def _payload(request: web.Request) -> tuple[str, dict[str, Any]] | web.Response:
    state: ReviewState = request.app["state"]
    refused = _guard(state, request)
    if refused is not None:
        return refused
    problem_id = request.match_info["problem_id"]
    if problem_id not in state.by_id:
        return web.json_response({"error": f"no item {problem_id!r}"}, status=404)
    try:
        payload = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return web.json_response({"error": "body is not JSON"}, status=400)
    if not isinstance(payload, dict):
        return web.json_response({"error": "body must be a JSON object"}, status=400)
    return problem_id, payload


async def _save(request: web.Request) -> web.Response:
    state: ReviewState = request.app["state"]
    parsed = await _payload(request)
    if isinstance(parsed, web.Response):
        return parsed
    problem_id, payload = parsed
    async with state.lock:
        store = load_verifications(state.store_path)
        try:
            entry = apply_verification(
                store,
                problem_id,
                payload,
                item_sha256=state.by_id[problem_id]["sha256"],
                annotator=state.annotator,
                now=datetime.now().astimezone(),
            )
        except Conflict as exc:
            return web.json_response({"error": str(exc), "current": store.get(problem_id)}, status=409)
        except InvalidVerification as exc:
            return web.json_response({"error": str(exc)}, status=400)
        atomic_write_json(state.store_path, store)
        drafts = load_verifications(state.drafts_path)
        if drafts.pop(problem_id, None) is not None:
            atomic_write_json(state.drafts_path, drafts)
    return web.json_response(entry)


async def _draft(request: web.Request) -> web.Response:
    state: ReviewState = request.app["state"]
    parsed = await _payload(request)
    if isinstance(parsed, web.Response):
        return parsed
    problem_id, payload = parsed
    async with state.lock:
        drafts = load_verifications(state.drafts_path)
        drafts[problem_id] = {k: payload.get(k) for k in ("scores", "status", "comments", "base_revision")}
        atomic_write_json(state.drafts_path, drafts)
    return web.json_response({"saved": True})


def build_app(state: ReviewState) -> web.Application:
    app = web.Application(client_max_size=2 * 1024 * 1024, middlewares=[_loopback_host])
    app["state"] = state
    app.router.add_get("/", _page)
    app.router.add_get("/favicon.ico", lambda request: web.Response(status=204))
    app.router.add_get("/api/items", _items)
    app.router.add_put("/api/verifications/{problem_id}", _save)
    app.router.add_put("/api/drafts/{problem_id}", _draft)
    app.router.add_static("/katex/", KATEX_DIR)
    return app


async def serve(state: ReviewState, port: int) -> None:
    runner = web.AppRunner(build_app(state))
    await runner.setup()
    site = web.TCPSite(runner, HOST, port)  # loopback only, never 0.0.0.0
    await site.start()
    bound = runner.addresses[0][1]
    state.bind(bound)
    print(
        f"REVIEW http://{HOST}:{bound}/  ({len(state.items)} items, saving to {state.store_path})", flush=True
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pytest-agenteval review", description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="generated problems JSONL")
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--annotator", default=None, help="your name in the saved entries (default: login)")
    parser.add_argument("--verifications", type=Path, default=None, help="default: <data>_verifications.json")
    parser.add_argument(
        "--results", type=Path, default=None, help="a datagen results JSONL: the panel's disagreements first"
    )
    args = parser.parse_args(argv)
    store = args.verifications or verifications_path(args.data)
    try:
        order = disagreement_order(args.results) if args.results else []
        state = ReviewState(args.data, store, args.annotator or getpass.getuser(), order)
        load_verifications(store)
    except (DatagenDataError, ValueError, OSError) as exc:
        print(f"pytest-agenteval review: {str(exc).replace('--datagen-path ', '')}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(state, args.port))
    except OSError as exc:
        print(
            f"pytest-agenteval review: cannot listen on {HOST}:{args.port} ({exc.strerror}); try --port 0",
            file=sys.stderr,
        )
        return 2
    return 0
