"""A local Tinker service over a real socket, for the real `tinker` SDK: client config
(no JWT exchange, no retrieve_futures poller, no session joining), sessions with their
heartbeat and finish, sampling sessions, `asample` promises and their `retrieve_future`
polling, answered with the SDK's own protobuf `SampleResponse`. Point the SDK at it with
`TINKER_BASE_URL=server.url` and a `TINKER_API_KEY` starting with `tml-`."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from aiohttp import web

from pytest_agenteval.testing._sdk_server import SdkServer, prompt_ids, stop_reason

POLL_S = 20.0  # a retrieve_future waits this long for the result, then answers try_again


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message, "category": "user"}, status=status)


def sample_response_proto(completions: list[Any]) -> bytes:
    """The SDK's `tinker_public_pb2.SampleResponse`: tokens as int32 bytes."""
    import numpy as np
    from tinker.proto import tinker_public_pb2 as pb

    reasons = {"stop": pb.STOP_REASON_STOP, "length": pb.STOP_REASON_LENGTH}
    response = pb.SampleResponse()
    for completion in completions:
        sequence = response.sequences.add()
        sequence.stop_reason = reasons[stop_reason(completion)]
        sequence.tokens = np.asarray(completion.token_ids, dtype=np.int32).tobytes()
    return response.SerializeToString()


class TinkerTestServer(SdkServer):
    """Tinker's wire protocol (tinker 0.38): `/api/v1/...` POSTs with `X-API-Key`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ids = itertools.count(1)
        self.sampling_sessions: dict[str, dict[str, Any]] = {}  # id -> the create request
        self.ended_sessions: dict[str, str] = {}  # session id -> finish reason
        self._futures: dict[str, asyncio.Future[Any]] = {}

    def checkpoints_loaded(self) -> list[str]:
        """The checkpoint of every sampling session, in order ("" for the base model itself)."""
        return [session.get("model_path") or "" for session in self.sampling_sessions.values()]

    def routes(self, app: web.Application) -> None:
        post = app.router.add_post
        post("/api/v1/client/config", self._config)
        post("/api/v1/client/dynamic_config", self._dynamic_config)
        post("/api/v1/create_session", self._create_session)
        post("/api/v1/session_heartbeat", self._heartbeat)
        post("/api/v1/sessions/{session}/finish", self._finish)
        post("/api/v1/create_sampling_session", self._create_sampling_session)
        post("/api/v1/asample", self._asample)
        post("/api/v1/retrieve_future", self._retrieve)
        post("/api/v1/telemetry", self._telemetry)
        app.router.add_get("/api/v1/healthz", self._health)

    def _denied(self, request: web.Request) -> web.Response | None:
        if request.headers.get("X-API-Key") == self.config.api_key:
            return None
        return _error(401, "Invalid or expired API key")

    async def _config(self, request: web.Request) -> web.Response:
        self.count("config")
        denied = self._denied(request)
        return denied or web.json_response(
            {
                "pjwt_auth_enabled": False,
                "sample_use_retrieve_futures": False,
                "sample_join_sampling_session": False,
                "use_pyqwest_transport": False,
            }
        )

    async def _dynamic_config(self, request: web.Request) -> web.Response:
        self.count("dynamic_config")
        return web.json_response({"sample_cancel_enabled": False})

    async def _create_session(self, request: web.Request) -> web.Response:
        self.count("create_session")
        denied = self._denied(request)
        return denied or web.json_response({"type": "create_session", "session_id": f"s_{next(self._ids)}"})

    async def _heartbeat(self, request: web.Request) -> web.Response:
        self.count("heartbeat")
        return web.json_response({"type": "session_heartbeat"})

    async def _finish(self, request: web.Request) -> web.Response:
        self.count("finish")
        body = await request.json()
        self.ended_sessions[request.match_info["session"]] = str((body.get("reason") or {}).get("type"))
        return web.json_response(None)

    async def _telemetry(self, request: web.Request) -> web.Response:
        self.count("telemetry")
        return web.json_response({"status": "accepted"})

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _create_sampling_session(self, request: web.Request) -> web.Response:
        self.count("create_sampling_session")
        denied = self._denied(request)
        if denied:
            return denied
        body = await request.json()
        base, path = body.get("base_model"), body.get("model_path")
        if path and path not in self.config.checkpoints:
            return _error(404, f"checkpoint {path!r} does not exist")
        trained_from = self.config.checkpoints.get(path) if path else None
        if base and trained_from and base != trained_from:
            return _error(400, f"checkpoint {path!r} was trained from {trained_from!r}, not {base!r}")
        if (base or trained_from) not in self.config.base_models:
            return _error(404, f"base model {base!r} is not available")
        sid = f"samp_{next(self._ids)}"
        self.sampling_sessions[sid] = {**body, "base_model": base or trained_from}
        return web.json_response({"type": "create_sampling_session", "sampling_session_id": sid})

    async def _asample(self, request: web.Request) -> web.StreamResponse:
        denied = self._denied(request)
        if denied:
            return denied
        body = await request.json()
        if body.get("sampling_session_id") not in self.sampling_sessions:
            return _error(404, "unknown sampling session")
        wire = {**body, "sampling_params": body.get("sampling_params") or {}}

        def promise(completions: list[Any]) -> dict[str, Any]:
            request_id = f"req_{next(self._ids)}"
            future = asyncio.get_running_loop().create_future()
            future.set_result(completions)
            self._futures[request_id] = future
            ids = [f"{request_id}-{j}" for j in range(len(completions))]
            return {"request_id": request_id, "sample_sequence_ids": ids}

        prompt_ids(wire["prompt"])  # a prompt the server cannot read is a 500 here, not later
        return await self.sample(request, wire, promise)

    async def _retrieve(self, request: web.Request) -> web.Response:
        self.count("retrieve_future")
        body = await request.json()
        future = self._futures.get(str(body.get("request_id")))
        if future is None:
            return _error(404, "unknown request id")
        try:
            completions = await asyncio.wait_for(asyncio.shield(future), POLL_S)
        except asyncio.TimeoutError:
            return web.json_response({"type": "try_again", "queue_state": "active"}, status=408)
        del self._futures[str(body["request_id"])]
        return web.Response(body=sample_response_proto(completions), content_type="application/x-protobuf")
