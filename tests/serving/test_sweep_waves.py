"""A sweep's later-wave model is the same model as in the first wave: the same sampler class,
cache key, token counter, `n` and token-in/token-out, and an identity with nothing temporary
in it; and the waves survive a crashed worker and earlier waves that take longer than
--serve-timeout. Each test here reproduced a defect of issue 34 against the code before it."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.sampler import SamplingParams
from pytest_agenteval.config.settings import Settings
from pytest_agenteval.models import describe_model, make_sampler
from pytest_agenteval.models.backends.llama import embedded_model_path
from pytest_agenteval.models.cache import CachingSampler, GenerationCache
from pytest_agenteval.models.choice import served_choice
from pytest_agenteval.models.serve.commands import llama_cpp_command
from pytest_agenteval.models.serve.handoff import write_served
from pytest_agenteval.models.serve.launcher import LaunchedServer
from pytest_agenteval.models.serve.resolve import resolve_model_path
from pytest_agenteval.models.serve.session import Launch
from pytest_agenteval.models.serve.sweep_launch import SweepServers
from pytest_agenteval.output.summary import model_hash
from pytest_agenteval.plugin.sweep_servers import SweepServePlugin
from pytest_agenteval.testing import DEFAULT_ANSWER, OpenAITestServer, ServerConfig

KEY = "sweep-key-not-for-logs"
PARAMS = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, seed=0, max_tokens=64)


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory):
    cache = tmp_path_factory.mktemp("hashes") / "model-hashes.json"
    return resolve_model_path(str(embedded_model_path()), hash_cache=cache)


def _servers(resolved, folder: Path, **options) -> SweepServers:
    folder.mkdir(parents=True, exist_ok=True)
    settings = Settings(serve=True, serve_max_servers=1, **options)
    return SweepServers(settings, {"step-200": resolved}, folder, folder, lambda line: None)


def _launched(servers: SweepServers, url: str) -> None:
    """The server of the sweep's model as it is once up (at `url`): what `_start` records."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    model = servers.models["step-200"]
    spec = llama_cpp_command(model, port, n_threads=1, n_ctx=512)
    running = LaunchedServer(spec, servers.folder / "server.log", None, 0, key=KEY)
    servers.launches[0] = Launch(model, [running], "step-200")


def _both(resolved, tmp_path: Path, url: str, **options):
    """(the first wave's choice, a later wave's choice) of the same model, same settings."""
    servers = _servers(resolved, tmp_path / "serve", **options)
    later = served_choice(servers.placeholder("step-200"))
    _launched(servers, url)
    return served_choice(servers.served("step-200")), later


@pytest.mark.parametrize(
    "options",
    [{"thinking": "on"}, {"thinking": "off", "continuation": "tokens"}],
    ids=["thinking on", "continuation tokens"],
)
def test_a_later_wave_sampler_is_the_first_waves_with_the_same_cache_key(
    resolved, tmp_path: Path, options
) -> None:
    settings = Settings(serve=True, serve_timeout=30.0, **options)
    with OpenAITestServer(ServerConfig(api_key=KEY)) as server:
        first, later = _both(resolved, tmp_path, server.url, **options)
        cache = GenerationCache(tmp_path / "cache")
        a = CachingSampler(make_sampler(first, settings, 2), cache)
        b = CachingSampler(make_sampler(later, settings, 2), cache)
        assert b._model_key == a._model_key  # extra_body (thinking, server defaults), reasoning
        assert type(b.inner) is type(a.inner)
        assert (
            (b.supports_n, b.token_io)
            == (a.supports_n, a.token_io)
            == (
                True,
                options.get("continuation") == "tokens",
            )
        )
        assert b.counter is not None and a.counter is not None  # the server's /tokenize, not 4 chars
        assert b.inner.extra_body["chat_template_kwargs"] == {"enable_thinking": options["thinking"] == "on"}


