"""The launcher on a real GPU with vLLM: one command, one JSON. Not run in CI (no GPU, no vLLM).

    python benchmarks/gpu_vllm_check.py --model Qwen/Qwen3-0.6B [--adapter LORA_DIR] \
        [--data aime25.jsonl] [--limit 10] [--val-n 4] [--out gpu_vllm_check.json]

With `--preset NAME` (docs/presets.md) it instead runs that published protocol once on the
model (`--agenteval-preset NAME --serve`; the preset's N, length and sampling unless --val-n,
--limit or --max-tokens are given) and prints our figure beside the published one:

    ours 0.148 [0.081, 0.229] published 0.151 (Qwen3 Technical Report ...): within the ±0.023
    sampling band (N=64 against 64, 30 problems)

It runs, each through `pytest suites/aime25 --serve --serve-backend vllm --serve-keep`:
AIME25 text-only and retool on the base model, then (with --adapter) both again on the
adapter, whose server serves base and adapter side by side and probes that the adapter is
live. Between them a bare asyncio client sends the same number of requests to the kept
server (key-less on loopback), so the harness's throughput reads as a ratio to that floor.
At the end the kept server is stopped and its process group checked empty."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pytest_agenteval.config.presets import BY_NAME, Published, published_for  # noqa: E402
from pytest_agenteval.stats.reproduction import reproduction_band  # noqa: E402

# the run's size without --preset (a quick check, not a protocol)
QUICK = {"limit": 10, "val_n": 4, "max_tokens": 2048}


def sampling_args(args: argparse.Namespace, mode: str) -> list[str]:
    """What a suite run is asked for: the preset and only the options given (the preset's
    own N, length and sampling otherwise), or the quick check's mode and size."""
    given = {name: getattr(args, name) for name in QUICK if getattr(args, name) is not None}
    if args.preset:
        return [
            f"--agenteval-preset={args.preset}",
            *(f"--{k.replace('_', '-')}={v}" for k, v in given.items()),
        ]
    size = {**QUICK, **given}
    return [f"--mode={mode}", *(f"--{k.replace('_', '-')}={v}" for k, v in size.items())]


def published_line(summary: Mapping[str, Any], published: Published) -> str:
    """Our avg@N beside the published one: `ours 0.148 [0.081, 0.229] published 0.151
    (source): within the ±0.023 sampling band (N=64 against 64, 30 problems)`, the interval
    the summary's ci95; within or outside the band sampling alone allows
    (`reproduction_band`)."""
    ours = summary.get(published.metric)
    problems, samples = int(summary.get("problems") or 0), int(summary.get("val_n") or 0)
    head = f"published {published.value:.3f} ({published.source})"
    if ours is None or not problems or not samples:
        return f"ours none (nothing scored) {head}"
    low, high = (summary.get("ci95") or {}).get(published.metric) or (ours, ours)
    band = reproduction_band(published.value, problems, samples, published.samples)
    verdict = "within" if abs(ours - published.value) <= band else "outside"
    against = f"against {published.samples}" if published.samples else "against an unstated N"
    line = (
        f"ours {ours:.3f} [{low:.3f}, {high:.3f}] {head}: {verdict} the ±{band:.3f} sampling band "
        f"(N={samples} {against}, {problems} problems)"
    )
    return line if summary.get("complete", True) else f"{line}; INCOMPLETE run"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", required=True, help="hub id or checkpoint folder (a small one: e.g. Qwen/Qwen3-0.6B)"
    )
    parser.add_argument("--adapter", help="a LoRA adapter folder trained on --model")
    parser.add_argument(
        "--preset",
        help=f"run this published protocol instead and compare with its number: {', '.join(BY_NAME)}",
    )
    parser.add_argument("--data", help="AIME25 JSONL (default: the hub dataset)")
    parser.add_argument("--limit", type=int, help=f"problems (default {QUICK['limit']}; a preset: all)")
    parser.add_argument("--val-n", type=int, help=f"N (default {QUICK['val_n']}; a preset: its own)")
    parser.add_argument(
        "--max-tokens", type=int, help=f"length (default {QUICK['max_tokens']}; a preset: its own)"
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--serve-timeout", type=float, default=1200)
    parser.add_argument("--out", default="gpu_vllm_check.json")
    parser.add_argument(
        "--backend", default="vllm", help="vllm (default), sglang, or llama-cpp for a .gguf smoke run"
    )
    args = parser.parse_args(argv)
    if args.preset is not None and args.preset not in BY_NAME:
        parser.error(f"--preset {args.preset}: no such preset; choose one of {', '.join(BY_NAME)}")
    if args.preset and args.adapter:
        parser.error("--preset runs the published protocol on --model itself; drop --adapter")
    return args


def pytest_run(model: list[str], mode: str, args: argparse.Namespace, work: Path, tag: str) -> dict[str, Any]:
    """One suite run; returns its summary line and wall time."""
    out = work / f"{tag}-{mode}.jsonl"
    command = [
        sys.executable, "-m", "pytest", str(ROOT / "suites" / "aime25"), "-q", "-p", "no:randomly",
        *model, "--serve", f"--serve-backend={args.backend}", "--serve-keep",
        f"--agenteval-cache-dir={work / 'cache'}",
        f"--agenteval-out={out}",
        *sampling_args(args, mode),
        f"--serve-timeout={args.serve_timeout}",
    ]  # fmt: skip
    if args.data:
        command.append(f"--dataset-path={args.data}")
    started = time.monotonic()
    finished = subprocess.run(command, cwd=work, capture_output=True, text=True)
    wall = time.monotonic() - started
    lines = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    summary = next((x for x in lines if x.get("type") == "summary"), {})
    generations = sum(len(x.get("generations", [])) for x in lines if x.get("type") == "problem")
    completion = int((summary.get("tokens") or {}).get("completion") or 0)
    duration = summary.get("duration_s") or wall
    return {
        "tok_per_s": round(completion / duration, 1) if duration else None,
        "command": " ".join(command),
        "exit_code": finished.returncode,
        "stderr_tail": finished.stderr.strip().splitlines()[-5:],
        "wall_s": round(wall, 2),  # with the server's start-up on a first run
        "duration_s": summary.get("duration_s"),  # the session alone, after the server is ready
        "generations": generations,
        "average_at_n": summary.get("average_at_n"),
        "ci95": summary.get("ci95"),
        "val_n": summary.get("val_n"),
        "problems": summary.get("problems"),
        "complete": summary.get("complete"),
        "pass_at_n": summary.get("pass_at_n"),
        "tokens": summary.get("tokens"),
        "served": (summary.get("model") or {}).get("served"),
        "model_name": (summary.get("model") or {}).get("name"),  # the adapter's, for an adapter run
    }


async def bare_client(
    url: str, model: str, requests: int, max_tokens: int, concurrency: int, defaults: dict[str, Any]
) -> dict[str, Any]:
    """The floor: one request per sample with a semaphore, nothing else."""
    import aiohttp

    gate = asyncio.Semaphore(concurrency)
    tokens = 0
    errors: list[str] = []
    async with aiohttp.ClientSession() as session:

        async def one(i: int) -> None:
            nonlocal tokens
            body = {
                "model": model,
                "messages": [
                    {"role": "user", "content": f"Compute {i} * 17 + 3. Put the answer in \\boxed{{}}."}
                ],
                "max_tokens": max_tokens,
                "temperature": 1.0,
                "top_p": 0.7,
                **defaults,  # the explicit fields the harness sends this server (top_k, min_p, ...)
                "seed": i,
            }
            async with gate, session.post(f"{url}/chat/completions", json=body) as response:
                if response.status != 200:
                    errors.append(f"HTTP {response.status}: {(await response.text())[:200]}")
                    return
                data = await response.json()
                tokens += int((data.get("usage") or {}).get("completion_tokens") or 0)

        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(requests)))
    wall = time.monotonic() - started
    return {
        "requests": requests,
        "failed": len(errors),
        "first_error": errors[0] if errors else None,
        "wall_s": round(wall, 2),
        "completion_tokens": tokens,
        "tok_per_s": round(tokens / wall, 1),
    }


