"""`tinker://` through the Tinker SDK (extra `tinker`): the same shape as PyTRIO with
another wire protocol. `ServiceClient()`, `create_sampling_client(model_path=, base_model=)`,
`sample()` with `ModelInput.from_ints` and `num_samples`; the sequences carry ids only (no
text), so the text is decoded from them as for PyTRIO. The key is what `TINKER_API_KEY`
holds; telemetry is off (`TINKER_TELEMETRY=0`) unless `--sdk-telemetry`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import SamplingParams
from pytest_agenteval.models.backends.sdk import (
    SdkAdapter,
    Session,
    StartupError,
    checkpoint_of,
    count_http_sends,
    doing_what,
    sampled_sequences,
    sdk_sampling_params,
)

STATUS = {"ENDED": "success", "CANCELLED": "interrupted"}
PROBE_S = 10.0


def _require() -> Any:
    try:
        import tinker
    except ImportError:
        raise StartupError(
            "--model-path tinker://... needs the Tinker SDK: pip install 'pytest-agenteval[tinker]'"
        ) from None
    return tinker


class TinkerAdapter(SdkAdapter):
    scheme = "tinker"
    vendor = "Tinker"
    key_env = "TINKER_API_KEY"
    url_env = "TINKER_BASE_URL"
    default_url = "https://tinker.thinkingmachines.dev/services/tinker-prod"
    sample_route = "/api/v1/asample"

    def require_key(self) -> str:
        if os.environ.get("TINKER_CREDENTIAL_CMD"):  # the SDK's other credential source
            return ""
        return super().require_key()

    def connect(self, settings: Any, home: Path) -> Session:
        if not settings.sdk_telemetry:
            os.environ["TINKER_TELEMETRY"] = "0"  # read by the SDK when a session starts
        tinker = _require()
        key = self.require_key()
        self._reachable()
        count_http_sends(self.sample_route)
        # the key as read (stripped and checked); none with TINKER_CREDENTIAL_CMD
        service = tinker.ServiceClient(base_url=self.base_url(), api_key=key or None)
        try:
            sampling = service.create_sampling_client(
                model_path=checkpoint_of(settings.model_path), base_model=settings.base_model
            ).result(timeout=settings.retry_max_seconds)
        except Exception as exc:  # noqa: BLE001 - the SDK's errors become one line
            self._end(service, "CANCELLED")
            raise StartupError(self.startup_line(exc, doing_what(settings))) from None
        config = sampling.holder.get_client_config()
        return Session(
            service=service,
            sampling=sampling,
            tokenizer=self.tokenizer(settings, sampling.get_tokenizer, str(settings.base_model)),
            max_in_flight=int(config.sample_max_concurrent_requests),
        )

    def _reachable(self) -> None:
        """The SDK retries an unreachable service for minutes before it says so: one cheap
        `GET /api/v1/healthz` first (any HTTP answer counts as reachable)."""
        url = f"{self.base_url().rstrip('/')}/api/v1/healthz"
        from pytest_agenteval.models.http.probe import Unreachable, request_json

        try:
            request_json(url, timeout_s=PROBE_S)
        except Unreachable as exc:
            raise StartupError(self.startup_line(ConnectionError(str(exc)), "connecting")) from None

    async def sample(
        self, session: Session, prompt: Sequence[int], params: SamplingParams, n: int
    ) -> list[tuple[list[int], str]]:
        import tinker

        sampling_params = sdk_sampling_params(tinker.SamplingParams, params)
        response = await session.sampling.sample(
            prompt=tinker.ModelInput.from_ints(list(prompt)), num_samples=n, sampling_params=sampling_params
        )
        return sampled_sequences(response, n)

    def close(self, session: Session, status: str) -> None:
        self._end(session.service, status)

    @staticmethod
    def _end(service: Any, status: str) -> None:
        """Finish the session on the server (`/api/v1/sessions/{id}/finish`)."""
        try:
            service.close(STATUS.get(status, "interrupted")).result(timeout=30)
        except Exception:  # noqa: BLE001 - closing is best effort; the server expires it anyway
            pass