def test_a_later_models_identity_holds_nothing_temporary(resolved, tmp_path: Path) -> None:
    settings = Settings(serve=True)
    one = _servers(resolved, tmp_path / "one")
    two = _servers(resolved, tmp_path / "two")
    hashes = {
        model_hash(describe_model(served_choice(s.placeholder("step-200")), settings)) for s in (one, two)
    }
    assert len(hashes) == 1
    described = describe_model(served_choice(one.placeholder("step-200")), settings)
    assert str(tmp_path) not in repr(described)
    assert described["served"]["sampling_defaults"] == {"min_p": 0.0, "repeat_penalty": 1.0, "top_k": 0}
    with OpenAITestServer(ServerConfig(api_key=KEY)) as server:
        _launched(one, server.url)
        launched = describe_model(served_choice(one.served("step-200")), settings)
    assert hashes == {model_hash(launched)}  # the first wave's model: the same identity


def test_waiting_for_earlier_waves_is_not_bounded_by_serve_timeout(resolved, tmp_path: Path) -> None:
    settings = Settings(serve=True, serve_timeout=0.2)
    with OpenAITestServer(ServerConfig(api_key=KEY)) as server:
        servers = _servers(resolved, tmp_path / "serve")
        later = served_choice(servers.placeholder("step-200"))
        sampler = make_sampler(later, settings, 2)
        _launched(servers, server.url)
        up = threading.Timer(
            0.6, lambda: write_served(servers.folder, "step-200", servers.served("step-200"))
        )
        up.start()  # the earlier waves took 3 times --serve-timeout

        async def ask() -> str:
            try:
                return (await sampler.complete([{"role": "user", "content": "hi"}], PARAMS)).text
            finally:
                await sampler.aclose()

        assert asyncio.run(ask()) == DEFAULT_ANSWER
        up.join()
        (request,) = server.requests
        assert request["outcome"] == "ok"  # with the key of the served file


class _Finished:
    def __init__(self) -> None:
        self.models = {"base": None, "step-200": None}
        self.labels: list[str] = []

    def finished(self, label: str) -> None:
        self.labels.append(label)


def test_a_crashed_workers_item_counts_as_finished_for_its_wave() -> None:
    # xdist's report of an item whose worker died: when="???", no teardown ever follows
    servers = _Finished()
    plugin = SweepServePlugin(servers)
    crashed = pytest.TestReport(
        "test_aime25.py::test_aime25[step-200:3]", ("test_aime25.py", 0, ""), {}, "failed", None, "???"
    )
    plugin.pytest_runtest_logreport(crashed)
    done = pytest.TestReport(
        "test_aime25.py::test_aime25[base:1]", ("test_aime25.py", 0, ""), {}, "passed", None, "teardown"
    )
    plugin.pytest_runtest_logreport(done)
    plugin.pytest_runtest_logreport(done)  # reported twice (a rerun's): counted once
    assert servers.labels == ["step-200", "base"]


def test_the_terminal_says_which_wave_runs_and_what_each_later_model_waits_for(
    resolved, tmp_path: Path
) -> None:
    other = dataclasses.replace(resolved, path=tmp_path / "other.gguf", fingerprint="e" * 64)  # planned only
    said: list[str] = []
    models = {"base": resolved, "other": other}
    servers = SweepServers(Settings(serve=True, serve_max_servers=1), models, tmp_path, tmp_path, said.append)
    servers.launches[0] = None  # type: ignore[assignment]  # base's server is up (what announce reads)
    servers.announce()
    assert said == [
        "agenteval: sweep wave 1/2 running: base (1 server at a time)",
        "agenteval: other waits for wave 1/2 (base) to finish: "
        "its server starts in wave 2/2, when a slot is free",
    ]


