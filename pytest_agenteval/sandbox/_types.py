"""Plain data of the sandbox API: the configuration and one execution's result."""

from __future__ import annotations

from dataclasses import dataclass

LEVELS = ("auto", "basic", "landlock", "bwrap")
STATUSES = ("ok", "error", "timeout", "killed", "sandbox_error")


@dataclass(frozen=True)
class ExecutionResult:
    """One run of model-written code, as the model and the stats see it."""

    status: str  # "ok" | "error" | "timeout" | "killed" | "sandbox_error"
    output: str  # stdout then stderr (then a note), tail-capped, template tokens escaped
    stdout: str
    stderr: str
    exit_code: int | None
    latency_s: float
    truncated: bool
    raw_stdout: str = ""  # the streams' tails as the code wrote them (not escaped, not capped)
    raw_stderr: str = ""
    signal: int | None = None  # the signal that ended the process, if one did


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and containment level of a Sandbox (see docs/sandbox.md)."""

    timeout_s: float = 30.0
    workers: int = 8  # most executions running at once
    memory_mb: int = 2048  # RLIMIT_AS
    file_size_mb: int = 32  # RLIMIT_FSIZE: bounds every file, captured output included
    open_files: int = 256
    nproc: int = 64  # RLIMIT_NPROC: only binds a non-root uid
    output_chars: int = 4096
    level: str = "auto"  # "auto" | "basic" | "landlock" | "bwrap"
    preload: tuple[str, ...] = ("numpy", "sympy")

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"SandboxConfig.level must be one of {LEVELS}, got {self.level!r}")
        for name in (
            "timeout_s",
            "workers",
            "memory_mb",
            "file_size_mb",
            "open_files",
            "nproc",
            "output_chars",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxConfig.{name} must be positive")