def kept_server(work: Path) -> dict[str, Any] | None:
    state = work / "cache" / "serve-keep.json"
    if not state.exists():
        return None
    entries = json.loads(state.read_text())
    return entries[0] if entries else None


def preset_check(args: argparse.Namespace, work: Path, report: dict[str, Any]) -> None:
    """--preset: the protocol's one run on --model, and our figure beside the published one."""
    run = pytest_run(["--model-path", args.model], "preset", args, work, args.preset)
    report["runs"][f"preset-{args.preset}"] = run
    published = published_for(args.preset, args.model)
    if published is None:
        listed = ", ".join(p.model for p in BY_NAME[args.preset].published) or "none"
        line = f"ours {run['average_at_n']}: {args.preset} publishes none for {args.model} (it has: {listed})"
    else:
        line = published_line(run, published)
    report["published"] = line
    print(line)


def main() -> int:
    args = parse_args()
    from pytest_agenteval.models.serve.launcher import group_empty
    from pytest_agenteval.models.serve.session import stop_kept

    report: dict[str, Any] = {"model": args.model, "adapter": args.adapter, "preset": args.preset, "runs": {}}
    env_note = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE")}
    report["environment"] = env_note
    with tempfile.TemporaryDirectory(prefix="agenteval-gpu-") as folder:
        work = Path(folder)
        models = {"base": ["--model-path", args.model]}
        if args.adapter:
            models["adapter"] = ["--model-path", args.adapter, "--base-model", args.model]
        try:
            if args.preset:
                preset_check(args, work, report)
                models = {}  # the protocol's run only
            for tag, model in models.items():
                text = pytest_run(model, "text-only", args, work, tag)
                report["runs"][f"{tag}-text-only"] = text
                kept = kept_server(work)
                if kept and text["generations"]:
                    url = f"http://127.0.0.1:{kept['port']}/v1"
                    defaults = dict((text["served"] or {}).get("sampling_defaults") or {})
                    floor = asyncio.run(
                        bare_client(
                            url,
                            text["model_name"] or kept["served_name"],
                            text["generations"],
                            args.max_tokens or QUICK["max_tokens"],
                            args.concurrency,
                            defaults,
                        )
                    )
                    harness = text["duration_s"] or text["wall_s"]
                    floor["harness_over_bare"] = round(harness / floor["wall_s"], 2)
                    # the bare prompts are shorter than AIME's: compare tokens/s too
                    floor["harness_tok_per_s_over_bare"] = (
                        round(text["tok_per_s"] / floor["tok_per_s"], 2) if floor["tok_per_s"] else None
                    )
                    report["runs"][f"{tag}-bare-client"] = floor
                report["runs"][f"{tag}-retool"] = pytest_run(model, "retool", args, work, tag)
        finally:
            kept = kept_server(work)
            report["stop_problems"] = stop_kept(work / "cache")
            report["group_empty_after_stop"] = group_empty(int(kept["pid"])) if kept else None
    Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0 if all(r.get("exit_code", 0) in (0, 1) for r in report["runs"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
