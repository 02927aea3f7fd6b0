"""Turning a zygote answer into what the model sees: escaping, tail caps, notes."""

from __future__ import annotations

import re
import signal

from pytest_agenteval.sandbox._types import ExecutionResult

# Chat-template control tokens: every <|...|> token (<|im_end|>, <|im_start|>,
# <|endoftext|>, <|eot_id|>, ...) and the tool-call tags.
_TOKEN = re.compile(r"<(?=\|[A-Za-z0-9_.:-]{1,64}\|>|/?tool_call>|/?tool_response>)")


def escape_template_tokens(text: str) -> str:
    """Make chat-template tokens inert by writing their leading '<' as '&lt;'.

    `<|im_end|>` becomes `&lt;|im_end|>` and `</tool_response>` becomes
    `&lt;/tool_response>`: still readable, but no tokenizer can match them as the
    special token that would close the tool turn. Idempotent; other text is kept.
    """
    return _TOKEN.sub("&lt;", text)


def tail_cap(text: str, limit: int) -> tuple[str, bool]:
    """Keep the last `limit` characters (a marker line included); (text, truncated)."""
    if len(text) <= limit:
        return text, False
    marker = f"[... {len(text) - limit} earlier characters truncated ...]\n"
    if len(marker) >= limit:
        return text[-limit:], True
    return marker + text[-(limit - len(marker)) :], True


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _status_and_note(msg: dict, timeout_s: float) -> tuple[str, str]:
    code, sig, reason = msg.get("exit_code"), msg.get("signal"), msg.get("reason")
    if msg.get("error"):
        return "sandbox_error", f"SandboxError: {msg['error']}"
    if msg.get("setup_failed"):
        return "sandbox_error", "SandboxError: containment could not be applied"
    if reason == "timeout":
        return "timeout", f"TimeoutError: execution exceeded {timeout_s:g} s and was killed"
    if reason == "cancelled":
        return "sandbox_error", "SandboxError: execution was cancelled"
    if sig is not None:
        hint = {
            signal.SIGXCPU: " (CPU time limit)",
            signal.SIGKILL: " (CPU time or memory limit)",
            signal.SIGXFSZ: " (file size limit)",
        }.get(sig, "")
        return "killed", f"Killed by {_signal_name(sig)}{hint}"
    if code == 0:
        return "ok", ""
    stderr = msg.get("stderr") or ""
    return "error", "" if stderr.strip() else f"Process exited with code {code}"


def build_result(
    msg: dict, timeout_s: float, limit: int, latency_s: float, read_bytes: int
) -> ExecutionResult:
    """ExecutionResult from the zygote's JSON answer for one call."""
    status, note = _status_and_note(msg, timeout_s)
    raw_out, raw_err = msg.get("stdout") or "", msg.get("stderr") or ""
    cut = msg.get("stdout_size", 0) > read_bytes or msg.get("stderr_size", 0) > read_bytes
    stdout, cut_out = tail_cap(escape_template_tokens(raw_out), limit)
    stderr, cut_err = tail_cap(escape_template_tokens(raw_err), limit)
    combined = raw_out
    for part in (raw_err, note):
        if part:
            if combined and not combined.endswith("\n"):
                combined += "\n"
            combined += part
    # Escape the joined text again: a token could straddle the stdout/stderr seam.
    output, cut_all = tail_cap(escape_template_tokens(combined), limit)
    return ExecutionResult(
        status=status,
        output=output,
        stdout=stdout,
        stderr=stderr,
        exit_code=msg.get("exit_code"),
        latency_s=latency_s,
        truncated=cut or cut_out or cut_err or cut_all,
        raw_stdout=raw_out,
        raw_stderr=raw_err,
        signal=msg.get("signal"),
    )


def error_result(message: str, latency_s: float) -> ExecutionResult:
    """A sandbox_error result for failures of the machinery itself."""
    text = escape_template_tokens(f"SandboxError: {message}")
    return ExecutionResult(
        status="sandbox_error",
        output=text,
        stdout="",
        stderr="",
        exit_code=None,
        latency_s=latency_s,
        truncated=False,
    )
