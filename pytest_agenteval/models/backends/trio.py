"""`trio://` through the PyTRIO SDK (extra `trio`): the ReTool lab's own backend.
`ServiceClient()` then `create_sampling_client(base_model=, model_path=)`, `sample_async` with
`ModelInput.from_ints` and `num_samples`. The SDK's home is our cache folder (nothing in
`~/.pytrio` is written), telemetry is off unless `--sdk-telemetry`, and the key is only
what `PYTRIO_API_KEY` holds, handed to the SDK in memory."""

from __future__ import annotations

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

STARTUP_RETRY_S = 30.0  # an unreachable service is reported within this, not after 15 minutes


def _require() -> Any:
    try:
        import pytrio
    except ImportError:
        raise StartupError(
            "--model-path trio://... needs the PyTRIO SDK: pip install 'pytest-agenteval[trio]'"
        ) from None
    return pytrio


class TrioAdapter(SdkAdapter):
    scheme = "trio"
    vendor = "PyTRIO"
    key_env = "PYTRIO_API_KEY"
    url_env = "PYTRIO_BASE_URL"
    default_url = "https://pytrio.com"
    sample_route = "/sample"

    def connect(self, settings: Any, home: Path) -> Session:
        trio = _require()
        key = self.require_key()
        # home first: it reloads the profile (none there) and resets the URL and key
        trio.configure(
            home=str(home),
            api_key=key,
            base_url=self.base_url(),
            control_retry_timeout_seconds=min(STARTUP_RETRY_S, settings.retry_max_seconds),
            sampling_retry_timeout_seconds=settings.retry_max_seconds,
        )
        trio.configure_observability(enabled=bool(settings.sdk_telemetry))
        count_http_sends(self.sample_route)
        try:
            service = trio.ServiceClient()
        except Exception as exc:  # noqa: BLE001 - the SDK's errors become one line
            raise StartupError(self.startup_line(exc, "signing in")) from None
        try:
            sampling = service.create_sampling_client(
                base_model=settings.base_model, model_path=checkpoint_of(settings.model_path)
            )
        except Exception as exc:  # noqa: BLE001
            self._end(service, "CANCELLED")
            raise StartupError(self.startup_line(exc, doing_what(settings))) from None
        from pytrio.config.config import configuration

        return Session(
            service=service,
            sampling=sampling,
            tokenizer=self.tokenizer(settings, sampling.get_tokenizer, sampling.model_id),
            max_in_flight=int(configuration.sampling_request_max_in_flight),
        )

    async def sample(
        self, session: Session, prompt: Sequence[int], params: SamplingParams, n: int
    ) -> list[tuple[list[int], str]]:
        import pytrio as trio

        sampling_params = sdk_sampling_params(trio.SamplingParams, params)
        response = await session.sampling.sample_async(
            prompt=trio.ModelInput.from_ints(list(prompt)),
            num_samples=n,
            sampling_params=sampling_params,
            return_text=False,  # the text is decoded here, from the ids
        )
        if hasattr(response, "__await__"):  # older SDKs hand back a future to await again
            response = await response
        return sampled_sequences(response, n)

    def close(self, session: Session, status: str) -> None:
        self._end(session.service, status)

    @staticmethod
    def _end(service: Any, status: str) -> None:
        """End the service session on the server (POST .../close), which the SDK otherwise
        does only when the client is garbage-collected."""
        runtime = getattr(service, "_runtime", None)
        if runtime is not None:
            runtime.shutdown(status=status)
