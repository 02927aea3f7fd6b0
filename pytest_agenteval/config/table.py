"""The one table of options, grouped by topic: each declared once, with its flag, default,
help and type. The ini key (the flag's own name), argparse, `Settings` and docs/options.md
are derived from it (see `option`, `options`, `settings`, `reference`)."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, topic

# Where a suite-specific option has an effect (`Option.applies_to`, by `suite_tag`).
AIME = ("aime25:retool", "aime25:text-only")
RETOOL = ("aime25:retool",)
AGENT = ("aime25:retool", "gaia")  # the tool loops: retool and the GAIA default agent

OPTIONS: tuple[Option, ...] = (
    *topic(
        "Model",
        Option(
            "model_path",
            "--model-path",
            None,
            "model to evaluate: a *.gguf file, a checkpoint folder, a LoRA adapter folder, a hub id, "
            "trio://... or tinker://... (PyTRIO/Tinker sampler weights, with --base-model), "
            "replay:RESULTS.jsonl, or omitted for the embedded SmolLM2-135M-Instruct",
        ),
        Option(
            "base_model",
            "--base-model",
            None,
            "base checkpoint folder or hub id of a --model-path LoRA adapter (default: the adapter's "
            "base_model_name_or_path; a different one is an error); the base model of trio:// and "
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
            "thinking",
            "--thinking",
            "off",
            "chat-template thinking: off sends chat_template_kwargs.enable_thinking=false, "
            "omit sends nothing",
            choices=("off", "on", "omit"),
        ),
        Option(
            "llama_threads",
            "--llama-threads",
            1,
            "threads per process for in-process GGUF models "
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
        ),
        Option(
            "serve_keep",
            "--serve-keep",
            False,
            "leave the launched server up (key-less, loopback) and reuse it in the next run when the "
            "model and arguments match",
            bool,
        ),
        Option(
            "serve_gpus",
            "--serve-gpus",
            None,
            "GPU ids for launched servers, e.g. 0-7: one independent replica per --serve-tp devices",
        ),
        Option("serve_tp", "--serve-tp", 1, "tensor-parallel size of each launched replica", int),
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
        ),
        Option(
            "concurrency",
            "--concurrency",
            32,
            "requests in flight per endpoint for the whole run, shared by all xdist workers "
            "(a localhost endpoint: per machine, shared by the workers there)",
            int,
        ),
        Option(
            "samples_per_request",
            "--samples-per-request",
            1,
            "ask endpoints for this many samples per request (`n`); 1 keeps every sample's own seed",
            int,
            applies_to=("aime25:text-only",),
        ),
        Option("request_timeout", "--request-timeout", 600.0, "seconds per HTTP attempt", float),
        Option(
            "idle_timeout",
            "--idle-timeout",
            60.0,
            "seconds without a byte of a streamed reply before it counts as a stall and is retried "
            "(non-streamed requests get a deadline from max_tokens and the endpoint's throughput)",
            float,
        ),
        Option(
            "no_stream",
            "--no-stream",
            False,
            "do not stream replies (SSE); stalls are then caught by the max_tokens deadline",
            bool,
        ),
        Option("max_attempts", "--max-attempts", 8, "HTTP attempts per sample, retries included", int),
        Option(
            "retry_max_seconds",
            "--retry-max-seconds",
            600.0,
            "stop retrying a sample after this many seconds",
            float,
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
    *topic(
        "Sampling",
        Option(
            "val_n",
            "--val-n",
            12,
            "generations per problem (N); BFCL and GAIA: 1 unless given",
            int,
            applies_to=(*AIME, "bfcl", "gaia"),
            instead="--datagen-solve",
        ),
        Option(
            "temperature",
            "--temperature",
            1.0,
            "sampling temperature; BFCL: 0.001, GAIA and datagen: 0.0 unless given",
            float,
        ),
        Option("top_p", "--top-p", 0.7, "nucleus sampling top-p", float),
        Option("top_k", "--top-k", -1, "top-k (<= 0: off, and not sent to endpoints)", int),
        Option(
            "max_tokens",
            "--max-tokens",
            8192,
            "max new tokens per completion; BFCL: 1024, datagen: 512 unless given",
            int,
            applies_to=("aime25:text-only", "bfcl", "datagen"),
            instead="--max-assistant-tokens",
        ),
        Option("seed", "--seed", 42, "run seed; sample j of problem p uses hash(seed, p, j)", int),
    ),
    *topic(
        "Problem selection",
        Option(
            "limit",
            "--limit",
            0,
            "run only the first K selected problems of each suite, in dataset order (0: all)",
            int,
        ),
        Option(
            "limit_per_category",
            "--limit-per-category",
            0,
            "run only the first K selected problems of each category (BFCL category, GAIA level)",
            int,
        ),
    ),
    *topic(
        "AIME 2025",
        Option(
            "mode",
            "--mode",
            "retool",
            "AIME inference mode: retool (the ReTool lab's default: Python between turns) or text-only",
            choices=("retool", "text-only"),
        ),
        Option(
            "scorer",
            "--scorer",
            "auto",
            "AIME scorer: boxed-integer (text-only rule), "
            "math-verify-tail (ReTool reward rule), auto (the mode's own)",
            choices=("auto", "boxed-integer", "math-verify-tail"),
        ),
        Option(
            "dataset_path",
            "--dataset-path",
            None,
            "AIME data: a JSONL or parquet file or a save_to_disk folder (default: the hub id)",
        ),
        Option("dataset_id", "--dataset-id", "yentinglin/aime_2025", "AIME hub dataset id"),
        Option("dataset_revision", "--dataset-revision", None, "hub revision (commit or tag)"),
        applies_to=AIME,
    ),
    *topic(
        "Agent budgets (AIME retool, the GAIA agent)",
        Option("max_code_calls", "--max-code-calls", 4, "code calls per trajectory", int, applies_to=RETOOL),
        Option("max_assistant_turns", "--max-assistant-turns", 6, "assistant turns", int, applies_to=RETOOL),
        Option(
            "max_trajectory_tokens", "--max-trajectory-tokens", 8192, "prompt + all turns, in tokens", int
        ),
        Option(
            "max_assistant_tokens",
            "--max-assistant-tokens",
            1024,
            "new tokens per assistant turn (the --max-tokens of a tool loop)",
            int,
            instead="--max-tokens",
        ),
        Option(
            "max_tool_response_tokens",
            "--max-tool-response-tokens",
            512,
            "tokens of tool output shown to the model (the tail is kept)",
            int,
        ),
        applies_to=AGENT,
    ),
    *topic(
        "Sandbox",
        Option("sandbox_timeout", "--sandbox-timeout", 30.0, "seconds per code call", float),
        Option(
            "sandbox_workers",
            "--sandbox-workers",
            0,
            "code calls running at once on each machine, shared by its xdist workers (0: min(8, CPU cores))",
            int,
        ),
        Option(
            "sandbox_level",
            "--sandbox-level",
            "auto",
            "containment: auto (strongest available), basic, landlock, bwrap",
            choices=("auto", "basic", "landlock", "bwrap"),
        ),
        applies_to=AGENT,
    ),
    *topic(
        "Results, gates and baselines",
        Option(
            "out",
            "--agenteval-out",
            None,
            "results JSONL (default: agenteval-results/<suite>-<model>-<time>-<pid>.jsonl)",
        ),
        Option(
            "gates",
            "--agenteval-gate",
            (),
            'threshold gate, e.g. "aime25.average_at_n >= '
            "0.30\" (repeatable; with a gate the exit status is the gate's)",
            multiple=True,
        ),
        Option(
            "compare",
            "--agenteval-compare",
            None,
            "baseline results JSONL: fail on a significant drop (paired bootstrap over shared problems)",
        ),
        Option(
            "compare_tolerance",
            "--agenteval-compare-tolerance",
            0.0,
            "drop in a headline metric tolerated before the baseline comparison fails",
            float,
        ),
        Option(
            "progress",
            "--agenteval-progress",
            "auto",
            "live progress line: auto (redrawn in place on a terminal, a line every 30 s otherwise), "
            "off, or SECONDS between lines (also off with -q -q)",
        ),
    ),
    *topic(
        "Cache",
        Option(
            "cache_dir",
            "--agenteval-cache-dir",
            None,
            "generation cache directory (default: <pytest cache dir>/agenteval); may be shared storage",
        ),
        Option("no_cache", "--agenteval-no-cache", False, "neither read nor write the cache", bool),
        Option(
            "model_revision",
            "--model-revision",
            None,
            "names the weights (e.g. the checkpoint step) in the cache key and the results, for "
            "--endpoint servers whose /v1/models reports nothing about them",
        ),
    ),
    *topic(
        "BFCL",
        Option(
            "bfcl_data_dir",
            "--bfcl-data-dir",
            None,
            "BFCL data folder (default: the installed bfcl-eval package)",
        ),
        Option(
            "bfcl_style", "--bfcl-style", "prompting", "BFCL inference style", choices=("prompting", "native")
        ),
        Option(
            "bfcl_weights",
            "--bfcl-weights",
            None,
            "category weights for weighted accuracy, e.g. simple_python=2,multiple=1",
        ),
        Option(
            "bfcl_export_dir",
            "--bfcl-export-dir",
            None,
            "also write the official BFCL_v4_<category>_result.json files under this folder",
        ),
        Option(
            "bfcl_export_model",
            "--bfcl-export-model",
            None,
            "model folder of the export, a model bfcl-eval lists with the same style "
            "(default: open-mistral-nemo-2407, or open-mistral-nemo-2407-FC for --bfcl-style native)",
        ),
        Option(
            "bfcl_progressive",
            "--bfcl-progressive",
            None,
            "run 5, then 50, then all items per category while accuracy stays >= this threshold",
            float,
        ),
        Option(
            "bfcl_search_backend",
            "--bfcl-search-backend",
            None,
            "BFCL web search: base URL of a SerpAPI-compatible search server (default: SerpAPI "
            "itself when SERPAPI_API_KEY is set; else web search items skip)",
        ),
        applies_to=("bfcl",),
    ),
    *topic(
        "GAIA",
        Option(
            "gaia_path",
            "--gaia-path",
            None,
            "local GAIA folder (default: the gated hub dataset, with HF_TOKEN)",
        ),
        Option("gaia_split", "--gaia-split", "validation", "GAIA split", choices=("validation", "test")),
        Option(
            "gaia_unordered_lists",
            "--gaia-unordered-lists",
            False,
            "compare list answers ignoring order (the design documents' variant; official is in order)",
            bool,
        ),
        Option("gaia_max_steps", "--gaia-max-steps", 8, "default agent: max model turns and tool calls", int),
        Option(
            "gaia_submission",
            "--gaia-submission",
            None,
            "test split: leaderboard submission "
            "JSONL path (default: agenteval-results/gaia-test-submission.jsonl)",
        ),
        Option(
            "tool_protocol",
            "--tool-protocol",
            "auto",
            "GAIA default agent tool calls: native "
            "tools/tool_calls, the raw-text <tool_call> protocol, or auto (native for endpoints)",
            choices=("auto", "native", "text"),
        ),
        applies_to=("gaia",),
    ),
    *topic(
        "Generated data (datagen)",
        Option(
            "datagen_path",
            "--datagen-path",
            None,
            "generated problems JSONL (problem, answer, solution, topic)",
        ),
        Option(
            "reference_path",
            "--reference-path",
            None,
            "datagen reference problems: JSONL, parquet or save_to_disk folder (default: hub math-ai/aime25)",
        ),
        Option(
            "judge_endpoints",
            "--judge-endpoint",
            (),
            "datagen judge: OpenAI-compatible base URL (repeatable: a panel; default: the run's own model)",
            multiple=True,
        ),
        Option(
            "judge_models",
            "--judge-model",
            (),
            "model name of each --judge-endpoint (repeatable)",
            multiple=True,
        ),
        Option(
            "datagen_opponents", "--datagen-opponents", 1, "reference opponents per generated problem", int
        ),
        Option("datagen_reasks", "--datagen-reasks", 2, "re-asks of a judge whose reply does not parse", int),
        Option(
            "datagen_solve",
            "--datagen-solve",
            0,
            "solve each generated problem this many times with the run's model (0: off)",
            int,
        ),
        Option(
            "datagen_verifications",
            "--datagen-verifications",
            None,
            "human verifications file (default: <data>_verifications.json beside --datagen-path)",
        ),
        applies_to=("datagen",),
    ),
)
