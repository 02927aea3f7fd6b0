"""`trio://` through the PyTRIO SDK (extra `trio`): the seed lab's own backend.
`ServiceClient()` then `create_sampling_client(base_model=, model_path=)`, `sample_async` with
`ModelInput.from_ints` and `num_samples`. The SDK's home is our cache folder (nothing in
`~/.pytrio` is written), telemetry is off unless `--sdk-telemetry`, and the key is only
what `PYTRIO_API_KEY` holds, handed to the SDK in memory."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._base import SamplingParams
from ._sdk import Session, StartupError, checkpoint_of, count_http_sends, hf_chat_tokenizer, http_sends

KEY_ENV = "PYTRIO_API_KEY"
URL_ENV = "PYTRIO_BASE_URL"
DEFAULT_URL = "https://pytrio.com"
SAMPLE_ROUTE = "/sample"
FATAL_STATUS = frozenset({400, 401, 403, 404, 422})
STARTUP_RETRY_S = 30.0  # an unreachable service is reported within this, not after 15 minutes


def _require() -> Any:
    try:
        import pytrio
    except ImportError:
        raise StartupError(
            "--model-path trio://... needs the PyTRIO SDK: pip install 'pytest-agenteval[trio]'"
        ) from None
    return pytrio


class TrioAdapter:
    scheme = "trio"
    key_env = KEY_ENV

    def base_url(self) -> str:
        return os.environ.get(URL_ENV) or DEFAULT_URL

    def connect(self, settings: Any, home: Path) -> Session:
        trio = _require()
        key = os.environ.get(KEY_ENV, "").strip()
        if not key:
            raise StartupError(f"trio://: {KEY_ENV} is not set; export your PyTRIO API key in it")
        url = self.base_url()
        # home first: it reloads the profile (none there) and resets the URL and key
        trio.configure(
            home=str(home),
            api_key=key,
            base_url=url,
            control_retry_timeout_seconds=min(STARTUP_RETRY_S, settings.retry_max_seconds),
            sampling_retry_timeout_seconds=settings.retry_max_seconds,
        )
        trio.configure_observability(enabled=bool(settings.sdk_telemetry))
        count_http_sends(SAMPLE_ROUTE)
        checkpoint = checkpoint_of(settings.model_path)
        try:
            service = trio.ServiceClient()
        except Exception as exc:  # noqa: BLE001 - the SDK's errors become one line
            raise StartupError(self._startup_line(exc, url, "signing in")) from None
        try:
            sampling = service.create_sampling_client(base_model=settings.base_model, model_path=checkpoint)
        except Exception as exc:  # noqa: BLE001
            self._end(service, "CANCELLED")
            what = f"--base-model {settings.base_model}" + (
                f" --model-path {checkpoint}" if checkpoint else ""
            )
            raise StartupError(self._startup_line(exc, url, f"creating a sampling run for {what}")) from None
        tokenizer = self._tokenizer(settings, sampling)
        from pytrio.config.config import configuration

        return Session(
            service=service,
            sampling=sampling,
            tokenizer=tokenizer,
            max_in_flight=int(configuration.sampling_request_max_in_flight),
            base_url=url,
            sdk_version=str(configuration.version),
        )

    def _tokenizer(self, settings: Any, sampling: Any) -> Any:
        if settings.tokenizer:
            from ._template import tokenizer_from_file

            return tokenizer_from_file(settings.tokenizer)
        try:
            tokenizer = sampling.get_tokenizer()
        except Exception as exc:  # noqa: BLE001 - offline, or a model id the hub does not know
            raise StartupError(
                f"trio://: cannot load the tokenizer of {sampling.model_id!r} ({_first_line(exc)}); "
                "pass --tokenizer PATH"
            ) from None
        return hf_chat_tokenizer(tokenizer, f"the SDK's get_tokenizer() ({sampling.model_id})")

    def _startup_line(self, exc: BaseException, url: str, doing: str) -> str:
        status = int(getattr(exc, "status_code", 0) or 0)
        code = str(getattr(exc, "code", "") or "")
        message = _first_line(getattr(exc, "message", None) or exc)
        if status in (401, 403) or code.startswith("auth."):
            return f"trio://: PyTRIO at {url} refused the key in {KEY_ENV} ({message}); set a valid key"
        if status == 0:
            return f"trio://: cannot reach PyTRIO at {url} while {doing} ({message}); check {URL_ENV}"
        return f"trio://: PyTRIO refused {doing} (HTTP {status} {code}: {message})"

    async def sample(
        self, session: Session, prompt: Sequence[int], params: SamplingParams, n: int
    ) -> list[tuple[list[int], str]]:
        import pytrio as trio

        sampling_params = trio.SamplingParams(
            max_tokens=params.max_tokens,
            seed=params.seed,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,
            stop=list(params.stop) if params.stop else None,
        )
        response = await session.sampling.sample_async(
            prompt=trio.ModelInput.from_ints(list(prompt)),
            num_samples=n,
            sampling_params=sampling_params,
            return_text=False,  # the text is decoded here, from the ids
        )
        if hasattr(response, "__await__"):  # older SDKs hand back a future to await again
            response = await response
        if len(response.sequences) != n:
            raise ValueError(f"asked for {n} samples, got {len(response.sequences)}")
        return [([int(t) for t in s.tokens], str(s.stop_reason)) for s in response.sequences]

    def describe(self, exc: BaseException) -> str:
        return _first_line(getattr(exc, "message", None) or exc)

    def is_fatal(self, exc: BaseException) -> bool:
        return int(getattr(exc, "status_code", 0) or 0) in FATAL_STATUS

    def sample_sends(self) -> int:
        return http_sends(SAMPLE_ROUTE)

    def close(self, session: Session, status: str) -> None:
        self._end(session.service, status)

    @staticmethod
    def _end(service: Any, status: str) -> None:
        """End the service session on the server (POST .../close), which the SDK otherwise
        does only when the client is garbage-collected."""
        runtime = getattr(service, "_runtime", None)
        if runtime is not None:
            runtime.shutdown(status=status)


def _first_line(value: Any) -> str:
    lines = str(value).strip().splitlines()
    return lines[0] if lines else type(value).__name__
