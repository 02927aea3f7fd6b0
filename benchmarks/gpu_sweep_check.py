"""The rehearsal's sweep (issue 34) against vLLM: on a GPU with the real vLLM, or on a CPU
with the stand-ins. One command, one JSON; between the two only what `vllm` is on PATH
changes (the launcher's code, the options and the checks are the same).

    # a GPU machine with vLLM: three local checkpoints (a base, a LoRA on it, another one)
    python benchmarks/gpu_sweep_check.py --base ./ckpt/step-0 --lora ./ckpt/lora-step-200 \
        --other ./ckpt/step-800 [--backend vllm] [--time-limit-s 420] [--run-limit-s 200] \
        [--out gpu_sweep_check.json]
    # the same sweep on a CPU, before renting the GPU
    python benchmarks/gpu_sweep_check.py --standins

Three runs of `pytest suites/aime25 --serve --serve-max-servers 1 -n 2 --mode retool` on two
problems at N=2 (the base and its LoRA share wave 1's server, the other checkpoint waits for
wave 2), sharing one cache:

1. `--thinking on`, in model order;
2. `--thinking off`: no generation comes from the cache (the chat template's switch is part
   of the cache key);
3. run 1 in reverse order: every generation comes from the cache (`cached_generations`).
   It still launches both servers (a `--serve` run does, and the adapter-is-live probe
   runs), for 0 generation requests: the check is that the same cache keys hold in either
   wave. It is last, so that when time runs out the two runs that generate have run.

With `--full`, two more on caches of their own: `--continuation tokens` (turn 2 from token
ids on /v1/completions, in wave 2 as in wave 1) and text-only `--samples-per-request 4` at
N=4 (one request of n=4 a problem in every wave).

Each run's models must finish without an error item, record the launched server's
`sampling_defaults` and hold no temporary path in their identity. With the stand-ins (their
request log) also: each model's request bodies in run 1 are the same but for the model name,
wave 2's as wave 1's. The JSON says which checks held and how long each run took. Exit
status 0 when every check held.

Time. Each run launches two servers one after the other (wave 1, then wave 2), cold: no
server outlives its run. Each run has its own limit, `--run-limit-s` (default 200 s; it is
also the run's `--serve-timeout`), and all runs together `--time-limit-s` (default 420 s, 7
minutes: a second try fits in a 15-minute GPU lease); a run that would start with less than
60 s of the total left is not started, and its checks are reported as failed ("not run").
vLLM starts with `--enforce-eager` (SGLang with `--disable-cuda-graph`; `--no-eager` drops
it): no CUDA graph capture or torch.compile, which do not change what is checked here and
cost a minute or more of each cold start. Expected on one H100 with a checkpoint of about
1B parameters (estimated from vLLM's cold start, weights load plus engine start-up at about
30-60 s eager; not measured here, as no GPU was available): about 2 minutes a run, 5-7
minutes for the three, 9-12 with `--full`, which needs `--time-limit-s 720` and so leaves no
room for a second try. The stand-ins take about 15 s a run."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pytest_agenteval.models.serve.probe import PROBE_PROMPT  # noqa: E402

LABELS = ("base", "lora", "other")
PROBLEMS = [{"id": i, "problem": f"What is {i} + 69?", "answer": str(69 + i)} for i in (1, 2)]
# what the stand-ins answer: a tool call, then the answer from the tool's output
ANSWERS = """
from pytest_agenteval.testing import Reply, ScriptedToolModel