def test_a_later_waves_items_wait_while_a_running_waves_are_left(pytester: pytest.Pytester) -> None:
    """Two workers, 6 items of `base` (wave 1) then 6 of `other` (wave 2): the workers get
    wave 1's items, and steal them from each other; wave 2's go out only when wave 1 has
    nothing left to give or to steal (stock work stealing handed b all of wave 2 at once,
    and b blocked while a worked)."""

    up = {"base"}
    collection = [f"t.py::test[{label}:{i}]" for label in ("base", "other") for i in range(6)]
    (
        sched,
        (
            a,
            b,
        ),
    ) = _waves(pytester, collection, lambda nodeid: nodeid.split("[")[1].split(":")[0] not in up, "a", "b")
    assert (a.sent, b.sent) == ([0, 1, 2], [3, 4, 5])  # wave 1 only
    assert sched.held == list(range(6, 12)) and not sched.tests_finished
    for index in (3, 4):  # b runs low: it steals a wave 1 item from a
        sched.mark_test_complete(b, index)
    assert a.steals == [[2]]
    sched.remove_pending_tests_from_node(a, [2])
    assert b.sent == [3, 4, 5, 2] and sched.held == list(range(6, 12))
    sched.mark_test_complete(b, 5)  # nothing of wave 1 left to steal: b takes wave 2's
    assert b.sent[4:] == list(range(6, 12)) and sched.held == [] and a.sent == [0, 1, 2]
    up.add("other")  # its server is up: stealing as usual
    sched.mark_test_complete(a, 0)
    assert b.steals == [[9, 10, 11]] and not sched.tests_finished


def test_a_worker_on_its_last_item_of_a_wave_gets_the_held_ones_not_a_shutdown(
    pytester: pytest.Pytester,
) -> None:
    """Wave 1 has one item a worker, wave 2 four: each worker gets its wave 1 item and then
    wave 2's (it runs its last item only once it has a next one or is shut down; a shut
    down worker would leave wave 2 with no worker at all)."""

    collection = [f"t.py::test[{label}:{i}]" for label, n in (("other", 2), ("base", 4)) for i in range(n)]
    (
        sched,
        (
            a,
            b,
        ),
    ) = _waves(pytester, collection, lambda nodeid: "[base:" in nodeid, "a", "b")
    assert (a.sent, b.sent) == ([0, 2, 3], [1, 4, 5])
    assert not a.shutting_down and not b.shutting_down and sched.held == []


def test_a_later_wave_whose_run_ended_errors_instead_of_waiting_forever(tmp_path: Path) -> None:
    from pytest_agenteval.api.sampler import SamplerError
    from pytest_agenteval.models.serve.handoff import LaterServer, served_file

    wait = LaterServer(served_file(tmp_path / "gone", "step-200"), "step-200")
    with pytest.raises(SamplerError, match="the server of model step-200 never started: the run ended"):
        asyncio.run(wait())


def test_a_worker_waiting_on_a_later_wave_is_sent_no_running_waves_item(pytester: pytest.Pytester) -> None:
    """A crashed worker's wave 1 items go back to pending while b waits on wave 2: they go to
    the replacement, never behind b's waiting item (b would hold them until wave 1 ends)."""
    from tests.core.test_stealing_scheduler import FakeNode, collect

    collection = [f"t.py::test[{label}:{i}]" for label, n in (("base", 4), ("other", 2)) for i in range(n)]
    (
        sched,
        (
            a,
            b,
        ),
    ) = _waves(pytester, collection, lambda nodeid: "[other:" in nodeid, "a", "b")
    sched.node2pending[a], sched.node2pending[b] = [0, 1, 2], [4]  # b waits on wave 2's item 4
    sched.pending[:], sched.held = [3], [5]
    sched.check_schedule()
    assert sched.node2pending[b] == [4] and sched.pending == [3]  # kept for a worker free to run it
    sched.remove_node(a)  # a crashed on 0: 1 and 2 go back to pending, b still waits
    c = FakeNode("c")
    sched.add_node(c)  # type: ignore[arg-type]
    collect(sched, c, collection)
    assert sched.node2pending[b] == [4] and sorted(c.sent) == [1, 2, 3]


