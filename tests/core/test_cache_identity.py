"""The cache knows which weights answered: what an `--endpoint` server reports about its
model (/v1/models) and `--model-revision` are part of the key, a start-up line says when
nothing names the weights, each generation records the reply's own `model` and
`system_fingerprint`, and the summary's first line counts the cache hits."""

from __future__ import annotations

import pytest

from pytest_agenteval.models.identity import identifies_weights, model_entry, reported_fingerprint
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results

STEP_100 = {"root": "/ckpt/step-100", "max_model_len": 4096}
STEP_200 = {"root": "/ckpt/step-200", "max_model_len": 4096}


def warning(url: str) -> str:
    return (
        "WARNING: the generation cache cannot tell which weights answer: /v1/models says nothing "
        "about the weights behind 'mock-model', so its key holds the endpoint URL: the cache is "
        f"shared only by runs against {url}, and other weights served there under the same name "
        "would get these cached generations; pass --model-revision TEXT naming the weights (e.g. "
        "the checkpoint step), or --agenteval-no-cache"
    )


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_new_weights_behind_the_same_url_and_name_get_no_cached_generation(
    run_suite, pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    cache = f"--agenteval-cache-dir={pytester.path / 'cache'}"
    args = ("--val-n=2", cache, *workers)
    with OpenAITestServer(ServerConfig(answer="\\boxed{70} {seed}", model_card=STEP_100)) as server:
        run_suite(f"--endpoint={server.url}", *args, out="step100.jsonl")
        first = len(server.requests)
        server.set_model(**STEP_200)  # the same URL, the same name, other weights
        result, out = run_suite(f"--endpoint={server.url}", *args, out="step200.jsonl")
        second = len(server.requests) - first
        _, again = run_suite(f"--endpoint={server.url}", *args, out="step200-again.jsonl")
        third = len(server.requests) - first - second
    assert (first, second, third) == (8, 8, 0)
    (summary,) = read_results(out)[1]
    assert summary["requests"] == {"generations": 8, "attempts": 8, "retries": 0, "cached_generations": 0}
    assert summary["model"]["reported"] == [{"id": "mock-model", "owned_by": "pytest-agenteval", **STEP_200}]
    assert read_results(again)[1][0]["requests"]["cached_generations"] == 8
    assert "cannot tell which weights" not in result.stdout.str()  # root names the weights


def test_model_revision_is_part_of_the_key_and_of_the_results(run_suite, pytester: pytest.Pytester) -> None:
    cache = f"--agenteval-cache-dir={pytester.path / 'cache'}"
    with OpenAITestServer(ServerConfig(model_card={})) as server:  # reports only the name
        run_suite(f"--endpoint={server.url}", "--val-n=1", cache, "--model-revision=step-100", out="a.jsonl")
        run_suite(f"--endpoint={server.url}", "--val-n=1", cache, "--model-revision=step-200", out="b.jsonl")
        _, out = run_suite(f"--endpoint={server.url}", "--val-n=1", cache, "--model-revision=step-200")
        assert len(server.requests) == 8  # 4 for step-100, 4 for step-200, none for its rerun
    (summary,) = read_results(out)[1]
    assert (summary["model"]["revision"], summary["config"]["model_revision"]) == ("step-200", "step-200")
    assert summary["model"]["weights_identified"] is False


@pytest.mark.parametrize(
    ("card", "extra", "warned"),
    [
        ({}, (), True),  # only id and owned_by: nothing names the weights
        ({"max_model_len": 4096}, (), True),  # any checkpoint of the model has it
        ({}, ("--model-revision=step-100",), False),  # the user names them
        ({}, ("--agenteval-no-cache",), False),  # no cache, nothing to mix up
        (STEP_100, (), False),  # vLLM's root: the weights path
        # llama.cpp's server: meta is the same for every checkpoint of one run (it was no warning)
        ({"meta": {"n_params": 135000000, "size": 270000000}}, (), True),
        (None, (), False),  # the package's test server names its own replies: no warning
    ],
    ids=[
        "name-only",
        "max-model-len-only",
        "model-revision",
        "no-cache",
        "root",
        "llama-cpp-meta",
        "test-server-identity",
    ],
)
def test_a_start_up_line_when_nothing_names_the_weights(
    run_suite, pytester: pytest.Pytester, card: dict, extra: tuple[str, ...], warned: bool
) -> None:
    cache = f"--agenteval-cache-dir={pytester.path / 'cache'}"
    with OpenAITestServer(ServerConfig(model_card=card)) as server:
        result, _ = run_suite(f"--endpoint={server.url}", "--val-n=1", "--limit=1", cache, *extra)
    assert result.ret == 0
    assert (warning(server.url) in result.stdout.lines) is warned


@pytest.mark.parametrize(
    ("extra", "fingerprint"),
    [
        (("-n", "2"), "fp_1"),  # streamed (the default)
        (("--no-stream",), "fp_1"),
        (("--samples-per-request=2",), "fp_1"),  # one request with n=2: each sample records it
        ((), None),  # a server without system_fingerprint (vLLM): only the model
    ],
    ids=["streamed-xdist", "not-streamed", "n-per-request", "no-fingerprint"],
)
def test_each_generation_records_the_replys_model_and_system_fingerprint(
    run_suite, pytester: pytest.Pytester, extra: tuple[str, ...], fingerprint: str | None
) -> None:
    cache = f"--agenteval-cache-dir={pytester.path / 'cache'}"
    served = {"reply_model": "mock-model"} | ({"system_fingerprint": fingerprint} if fingerprint else {})
    with OpenAITestServer(ServerConfig(system_fingerprint=fingerprint)) as server:
        _, fresh = run_suite(f"--endpoint={server.url}", "--val-n=2", cache, *extra, out="fresh.jsonl")
        server.set_model(system_fingerprint="fp_2")  # a cache hit records what generated it then
        _, cached = run_suite(f"--endpoint={server.url}", "--val-n=2", cache, *extra, out="cached.jsonl")
        assert len(server.requests) == (4 if "--samples-per-request=2" in extra else 8)
    for path in (fresh, cached):
        problems, _ = read_results(path)
        recorded = [
            {k: g[k] for k in ("reply_model", "system_fingerprint") if k in g}
            for p in problems
            for g in p["generations"]
        ]
        assert recorded == [served] * 8


def test_the_summary_begins_with_the_cache_hits(run_suite, pytester: pytest.Pytester) -> None:
    cache = f"--agenteval-cache-dir={pytester.path / 'cache'}"
    with OpenAITestServer(ServerConfig()) as server:
        first, _ = run_suite(f"--endpoint={server.url}", "--val-n=2", "--limit=2", cache, out="a.jsonl")
        second, recorded = run_suite(f"--endpoint={server.url}", "--val-n=2", cache, out="b.jsonl")
        off, _ = run_suite(f"--endpoint={server.url}", "--val-n=2", "--agenteval-no-cache", out="c.jsonl")
    replayed, _ = run_suite(f"--model-path=replay:{recorded}", cache, out="d.jsonl")  # reads no cache
    starts = []
    for result in (first, second, off, replayed):
        lines = result.stdout.lines
        header = next(i for i, line in enumerate(lines) if "agenteval" in line and line.startswith("="))
        starts.append(lines[header + 1])
    assert starts == [
        "0 of 4 generations from the cache",
        "4 of 8 generations from the cache",
        "aime25",
        "aime25",
    ]


VLLM_ENTRY = {
    "id": "policy",
    "object": "model",
    "created": 1764669000,  # vLLM: the time of the request
    "owned_by": "vllm",
    "root": "/ckpt/step-100",
    "parent": None,
    "max_model_len": 32768,
    "permission": [{"id": "modelperm-5f0c", "created": 1764669000}],  # fresh on every request
}


def test_the_fingerprint_has_what_names_the_weights_and_nothing_that_changes_per_request() -> None:
    later = {**VLLM_ENTRY, "created": 1764669999, "permission": [{"id": "modelperm-77aa"}]}
    other = {**VLLM_ENTRY, "root": "/ckpt/step-200"}
    prints = [reported_fingerprint([model_entry([e], "policy")]) for e in (VLLM_ENTRY, later, other)]
    assert (prints[0] == prints[1], prints[0] == prints[2], len(prints[0])) == (True, False, 64)
    assert model_entry([VLLM_ENTRY], "other") is None and reported_fingerprint([None]) == ""


@pytest.mark.parametrize(
    ("reported", "identified"),
    [
        ([{"id": "policy", "owned_by": "vllm", "root": "/ckpt/a"}], True),
        ([{"id": "policy", "owned_by": "vllm", "root": "/ckpt/a", "parent": None}], True),
        ([{"id": "policy", "owned_by": "vllm", "max_model_len": 4096, "parent": None}], False),
        ([{"id": "policy", "owned_by": "vllm", "root": "/ckpt/a"}, None], False),  # a replica unlisted
        ([], False),
    ],
)
def test_what_identifies_the_weights(reported: list, identified: bool) -> None:
    assert identifies_weights(reported) is identified


def test_a_launched_adapters_key_changes_with_its_bases_weights(tmp_path) -> None:
    from pytest_agenteval.models.serve.resolve import resolve_model_path
    from tests.serving.test_resolve import make_adapter, make_checkpoint

    base = make_checkpoint(tmp_path / "base", weights=b"base-step-100")
    adapter = make_adapter(tmp_path / "lora", str(base))
    before = resolve_model_path(str(adapter))
    (base / "model.safetensors").write_bytes(b"base-step-200")  # retrained under the same path
    after = resolve_model_path(str(adapter))
    assert before.fingerprint == after.fingerprint  # the adapter's own files are the same
    assert before.weights_fingerprint != after.weights_fingerprint
    plain = resolve_model_path(str(base))
    assert plain.weights_fingerprint == plain.fingerprint  # a checkpoint: its own files


def test_the_server_process_takes_the_model_card_and_fingerprint_flags() -> None:
    from pytest_agenteval.testing.openai_server import build_parser, config_from_args

    args = ["--model=policy", '--model-card={"root": "/ckpt/step-100"}', "--system-fingerprint=fp_1"]
    config = config_from_args(build_parser().parse_args(args))
    assert (config.model, config.model_card, config.system_fingerprint) == (
        "policy",
        {"root": "/ckpt/step-100"},
        "fp_1",
    )


def test_the_url_leaves_the_key_only_where_model_revision_names_the_weights(
    run_suite, pytester: pytest.Pytester
) -> None:
    """Two servers with the same reply and the same reported `root` on two ports share the
    cache only with --model-revision: a `root` is the path a server was started with, and
    /ckpt/latest serves other weights from day to day (a reviewer's case: step-200 got
    step-100's generations). 127.0.0.1 and localhost likewise."""
    cache = f"--agenteval-cache-dir={pytester.path / 'cache'}"
    args = ("--val-n=2", "--limit=2", cache)  # the workers' key is the controller's (workerinput)
    with (
        OpenAITestServer(ServerConfig(answer="\\boxed{70} {seed}")) as one,
        OpenAITestServer(ServerConfig(answer="\\boxed{70} {seed}")) as two,
    ):
        run_suite(f"--endpoint={one.url}", *args, out="one.jsonl")
        run_suite(f"--endpoint={two.url}", *args, out="two.jsonl")
        assert (len(one.requests), len(two.requests)) == (4, 4)  # the same root, other addresses
        named = (*args, "--model-revision=step-100")
        run_suite(f"--endpoint={one.url}", *named, out="one-named.jsonl")
        run_suite(f"--endpoint={two.url}", *named, out="two-named.jsonl")
        localhost = one.url.replace("127.0.0.1", "localhost")
        run_suite(f"--endpoint={localhost}", *named, out="localhost.jsonl")
        assert (len(one.requests), len(two.requests)) == (8, 4)
