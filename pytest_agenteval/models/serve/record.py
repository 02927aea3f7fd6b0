"""One typed record of a launched server (`ServedModel`): what a model's `ModelChoice`
holds when this run launched its server, the same in every wave of a sweep. Known at
start-up: the weights, the backend, the sampling defaults (the cache key's and the
summary identity's); filled in once the server is up: its replicas, logs and notes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ServedModel:
    """A server this run launches for one model, known at start-up for every model of a
    sweep: what the cache key and the summary's identity hold (the weights, the backend, the
    sampling defaults sent with every request). What only a running server knows (replicas,
    logs, its notes) is filled in once it is up; a later wave's model names instead the
    file its address and key arrive in (`pending`), which is no part of its identity."""

    label: str
    backend: str  # "vllm" | "sglang" | "llama-cpp"
    model: Mapping[str, Any] = field(default_factory=dict)  # the resolved weights (resolve.py)
    fingerprint: str = ""  # the weights' files: the cache key's
    sampling_defaults: Mapping[str, Any] = field(default_factory=dict)  # sent with every request
    streams: bool = True  # llama_cpp.server ends a running stream when the next request arrives
    serves: tuple[str, ...] = ()  # a sweep's labels this server serves (sorted)
    # -- once the server is up (left out of `model_hash`: they differ run to run) --
    replicas: tuple[Mapping[str, Any], ...] = ()
    logs: Mapping[str, str] = field(default_factory=dict)  # url -> log file
    server_notes: tuple[str, ...] = ()
    adapter_probe: Mapping[str, Any] | None = None
    warnings: tuple[str, ...] = ()
    # -- a later wave's, before its server is up: the file the controller writes --
    pending: str = ""

    @property
    def display(self) -> str:
        return f"{self.label} ({self.backend}, launched)"

    def describe(self) -> dict[str, Any]:
        """For the summary (models/choice.describe_model): nothing temporary, no key."""
        info: dict[str, Any] = {
            "label": self.label,
            "display": self.display,
            "model": dict(self.model),
            "replicas": [dict(r) for r in self.replicas],
            "logs": dict(self.logs),
            "sampling_defaults": dict(self.sampling_defaults),
            "fingerprint": self.fingerprint,
            "streams": self.streams,
        }
        if self.serves:
            info["serves"] = list(self.serves)
        if self.server_notes:
            info["server_notes"] = list(self.server_notes)
        if self.adapter_probe is not None:
            info["adapter_probe"] = dict(self.adapter_probe)
        if self.warnings:
            info["warnings"] = list(self.warnings)
        return info

    def as_dict(self) -> dict[str, Any]:
        """What travels to xdist workers (`from_dict` reads it back)."""
        return {
            **self.describe(),
            "backend": self.backend,
            **({"pending": self.pending} if self.pending else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | ServedModel) -> ServedModel:
        if isinstance(data, ServedModel):
            return data
        replicas = tuple(dict(r) for r in data.get("replicas") or ())
        backend = data.get("backend") or (replicas[0].get("backend") if replicas else "") or ""
        probe = data.get("adapter_probe")
        return cls(
            label=str(data.get("label") or ""),
            backend=str(backend),
            model=dict(data.get("model") or {}),
            fingerprint=str(data.get("fingerprint") or ""),
            sampling_defaults=dict(data.get("sampling_defaults") or {}),
            streams=bool(data.get("streams", True)),
            serves=tuple(sorted(data.get("serves") or ())),
            replicas=replicas,
            logs=dict(data.get("logs") or {}),
            server_notes=tuple(data.get("server_notes") or ()),
            adapter_probe=dict(probe) if probe is not None else None,
            warnings=tuple(data.get("warnings") or ()),
            pending=str(data.get("pending") or ""),
        )