def test_a_crashed_workers_items_go_to_its_replacement_not_behind_a_waiting_worker(
    pytester: pytest.Pytester,
) -> None:
    """As above, with one item of wave 1 back from the crash: it went to every idle worker
    with the held ones, b included (b's queue [4, 1]: 1 waited behind 4, which waits for
    wave 1 to end, a deadlock with no time limit)."""
    from tests.core.test_stealing_scheduler import FakeNode, collect

    collection = [f"t.py::test[{label}:{i}]" for label, n in (("base", 4), ("other", 2)) for i in range(n)]
    (
        sched,
        (
            a,
            b,
        ),
    ) = _waves(pytester, collection, lambda nodeid: "[other:" in nodeid, "a", "b")
    sched.node2pending[a], sched.node2pending[b] = [0, 1], [4]  # b waits on wave 2's item 4
    sched.pending[:], sched.held = [3], [5]
    sched.check_schedule()
    sched.remove_node(a)  # a crashed on 0: 1 goes back to pending
    c = FakeNode("c")
    sched.add_node(c)  # type: ignore[arg-type]
    collect(sched, c, collection)
    assert sched.node2pending[b] == [4]
    assert sorted(c.sent) == [1, 3] and not c.shutting_down and not b.shutting_down


def test_idle_workers_take_the_held_items_while_another_waits_on_them(pytester: pytest.Pytester) -> None:
    """a waits on wave 2 (its items 9..11), b and c finish wave 1's 4 and 7: they take the
    held 12..17 rather than being shut down (a's queue counted as work left to steal, and
    xdist, which never sees a waiting worker, shut b and c down: wave 2 ran on a alone)."""

    collection = [f"t.py::test[{label}:{i}]" for label in ("base", "other") for i in range(9)]
    (
        sched,
        (
            a,
            b,
            c,
        ),
    ) = _waves(pytester, collection, lambda nodeid: "[other:" in nodeid, "a", "b", "c")
    sched.node2pending[a], sched.node2pending[b], sched.node2pending[c] = [9, 10, 11], [4, 5], [7, 8]
    sched.pending[:], sched.held = [], list(range(12, 18))
    sched.mark_test_complete(b, 4)
    sched.mark_test_complete(c, 7)
    assert not b.shutting_down and not c.shutting_down and sched.held == []
    assert b.steals == [[15, 16, 17]]  # c, idle, steals half of what b took
    sched.remove_pending_tests_from_node(b, [15, 16, 17])
    assert sched.node2pending[b] == [5, 12, 13, 14] and sched.node2pending[c] == [8, 15, 16, 17]
    assert sched.node2pending[a] == [9, 10, 11] and not a.shutting_down


