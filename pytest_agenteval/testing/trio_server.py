"""A local PyTRIO service over a real socket, for the real `pytrio` SDK: the Control plane
(`/api/openapi/v1/...`, `/api/sdk/bootstrap`, telemetry) and the Actor's sample route on the
same port. Point the SDK at it with `PYTRIO_BASE_URL=server.url` and `PYTRIO_API_KEY`.

    with TrioTestServer(SdkServerConfig(base_models={"B": tokenizer_dir}), generator) as srv:
        ...  # srv.requests: every sample request's body as the SDK sent it
"""

from __future__ import annotations

import itertools
from typing import Any

from aiohttp import web

from pytest_agenteval.testing._sdk_server import SdkServer, sequences_field

_NOW = "2026-01-01T00:00:00Z"
_NEVER = "2099-01-01T00:00:00Z"


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message}, status=status)


class TrioTestServer(SdkServer):
    """PyTRIO's wire protocol (pytrio 0.2.8/0.2.9): sessions, sampling runs, JWT renewal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ids = itertools.count(1)
        self.sampling_runs: dict[str, dict[str, Any]] = {}  # cuid -> the create request + model
        self.ended_sessions: dict[str, str] = {}  # cuid -> close status

    def checkpoints_loaded(self) -> list[str]:
        """The checkpoint of every sampling run, in order ("" for the base model itself)."""
        return [run.get("source_checkpoint_uri", "") for run in self.sampling_runs.values()]

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/api/openapi/v1/api-key/verify", self._verify)
        app.router.add_get("/api/sdk/bootstrap", self._bootstrap)
        app.router.add_post("/api/openapi/v1/service-sessions", self._create_session)
        app.router.add_post("/api/openapi/v1/service-sessions/{ss}/sampling-runs", self._create_run)
        app.router.add_post("/api/openapi/v1/sampling-runs/{sr}/renew", self._renew)
        app.router.add_post("/api/openapi/v1/service-sessions/{ss}/close", self._close_session)
        app.router.add_post("/api/telemetry/event", self._telemetry)
        app.router.add_post("/v1/sampling-runs/{sr}/sample", self._sample)

    def _denied(self, request: web.Request) -> web.Response | None:
        if request.headers.get("X-API-Key") == self.config.api_key:
            return None
        return _error(401, "auth.invalid_api_key", "API key is invalid or expired")

    async def _verify(self, request: web.Request) -> web.Response:
        self.count("verify")
        denied = self._denied(request)
        return denied or web.json_response(
            {
                "api_key_tid": "key_1",
                "api_key_name": "test",
                "user_cuid": "user_1",
                "username": "tester",
                "display_name": None,
                "workspace_cuid": "ws_1",
                "workspace_name": "test workspace",
                "workspace_type": "personal",
                "expires_at": None,
            }
        )

    async def _bootstrap(self, request: web.Request) -> web.Response:
        self.count("bootstrap")
        version = request.query.get("sdk_version", "")
        return web.json_response(
            {"compatibility": {"status": "compatible", "sdk_version": version}, "notices": []}
        )

    async def _create_session(self, request: web.Request) -> web.Response:
        self.count("service_session")
        denied = self._denied(request)
        if denied:
            return denied
        return web.json_response(
            {
                "service_session_cuid": f"ss_{next(self._ids)}",
                "workspace_cuid": "ws_1",
                "status": "ACTIVE",
                "created_at": _NOW,
            }
        )

    def _actor(self, sr: str) -> dict[str, Any]:
        return {
            "sampling_run_cuid": sr,
            "workspace_cuid": "ws_1",
            "actor": {
                "actor_cuid": "actor_1",
                "endpoint": self.url,
                "connect_mode": "direct",
                "tls_enabled": False,
            },
            "actor_jwt": {"token": f"jwt-{sr}", "expires_at": _NEVER},
        }

    async def _create_run(self, request: web.Request) -> web.Response:
        self.count("sampling_run")
        denied = self._denied(request)
        if denied:
            return denied
        body = await request.json()
        base, uri = body.get("base_model", ""), body.get("source_checkpoint_uri", "")
        if base not in self.config.base_models:
            return _error(404, "model.not_found", f"base model {base!r} is not available")
        if uri and uri not in self.config.checkpoints:
            return _error(404, "checkpoint.not_found", f"checkpoint {uri!r} does not exist")
        if uri and self.config.checkpoints[uri] != base:
            return _error(
                400,
                "checkpoint.base_model_mismatch",
                f"checkpoint {uri!r} was trained from {self.config.checkpoints[uri]!r}, not {base!r}",
            )
        ss, sr = request.match_info["ss"], f"sr_{next(self._ids)}"
        self.sampling_runs[sr] = {**body, "service_session_cuid": ss}
        return web.json_response(
            {
                **self._actor(sr),
                "service_session_cuid": ss,
                "status": "RUNNING",
                "run_index": len(self.sampling_runs),
                "model_spec_cuid": "spec_1",
                "model_alias": base,
                "model_id": self.config.base_models[base],  # a tokenizer folder: get_tokenizer() offline
                "sampler": {
                    "max_batch_size": self.config.max_batch_size,
                    "max_tokens_per_request": None,
                    "max_seq_len": None,
                },
                "created_at": _NOW,
            }
        )

    async def _renew(self, request: web.Request) -> web.Response:
        self.count("renew")
        sr = request.match_info["sr"]
        run = self.sampling_runs.get(sr)
        if run is None:
            return _error(404, "sampling_run.not_found", f"no sampling run {sr}")
        return web.json_response({**self._actor(sr), "service_session_cuid": run["service_session_cuid"]})

    async def _close_session(self, request: web.Request) -> web.Response:
        self.count("close")
        body = await request.json()
        self.ended_sessions[request.match_info["ss"]] = str(body.get("status"))
        return web.json_response({"ok": True})

    async def _telemetry(self, request: web.Request) -> web.Response:
        self.count("telemetry")
        return web.json_response({"ok": True})

    async def _sample(self, request: web.Request) -> web.StreamResponse:
        sr = request.match_info["sr"]
        if request.headers.get("Authorization") != f"Bearer jwt-{sr}" or sr not in self.sampling_runs:
            return _error(401, "actor.unauthorized", "bad actor token")
        body = await request.json()
        return await self.sample(
            request,
            body,
            lambda completions: {
                "request_id": body.get("request_id", ""),
                "sampling_run": sr,
                "sequences": sequences_field(completions),
                "usage": {
                    "input_tokens": completions[0].prompt_tokens if completions else 0,
                    "output_tokens": sum(c.completion_tokens for c in completions),
                },
            },
        )
