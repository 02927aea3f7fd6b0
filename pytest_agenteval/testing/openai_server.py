"""A real-socket OpenAI-compatible mock server with latency, accounting and faults.

In-process (own event loop in a background thread)::

    with OpenAITestServer(ServerConfig(latency_ms=50, fault_rate=0.2)) as srv:
        call(srv.url)            # "http://127.0.0.1:<port>/v1"
        srv.stats(); srv.requests

Inside a running loop: ``async with AsyncOpenAITestServer(config) as srv: ...``.
As a process: ``python -m pytest_agenteval.testing.openai_server --port 0 ...`` prints
``LISTENING http://127.0.0.1:PORT/v1`` once bound and its stats JSON on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

from pytest_agenteval.testing._app import ServerCore, request_key
from pytest_agenteval.testing._batch import BatchConfig
from pytest_agenteval.testing._config import ServerConfig
from pytest_agenteval.testing._faults import parse_fault_mix
from pytest_agenteval.testing._process import (
    get_stats,
    reset_stats,
    start_server_process,
    stop_server_process,
)
from pytest_agenteval.testing._responders import DEFAULT_ANSWER, Reply
from pytest_agenteval.testing._server import AsyncOpenAITestServer, OpenAITestServer

__all__ = [
    "AsyncOpenAITestServer",
    "OpenAITestServer",
    "ServerConfig",
    "get_stats",
    "main",
    "request_key",
    "reset_stats",
    "start_server_process",
    "stop_server_process",
]
from pytest_agenteval.testing._think import REASONING_FIELDS, REASONING_PARSERS


# -- CLI -----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pytest_agenteval.testing.openai_server",
        description="OpenAI-compatible mock server for tests.",
    )
    p.add_argument("--host", default="127.0.0.1", help="loopback only")
    p.add_argument("--port", type=int, default=0, help="0 = ephemeral")
    p.add_argument("--model", default="mock-model")
    p.add_argument(
        "--model-card",
        type=json.loads,
        default=None,
        help="more /v1/models entry fields, as JSON (default: the server's own identity, a root field)",
    )
    p.add_argument("--system-fingerprint", default=None, help="every reply carries it")
    p.add_argument("--strict-model", action="store_true", help="404 for other model names")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY'")
    p.add_argument("--no-n", action="store_true", help="ignore n: always one choice")
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--answer", default=DEFAULT_ANSWER, help="reply text; {seed} {n} {index}")
    p.add_argument(
        "--answers-json",
        type=Path,
        default=None,
        help='JSON object {"substring or re:regex": "reply", ...}',
    )
    p.add_argument("--script", default=None, help="MODULE:ATTR of a responder callable")
    p.add_argument("--fault-rate", type=float, default=0.0)
    p.add_argument("--fault-kinds", default=None, help='e.g. "429=2,500,503,reset,truncated"')
    p.add_argument("--fault-seed", type=int, default=0)
    p.add_argument("--fail-first-k", type=int, default=0, help="first K attempts per key fail")
    p.add_argument("--fail-first-kind", default="503")
    p.add_argument("--retry-after", default="0.1", help="Retry-After of 429s ('' = none)")
    p.add_argument(
        "--max-concurrent", type=int, default=None, help="rate limit: over N requests at once, a 429"
    )
    p.add_argument("--stall-s", type=float, default=30.0)
    p.add_argument("--stall-then", choices=("close", "respond"), default="close")
    p.add_argument("--log", type=Path, default=None, help="append request log as JSONL")
    p.add_argument("--batch-validating-s", type=float, default=0.0, help="a batch's time in validating")
    p.add_argument("--batch-request-ms", type=float, default=0.0, help="in_progress: time per request")
    p.add_argument("--batch-finalizing-s", type=float, default=0.0, help="a batch's time in finalizing")
    p.add_argument("--batch-expire-after", type=int, default=None, help="the first batch expires after N")
    p.add_argument(
        "--batch-fail-first-k", type=int, default=0, help="each request's first K batch attempts fail"
    )
    p.add_argument(
        "--reasoning-parser",
        choices=REASONING_PARSERS,
        default="none",
        help="split think blocks out of the content as vLLM's parser of that name does",
    )
    p.add_argument("--reasoning-field", choices=REASONING_FIELDS, default="reasoning_content")
    p.add_argument(
        "--report-reasoning-tokens",
        action="store_true",
        help="usage.completion_tokens_details.reasoning_tokens",
    )
    return p


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    answers: dict[str | re.Pattern[str], str | Reply] | None = None
    if args.answers_json is not None:
        answers = dict(json.loads(args.answers_json.read_text(encoding="utf-8")))
    script = None
    if args.script:
        module, _, attr = args.script.partition(":")
        script = getattr(importlib.import_module(module), attr)
    extra = {"fault_kinds": parse_fault_mix(args.fault_kinds)} if args.fault_kinds else {}
    return ServerConfig(
        host=args.host,
        port=args.port,
        model=args.model,
        model_card=None if args.model_card is None else dict(args.model_card),
        system_fingerprint=args.system_fingerprint,
        strict_model=args.strict_model,
        api_key=args.api_key,
        support_n=not args.no_n,
        latency_ms=args.latency_ms,
        jitter_ms=args.jitter_ms,
        answer=args.answer,
        answers=answers,
        script=script,
        fault_rate=args.fault_rate,
        fault_seed=args.fault_seed,
        fail_first_k_attempts_per_request=args.fail_first_k,
        fail_first_k_kind=args.fail_first_kind,
        retry_after=args.retry_after or None,
        max_concurrent=args.max_concurrent,
        stall_s=args.stall_s,
        stall_then=args.stall_then,
        log_path=args.log,
        reasoning_parser=args.reasoning_parser,
        reasoning_field=args.reasoning_field,
        report_reasoning_tokens=args.report_reasoning_tokens,
        batch=BatchConfig(
            validating_s=args.batch_validating_s,
            request_ms=args.batch_request_ms,
            finalizing_s=args.batch_finalizing_s,
            expire_after=args.batch_expire_after,
            fail_first_k=args.batch_fail_first_k,
        ),
        **extra,
    )


async def _serve_until_signal(config: ServerConfig) -> dict[str, Any]:
    core = ServerCore(config)
    await core.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"LISTENING {core.url}", flush=True)
    await stop.wait()
    await core.stop()  # stats afterwards: requests cut short by the stop are counted too
    return core.stats()


def main(argv: list[str] | None = None) -> int:
    config = config_from_args(build_parser().parse_args(argv))
    stats = asyncio.run(_serve_until_signal(config))
    print(json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