class _TimedSuite:
    """A suite whose generation is timed from its own start, as the retool loop times it."""

    name = "timed"

    def samples(self, settings: Settings) -> int:
        return 1

    def sampling(self, settings: Settings) -> dict:
        return {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_tokens": 64}

    async def rollout(self, ctx):
        from pytest_agenteval.api.records import Rollout

        started = time.monotonic()
        messages = [{"role": "user", "content": "hi"}]
        await ctx.sampler.counter.count_prompt(messages, None)  # the server's /tokenize, first
        completion = await ctx.sampler.complete(messages, ctx.params())
        return Rollout(text=completion.text, stop_reason="answer", latency_s=time.monotonic() - started)


class _CompletionTimedSuite(_TimedSuite):
    """A suite whose generation's latency is its completion's, as a single turn (AIME
    text-only, BFCL) takes it: the sampler starts that clock after the wait."""

    async def rollout(self, ctx):
        from pytest_agenteval.api.records import Rollout

        completion = await ctx.sampler.complete([{"role": "user", "content": "hi"}], ctx.params())
        return Rollout(text=completion.text, stop_reason="answer", latency_s=completion.latency_s)


@pytest.mark.parametrize("suite", [_TimedSuite, _CompletionTimedSuite], ids=["own-clock", "completion-clock"])
def test_the_wait_for_a_later_waves_server_is_not_the_generations_latency(
    resolved, tmp_path: Path, suite: type
) -> None:
    """A later wave's first generation waited 0.5 s for its server: its latency (and so its
    device time, latency x devices) is the request's, not the wait (it was 7.25 s for a
    0.01 s turn with a server that took 6 s to start), and not 0 either: a completion-timed
    rollout never held the wait, and taking it out anyway zeroed its latency (a reviewer's
    find)."""
    from pytest_agenteval.api.records import Problem
    from pytest_agenteval.run.runtime import Runtime

    settings = Settings(serve=True)
    with OpenAITestServer(ServerConfig(api_key=KEY, latency_ms=60)) as server:
        servers = _servers(resolved, tmp_path / "serve")
        later = served_choice(servers.placeholder("step-200"))
        _launched(servers, server.url)
        runtime = Runtime(settings, later, 2, models={"step-200": later})
        problem = Problem("timed", 1, 0, "hi", None, model="step-200")
        served = servers.served("step-200")
        up = threading.Timer(0.5, lambda: write_served(servers.folder, "step-200", served))
        up.start()

        async def generate():
            try:  # two samples at once: the second waits behind the first's token count
                return await asyncio.gather(*(runtime._rollout(suite(), problem, i) for i in (0, 1)))
            finally:
                await runtime.sampler_for("step-200").aclose()

        started = time.monotonic()
        rollouts = asyncio.run(generate())
        took = time.monotonic() - started
        up.join()
    assert [r.text for r in rollouts] == [DEFAULT_ANSWER] * 2 and took >= 0.5
    assert all(0.05 <= r.latency_s < 0.35 for r in rollouts), [r.latency_s for r in rollouts]
    assert all("server_wait_s" not in r.extra for r in rollouts)


@pytest.mark.parametrize(
    ("failed", "up", "expected"),
    [
        ([0], [1], ["agenteval: sweep wave 2/2 running: other (1 server at a time)"]),
        (
            [0, 1],
            [],
            ["agenteval: no server of the sweep is running: every one failed to start (see above)"],
        ),
    ],
    ids=["the first failed, the next took its slot", "every one failed"],
)
def test_the_terminal_says_what_runs_when_servers_failed_at_start_up(
    resolved, tmp_path: Path, failed: list[int], up: list[int], expected: list[str]
) -> None:
    """With AGENTEVAL_STANDIN_FATAL=oom-hang both servers said "did not start", then the
    terminal said "sweep wave 1/2 running: base" (announced from the plan, not the state)."""
    other = dataclasses.replace(resolved, path=tmp_path / "other.gguf", fingerprint="e" * 64)
    said: list[str] = []
    models = {"base": resolved, "other": other}
    servers = SweepServers(Settings(serve=True, serve_max_servers=1), models, tmp_path, tmp_path, said.append)
    for server in failed:
        servers.errors[server] = "the server of it did not start: CUDA out of memory"
    for server in up:
        servers.launches[server] = None  # type: ignore[assignment]
    servers.announce()
    assert said == expected


def _waves(
    pytester: pytest.Pytester, collection: list[str], later: Any, *names: str
) -> tuple[Any, list[Any]]:
    """A WaveStealing scheduler with one FakeNode a name, each having collected `collection`;
    `later(nodeid)`: whether that item waits for a later wave's server."""
    from pytest_agenteval.plugin.sweep_waves import WaveStealing
    from tests.core.test_stealing_scheduler import FakeNode, collect

    config = pytester.parseconfig("--tx", f"{len(names)}*popen")
    sched = WaveStealing(config, None, later)
    nodes = [FakeNode(name) for name in names]
    for node in nodes:
        sched.add_node(node)  # type: ignore[arg-type]
    for node in nodes:
        collect(sched, node, collection)
    return sched, nodes