CALL = {"name": "code_interpreter", "arguments": {"code": "print(30 + 40)"}}
SCRIPT = ScriptedToolModel(
    [
        Reply(text="Let me compute.", tool_calls=[CALL]),
        lambda observation, body: "The tool printed " + (observation or "").strip() + ", so \\\\boxed{70}.",
    ],
    protocol="text",
)
"""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a full checkpoint folder (on a GPU)")
    parser.add_argument("--lora", help="a LoRA adapter folder on --base")
    parser.add_argument("--other", help="another full checkpoint folder")
    parser.add_argument("--standins", action="store_true", help="rehearse on this CPU with the stand-ins")
    parser.add_argument("--backend", choices=("vllm", "sglang"), default="vllm")
    parser.add_argument(
        "--time-limit-s", type=float, default=420.0, help="for all runs together (room for a second try)"
    )
    parser.add_argument("--run-limit-s", type=float, default=200.0, help="each run's own limit")
    parser.add_argument(
        "--no-eager", dest="eager", action="store_false",
        help="keep CUDA graphs (vLLM --enforce-eager / SGLang --disable-cuda-graph are on by default)",
    )  # fmt: skip
    parser.add_argument("--max-tokens", type=int, default=1024, help="per turn (a real model's)")
    parser.add_argument("--full", action="store_true", help="also --continuation tokens and n=4 runs")
    parser.add_argument("--out", type=Path, default=Path("gpu_sweep_check.json"))
    parser.add_argument("--work", type=Path, default=None, help="keep the runs' files here")
    args = parser.parse_args(argv)
    if not args.standins and not (args.base and args.lora and args.other):
        parser.error("give --base, --lora and --other (checkpoint folders), or --standins (a CPU rehearsal)")
    return args


def checkpoint(folder: Path, weights: bytes) -> Path:
    """What the resolver asks of a checkpoint (the stand-in never reads the weights)."""
    folder.mkdir(parents=True)
    config = {"model_type": "qwen3", "max_position_embeddings": 4096}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "chat_template.jinja").write_text("{{ messages }}", encoding="utf-8")
    return folder


def rehearsal_models(work: Path) -> dict[str, Path]:
    base = checkpoint(work / "ckpts" / "base", b"base weights")
    other = checkpoint(work / "ckpts" / "other", b"other weights")
    lora = work / "ckpts" / "lora"
    lora.mkdir()
    adapter = {"base_model_name_or_path": str(base), "r": 8, "peft_type": "LORA"}
    (lora / "adapter_config.json").write_text(json.dumps(adapter), encoding="utf-8")
    (lora / "adapter_model.safetensors").write_bytes(b"lora weights")
    return {"base": base, "lora": lora, "other": other}


def environment(args: argparse.Namespace, work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    if args.standins:
        from pytest_agenteval.testing.standins import install

        env = install(work / "standins", gpus=2).env(env)
        (work / "rehearsal_answers.py").write_text(ANSWERS, encoding="utf-8")
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(work)])
        env["AGENTEVAL_STANDIN_SCRIPT"] = "rehearsal_answers:SCRIPT"
    return env


def sweep(
    name: str, models: dict[str, Path], order: Sequence[str], extra: Sequence[str], args: argparse.Namespace,
    work: Path, env: dict[str, str], deadline: float, cache: str = "cache",
) -> dict[str, Any]:  # fmt: skip
    """One pytest run of the sweep; its results, timing and (with the stand-ins) requests."""
    log = work / f"{name}.requests.jsonl"
    limit = run_limit(args.run_limit_s, deadline - time.monotonic())
    if limit is None:
        empty: dict[str, Any] = dict.fromkeys(order)
        return {"code": None, "seconds": 0.0, "summaries": empty, "requests": [],
                "tail": f"not run: less than {MIN_RUN_S:.0f} s of --time-limit-s was left"}  # fmt: skip
    eager = {"vllm": "--enforce-eager", "sglang": "--disable-cuda-graph"}[args.backend]
    command = [
        sys.executable, "-m", "pytest", "suites/aime25", "-p", "no:cacheprovider",
        "--dataset-path=problems.jsonl", "--sandbox-timeout=30",
        f"--max-tokens={args.max_tokens}", "--max-trajectory-tokens=4096",
        "--serve", f"--serve-backend={args.backend}", "--serve-max-servers=1", f"--serve-timeout={limit:.0f}",
        *([f"--serve-arg={eager}"] if args.eager else []),
        "-n", "2", f"--agenteval-out={name}/aime25.jsonl", f"--agenteval-cache-dir={cache}",
        *(f"--model-path={label}={models[label]}" for label in order), *extra,
    ]  # fmt: skip
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, cwd=work, env={**env, "AGENTEVAL_STANDIN_LOG": str(log)},
            capture_output=True, text=True, timeout=limit, check=False,
        )  # fmt: skip
        code, output = done.returncode, done.stdout[-3000:] + done.stderr[-1000:]
    except subprocess.TimeoutExpired as exc:
        code, output = None, f"timed out after {limit:.0f} s (--run-limit-s): {said(exc)}"
    seconds = time.monotonic() - started
    summaries = {}
    for label in order:
        path = work / name / f"aime25-{label}.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        summaries[label] = next((x for x in lines if x.get("type") == "summary"), None)
    requests = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    # the adapter-is-live probe's completions at each LoRA's server start are not the sweep's
    requests = [
        r for r in requests if not (isinstance(r["body"], dict) and r["body"].get("prompt") == PROBE_PROMPT)
    ]
    return {"code": code, "seconds": round(seconds, 1), "summaries": summaries, "requests": requests,
            "tail": output}  # fmt: skip


MIN_RUN_S = 60.0  # a run given less would time out before its second server is up


def run_limit(per_run: float, left: float) -> float | None:
    """A run's time limit: its own, or what is left of the total; None: too little is left."""
    if left < MIN_RUN_S:
        return None
    return min(per_run, left)


