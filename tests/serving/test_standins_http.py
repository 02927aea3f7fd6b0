"""The stand-ins' OpenAI surface, in this process over real sockets (`StandinServer`: the
`StandinCore` their processes run): vLLM's routes and model card, LoRA modules, the API key,
token-id prompts, reasoning fields, the --generation-config rules and the request log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.models.http.probe import request_json
from pytest_agenteval.testing import ServerConfig, think_reply
from pytest_agenteval.testing.standins.launch import vllm_defaults
from pytest_agenteval.testing.standins.server import LOG_ENV, Served, StandinServer, token_logprob

KEY = "k-standin"
HI = [{"role": "user", "content": "hi"}]


def vllm_served(**extra: Any) -> Served:
    values: dict[str, Any] = dict(
        backend="vllm",
        names=("base",),
        root="/ckpt/base",
        weights="/ckpt/base",
        max_model_len=4096,
        loras={"step-800": "/ckpt/step-800"},
        lora_parent={"step-800": "base"},
        defaults={"temperature": 0.6, "top_p": 0.95},
        version="0.34.0+agenteval.standin",
    )
    return Served(**{**values, **extra})


class Recorder:
    """A scripted responder that keeps the bodies it answered (defaults applied)."""

    def __init__(self, reply: Any = "The answer is 7.") -> None:
        self.bodies: list[dict[str, Any]] = []
        self.reply = reply

    def __call__(self, body: dict[str, Any]) -> Any:
        self.bodies.append(body)
        return self.reply


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandinServer, Recorder, Path]]:
    log = tmp_path_factory.mktemp("log") / "requests.jsonl"
    recorder = Recorder()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(LOG_ENV, str(log))
        config = ServerConfig(model="base", api_key=KEY, tokenize="vllm", script=recorder)
        config.reasoning_parser, config.reasoning_field = "qwen3", "reasoning"
        server = StandinServer(config, vllm_served()).start()
    try:
        yield server, recorder, log
    finally:
        server.close()


def post(server: StandinServer, path: str, body: dict[str, Any], key: str | None = KEY) -> tuple[int, Any]:
    """POST to a route under /v1, or at the root (`/tokenize`, `/detokenize`) as vLLM has them."""
    root = server.base_url if path in ("/tokenize", "/detokenize") else server.url
    return request_json(f"{root}{path}", api_key=key, body=body)


def test_vllm_lists_the_base_and_its_lora_module(vllm_server) -> None:
    server, _, _ = vllm_server
    status, listed = request_json(f"{server.url}/models", api_key=KEY)
    assert status == 200
    assert [(m["id"], m["root"], m["parent"], m["max_model_len"]) for m in listed["data"]] == [
        ("base", "/ckpt/base", None, 4096),
        ("step-800", "/ckpt/step-800", "base", None),
    ]
    assert request_json(f"{server.url}/models", api_key="wrong")[0] == 401
    assert request_json(f"{server.base_url}/health")[0] == 200
    assert request_json(f"{server.base_url}/version")[1] == {"version": "0.34.0+agenteval.standin"}


def test_chat_and_completions_with_n_and_an_unknown_model(vllm_server) -> None:
    server, _, _ = vllm_server
    status, reply = post(server, "/chat/completions", {"model": "step-800", "messages": HI, "n": 3})
    assert (status, reply["model"], len(reply["choices"])) == (200, "step-800", 3)
    status, reply = post(server, "/completions", {"model": "base", "prompt": "2+5=", "n": 2, "max_tokens": 4})
    assert (status, len(reply["choices"])) == (200, 2)
    status, reply = post(server, "/chat/completions", {"model": "step-900", "messages": HI})
    assert status == 404
    assert reply["error"]["message"] == "The model `step-900` does not exist."


def test_token_ids_in_and_out_and_the_tokenizer_routes(vllm_server) -> None:
    server, _, _ = vllm_server
    status, counted = post(
        server, "/tokenize", {"model": "base", "messages": HI, "add_generation_prompt": True}
    )
    assert status == 200 and counted["count"] == len(counted["tokens"]) > 0
    status, text = post(server, "/detokenize", {"model": "base", "tokens": counted["tokens"]})
    assert text["prompt"] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    body = {"model": "base", "prompt": counted["tokens"], "max_tokens": 64, "return_token_ids": True}
    status, reply = post(server, "/completions", body)
    (choice,) = reply["choices"]
    assert choice["prompt_token_ids"] == counted["tokens"]
    assert choice["token_ids"] == [ord(c) for c in "The answer is 7.<|im_end|>"]


def test_the_generation_config_defaults_apply_only_where_a_request_is_silent(vllm_server) -> None:
    server, recorder, _ = vllm_server
    recorder.bodies.clear()
    post(server, "/chat/completions", {"model": "base", "messages": HI})
    post(server, "/chat/completions", {"model": "base", "messages": HI, "temperature": 1.0})
    assert [(b["temperature"], b["top_p"]) for b in recorder.bodies] == [(0.6, 0.95), (1.0, 0.95)]


# vllm/config/model.py get_diff_sampling_param, for each --generation-config
GENERATION = {"temperature": 0.6, "top_k": 20, "max_new_tokens": 512, "do_sample": True}
OTHER = {"top_p": 0.8}


@pytest.mark.parametrize(
    ("source", "override", "expected"),
    [
        (None, None, {"temperature": 0.6, "top_k": 20, "max_tokens": 512}),  # auto: the model's file
        ("auto", '{"top_k": 5}', {"temperature": 0.6, "top_k": 5, "max_tokens": 512}),
        ("vllm", None, {}),  # vLLM's neutral defaults: what the launcher asks for
        ("vllm", '{"temperature": 0.3}', {"temperature": 0.3}),
        ("OTHER", None, {"top_p": 0.8}),  # a folder: its generation_config.json
    ],
)
def test_generation_config_rules(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source: str | None,
    override: str | None,
    expected: dict,
) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "generation_config.json").write_text(json.dumps(GENERATION))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "generation_config.json").write_text(json.dumps(OTHER))
    given = str(tmp_path / "other") if source == "OTHER" else source
    assert vllm_defaults(tmp_path / "model", given, override) == expected
    warned = "Default vLLM sampling parameters have been overridden by" in capsys.readouterr().out
    assert warned == (source != "vllm")


def test_reasoning_goes_to_vllm_0_34_s_field(vllm_server) -> None:
    server, recorder, _ = vllm_server
    recorder.reply = think_reply("7 is prime.", "7")
    try:
        reply = post(server, "/chat/completions", {"model": "base", "messages": HI})[1]
    finally:
        recorder.reply = "The answer is 7."
    message = reply["choices"][0]["message"]
    assert (message["reasoning"], message["content"]) == ("7 is prime.", "7")
    assert "reasoning_content" not in message  # vLLM 0.34 renamed it (chat_completion/protocol.py)


def test_greedy_logprobs_come_from_the_weights_asked_for(vllm_server) -> None:
    server, _, _ = vllm_server
    body = {"prompt": "The capital of France is", "max_tokens": 2, "temperature": 0.0, "logprobs": 1}
    base = post(server, "/completions", {**body, "model": "base"})[1]["choices"][0]["logprobs"]
    lora = post(server, "/completions", {**body, "model": "step-800"})[1]["choices"][0]["logprobs"]
    assert base["tokens"] == lora["tokens"] == list("The answ")
    assert base["token_logprobs"][0] == token_logprob("/ckpt/base", 0, ord("T"))
    assert lora["token_logprobs"][0] == token_logprob("/ckpt/step-800", 0, ord("T"))
    assert base["token_logprobs"] != lora["token_logprobs"]


def test_the_log_holds_each_completion_request_and_nothing_else(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    completion = {"model": "base", "prompt": [104, 105], "max_tokens": 2}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(LOG_ENV, str(log))
        server = StandinServer(ServerConfig(model="base", tokenize="vllm"), vllm_served())
    with server:
        request_json(f"{server.url}/models")
        request_json(f"{server.base_url}/health")
        post(server, "/tokenize", {"model": "base", "prompt": "hi"})
        chat = {"model": "step-800", "messages": HI, "seed": 3}
        post(server, "/chat/completions", chat)
        post(server, "/completions", completion)
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        {"model": "step-800", "path": "/v1/chat/completions", "body": chat},
        {
            "model": "base",
            "path": "/v1/completions",
            "body": {"model": "base", "prompt": [104, 105], "max_tokens": 2},
        },
    ]


@pytest.fixture(scope="module")
def sglang_server() -> Iterator[StandinServer]:
    served = vllm_served(backend="sglang", root="base", defaults={}, version="0.5.23+agenteval.standin")
    config = ServerConfig(
        model="base", tokenize="vllm", reasoning_parser="qwen3", answer=think_reply("hm", "7").text
    )
    with StandinServer(config, served) as server:
        yield server


def test_sglang_takes_any_name_for_the_base_and_base_colon_adapter_for_a_lora(sglang_server) -> None:
    body = {"prompt": "The capital of France is", "max_tokens": 2, "logprobs": 1}

    def logprobs(model: str) -> list[float]:
        status, reply = post(sglang_server, "/completions", {**body, "model": model}, key=None)
        assert status == 200, reply
        return reply["choices"][0]["logprobs"]["token_logprobs"]

    assert logprobs("anything") == logprobs("step-800") == logprobs("base")
    assert logprobs("base:step-800") != logprobs("base")
    status, reply = post(sglang_server, "/completions", {**body, "model": "base:step-900"}, key=None)
    assert status == 400
    message = post(sglang_server, "/chat/completions", {"model": "base", "messages": HI}, key=None)[1]
    assert message["choices"][0]["message"]["reasoning_content"] == "hm"  # SGLang's field


def test_llama_cpp_on_a_gguf_answers() -> None:
    """AGENTEVAL_STANDIN_GGUF: llama.cpp on the embedded SmolLM2 (slower: it loads the model)."""
    pytest.importorskip("llama_cpp")
    from pytest_agenteval.models.backends.llama import embedded_model_path
    from pytest_agenteval.testing.standins.responders import LlamaResponder

    config = ServerConfig(model="base", script=LlamaResponder(embedded_model_path(), n_ctx=256))
    with StandinServer(config, vllm_served(defaults={})) as server:
        body = {"model": "base", "prompt": "The capital of France is", "max_tokens": 2, "temperature": 0.0}
        status, reply = request_json(f"{server.url}/completions", body=body, timeout_s=120)
    assert status == 200 and reply["choices"][0]["text"].strip()


def test_tokenize_and_usage_count_what_the_server_counts(vllm_server) -> None:
    """vLLM's `/tokenize` reports the `max_model_len` of `/v1/models`, and a reply's
    `usage.prompt_tokens` is what `/tokenize` counts for the same prompt (they were 1,048,576
    and a 4-characters-a-token estimate)."""
    server, _, _ = vllm_server
    status, counted = post(
        server, "/tokenize", {"model": "base", "messages": HI, "add_generation_prompt": True}
    )
    assert status == 200 and counted["max_model_len"] == 4096
    status, reply = post(server, "/chat/completions", {"model": "base", "messages": HI, "max_tokens": 8})
    assert status == 200 and reply["usage"]["prompt_tokens"] == counted["count"]
    usage = reply["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    status, text = post(server, "/tokenize", {"model": "base", "prompt": "The capital of France is"})
    status, reply = post(server, "/completions", {"model": "base", "prompt": "The capital of France is"})
    assert reply["usage"]["prompt_tokens"] == text["count"] == len("The capital of France is")
