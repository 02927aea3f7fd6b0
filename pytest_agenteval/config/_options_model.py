"""The model options: what is evaluated and how it is reached (in process, launched servers
with --serve, OpenAI-compatible endpoints); part of the one table, `table.py`."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, group, topic


class CountOrAuto:
    """The type of --concurrency: a count >= 1, or `auto`."""

    __name__ = "int or auto"  # what the options reference shows as its type
    annotation = int | str  # the Settings attribute: an int, or "auto"

    def __call__(self, raw: str) -> int | str:
        value = raw.strip().lower()
        if value == "auto":
            return value
        try:
            count = int(value)
        except ValueError:
            count = 0
        if count < 1:
            raise ValueError(
                "a number >= 1 or auto (e.g. --concurrency 32, or --concurrency auto to find each "
                "endpoint's limit)"
            )
        return count


OPTIONS: tuple[Option, ...] = group(
    "model",
    *topic(
        "Model",
        Option(
            "model_paths",
            "--model-path",
            (),
            "model to evaluate: a *.gguf file, a checkpoint folder, a LoRA adapter folder, a hub id, "
            "trio://... or tinker://... (PyTRIO/Tinker sampler weights, with --base-model), "
            "replay:RESULTS.jsonl, or omitted for the embedded SmolLM2-135M-Instruct (repeatable, "
            "globs and LABEL=PATH allowed: more than one model is a sweep, docs/sweeps.md)",
            multiple=True,
        ),
        Option(
            "base_model",
            "--base-model",
            None,
            "base checkpoint folder or hub id of a --model-path LoRA adapter (default: the adapter's "
            "base_model_name_or_path; a different one is an error), or base .gguf of a GGUF LoRA "
            "(required there); the base model of trio:// and "
            "tinker:// paths (required there)",
        ),
        Option(
            "chat_template",
            "--chat-template",
            None,
            "Jinja chat template FILE for a checkpoint that has none (required then)",
        ),
        Option(
            "strict",
            "--strict-adapter",
            False,
            "make the adapter-is-live probe's warning (adapter == base) an error (pytest owns --strict)",
            bool,
        ),
        Option(
            "llama_threads",
            "--llama-threads",
            1,
            "threads a model computes on: a GGUF in process or behind a --serve llama.cpp server "
            "(generation and prompts alike), torch's for the transformers backend "
            "(1 holds up best when xdist workers share the cores)",
            int,
        ),
        Option("n_ctx", "--n-ctx", 8192, "context window for in-process GGUF models", int),
        Option(
            "sdk_telemetry",
            "--sdk-telemetry",
            False,
            "trio:// and tinker://: let the SDK send its telemetry (off unless given)",
            bool,
            local=True,
        ),
    ),
    *topic(
        "Launched servers (--serve)",
        Option(
            "serve",
            "--serve",
            False,
            "launch one inference server for --model-path on the controller, shared by every xdist "
            "worker (a .gguf: python -m llama_cpp.server; a checkpoint: vLLM or SGLang)",
            bool,
        ),
        Option(
            "serve_backend",
            "--serve-backend",
            "auto",
            "server --serve launches: auto (llama-cpp for .gguf; vLLM, else SGLang, where a GPU is "
            "present; else the in-process transformers backend), or one by name",
            choices=("auto", "llama-cpp", "vllm", "sglang"),
        ),
        Option(
            "serve_timeout",
            "--serve-timeout",
            1200.0,
            "seconds a launched server may take to be ready",
            float,
            local=True,
        ),
        Option(
            "serve_keep",
            "--serve-keep",
            False,
            "leave the launched server up (key-less, loopback) and reuse it in the next run when the "
            "model and arguments match",
            bool,
            local=True,
        ),
        Option(
            "serve_gpus",
            "--serve-gpus",
            None,
            "GPU ids for launched servers, e.g. 0-7: one independent replica per --serve-tp devices",
            local=True,
        ),
        Option("serve_tp", "--serve-tp", 1, "tensor-parallel size of each launched replica", int),
        Option(
            "serve_max_servers",
            "--serve-max-servers",
            0,
            "a sweep's launched servers up at once (0: as many as --serve-gpus allows, on a CPU one per "
            "server); the next starts when one's models are done",
            int,
            local=True,
        ),
        Option(
            "serve_args",
            "--serve-arg",
            (),
            "extra argument for the launched server, verbatim (repeatable; write --serve-arg=--flag=value)",
            multiple=True,
        ),
    ),
    *topic(
        "Endpoints (OpenAI-compatible servers)",
        Option(
            "endpoints",
            "--endpoint",
            (),
            "OpenAI-compatible base URL, e.g. "
            "http://localhost:8000/v1 (repeatable: requests are balanced across them)",
            multiple=True,
            local=True,
        ),
        Option(
            "model_name",
            "--model-name",
            None,
            "model name sent to --endpoint servers (default: the first one the server lists)",
        ),
        Option(
            "api_key_env",
            "--api-key-env",
            "OPENAI_API_KEY",
            "environment variable holding the endpoint's API key (never recorded)",
            local=True,
        ),
        Option(
            "concurrency",
            "--concurrency",
            32,
            "requests in flight per endpoint for the whole run, or auto (start at 4, grow while "
            "requests succeed, halve on a 429 or an overload reply, up to --concurrency-max), shared "
            "by all xdist workers (a localhost endpoint: per machine, shared by the workers there)",
            CountOrAuto(),
            local=True,
        ),
        Option(
            "concurrency_max",
            "--concurrency-max",
            64,
            "the most requests in flight per endpoint --concurrency auto may reach, shared by the "
            "xdist workers as --concurrency is",
            int,
            local=True,
        ),
        Option(
            "samples_per_request",
            "--samples-per-request",
            1,
            "ask endpoints for this many samples per request (`n`); 1 keeps every sample's own seed",
            int,
            applies_to=("aime25:text-only",),
        ),
        Option("request_timeout", "--request-timeout", 600.0, "seconds per HTTP attempt", float, local=True),
        Option(
            "idle_timeout",
            "--idle-timeout",
            60.0,
            "seconds without a byte of a streamed reply before it counts as a stall and is retried "
            "(non-streamed requests get a deadline from max_tokens and the endpoint's throughput)",
            float,
            local=True,
        ),
        Option(
            "no_stream",
            "--no-stream",
            False,
            "do not stream replies (SSE); stalls are then caught by the max_tokens deadline",
            bool,
            local=True,
        ),
        Option(
            "max_attempts", "--max-attempts", 8, "HTTP attempts per sample, retries included", int, local=True
        ),
        Option(
            "retry_max_seconds",
            "--retry-max-seconds",
            600.0,
            "stop retrying a sample after this many seconds",
            float,
            local=True,
        ),
        Option(
            "continuation",
            "--continuation",
            "messages",
            "retool turns on --endpoint servers: messages (the server re-renders the chat) or tokens "
            "(token-in/token-out: vLLM /tokenize and /v1/completions with token ids); in-process "
            "models always continue from their tokens",
            choices=("messages", "tokens"),
            applies_to=("aime25:retool",),
        ),
        Option(
            "tokenizer",
            "--tokenizer",
            None,
            "tokenizer.json (or its folder, with the chat template in tokenizer_config.json) that "
            "counts tokens for --endpoint servers without a /tokenize route",
        ),
    ),
)