def said(exc: subprocess.TimeoutExpired) -> str:
    """What a timed-out run printed until then (the last 3,000 characters). TimeoutExpired
    holds bytes even under `text=True`."""
    parts = [
        p.decode("utf-8", "replace") if isinstance(p, bytes) else p or "" for p in (exc.stdout, exc.stderr)
    ]
    return "".join(parts)[-3000:]


def model_checks(run: dict[str, Any]) -> dict[str, bool]:
    checks = {"finished": run["code"] in (0, 1)}  # 1: an unsolved problem fails its item
    for label, summary in run["summaries"].items():
        if summary is None:
            checks[f"{label}: results"] = False
            continue
        served = summary["model"].get("served") or {}
        checks[f"{label}: no error item"] = not (summary.get("errors") or {}).get("items")
        checks[f"{label}: sampling_defaults"] = bool(served.get("sampling_defaults"))
        checks[f"{label}: no temporary path"] = ".agenteval-serve-" not in json.dumps(summary["model"])
    return checks


def cached(run: dict[str, Any], label: str) -> int | None:
    summary = run["summaries"].get(label)
    return None if summary is None else int(summary.get("requests", {}).get("cached_generations", -1))


def bodies(run: dict[str, Any], label: str) -> list[str]:
    """A model's request bodies less the model name (sorted canonical JSON)."""
    summary = run["summaries"].get(label) or {}
    name = summary.get("model", {}).get("name")
    rows = [r["body"] for r in run["requests"] if r["model"] == name]
    rows = [{k: v for k, v in body.items() if k != "model"} for body in rows]
    return sorted(json.dumps(b, sort_keys=True) for b in rows)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-sweep-check-"))
    work.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "suites" / "aime25", work / "suites" / "aime25", dirs_exist_ok=True)
    (work / "problems.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS), "utf-8")
    if args.standins:
        models = rehearsal_models(work)
    else:
        models = {label: Path(getattr(args, label)).resolve() for label in LABELS}
    env = environment(args, work)
    deadline = time.monotonic() + args.time_limit_s
    retool = ["--mode=retool", "--val-n=2"]
    plan = [
        ("thinking-on", LABELS, [*retool, "--thinking=on"], "cache"),
        ("thinking-off", LABELS, [*retool, "--thinking=off"], "cache"),
        ("reverse", LABELS[::-1], [*retool, "--thinking=on"], "cache"),
    ]
    if args.full:
        plan.append(("tokens", LABELS, [*retool, "--continuation=tokens"], "cache-tokens"))
        plan.append(("n", LABELS, ["--mode=text-only", "--val-n=4", "--samples-per-request=4"], "cache-n"))
    runs = {
        name: sweep(name, models, order, extra, args, work, env, deadline, cache)
        for name, order, extra, cache in plan
    }
    checks: dict[str, bool] = {}
    for name, run in runs.items():
        checks.update({f"{name}: {k}": v for k, v in model_checks(run).items()})
    for label in LABELS:
        first = (runs["thinking-on"]["summaries"].get(label) or {}).get("requests", {})
        total = int(first.get("generations", 0) or 0) or 4  # 2 problems x N=2
        checks[f"reverse: {label} all cached"] = cached(runs["reverse"], label) == total
        checks[f"thinking-off: {label} none cached"] = cached(runs["thinking-off"], label) == 0
    if args.standins:  # the request log: a later wave sends what the first wave sends
        on = runs["thinking-on"]
        checks["thinking-on: wave 2's bodies are wave 1's"] = bodies(on, "other") == bodies(on, "base") != []
        checks["reverse: 0 completion requests"] = runs["reverse"]["requests"] == []
        if args.full:
            for label in LABELS:  # in wave 2 as in wave 1
                paths = [json.loads(b) for b in bodies(runs["tokens"], label)]
                checks[f"tokens: {label} continues from token ids"] = any(
                    isinstance(b.get("prompt"), list) for b in paths
                )
                sizes = [json.loads(b).get("n") for b in bodies(runs["n"], label)]
                checks[f"n: {label} one request of n=4 a problem"] = sizes == [4, 4]
    report = {
        "backend": args.backend,
        "standins": args.standins,
        "work": str(work),
        "seconds": {name: run["seconds"] for name, run in runs.items()},
        "checks": checks,
        "failed": [name for name, ok in checks.items() if not ok],
        "not_run": [name for name, run in runs.items() if run["tail"].startswith("not run")],
        "tails": {name: run["tail"] for name, run in runs.items() if run["code"] not in (0, 1)},
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("backend", "standins", "seconds", "not_run", "failed")}))
    return 0 if not report["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
