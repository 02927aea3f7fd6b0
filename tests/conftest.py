"""Shared fixtures: pytester, small AIME-format data we write ourselves, and helpers
to run the plugin on a tiny suite and read its results file."""

from __future__ import annotations

import compileall
import contextlib
import faulthandler
import gc
import importlib
import io
import json
import os
import py_compile
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp  # noqa: F401
import math_verify  # noqa: F401
import numpy  # noqa: F401
import numpy.fft  # noqa: F401
import numpy.linalg  # noqa: F401
import numpy.random  # noqa: F401
import pandas  # noqa: F401
import pytest

import pytest_agenteval
import pytest_agenteval.tasks.aime25.suite  # noqa: F401
import pytest_agenteval.tasks.bfcl.suite  # noqa: F401
import pytest_agenteval.tasks.datagen.suite  # noqa: F401
import pytest_agenteval.tasks.gaia.suite  # noqa: F401

with contextlib.suppress(ImportError):  # the embedded extra
    import llama_cpp  # noqa: F401
with contextlib.suppress(ImportError):  # the report extra: a sweep's comparison charts
    import matplotlib.figure  # noqa: F401
    import matplotlib.ticker  # noqa: F401

    import pytest_agenteval.report._charts  # noqa: F401
    import pytest_agenteval.report._html  # noqa: F401

pytest_plugins = ["pytester"]

# The runs here start about a thousand Python processes that import the package (the xdist
# workers of inner `-n 2` runs, subprocess runs, launched servers' guards). Where
# PYTHONDONTWRITEBYTECODE is set (CI images often set it) none of them writes the bytecode
# it compiled, so each compiled the package again: about 0.12 s of CPU a process. The
# controller compiles it once at the start (a few seconds the first time; a check of the
# files' times after that); the processes read it, PYTHONDONTWRITEBYTECODE or not.
# Timestamp-checked (with SOURCE_DATE_EPOCH set, py_compile's default is a hash-checked
# bytecode that compile_dir would write anew at each start); skipped where the package's
# folder is read-only (an installed package: pip compiled it).
PACKAGE = Path(pytest_agenteval.__file__).parent
if "PYTEST_XDIST_WORKER" not in os.environ and os.access(PACKAGE, os.W_OK):
    compileall.compile_dir(PACKAGE, quiet=1, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)

# Loaded before any test: the pytester fixture restores sys.modules when its test ends,
# dropping what the test imported in-process, and numpy's C extensions cannot be loaded
# twice ("cannot load module more than once per process"): a later test importing numpy,
# pandas or numpy.fft again (bfcl-eval's reader, transformers) errored, depending on the
# order xdist gave the tests. The suites, the scorer (math-verify and sympy), aiohttp,
# llama.cpp and the comparison report's charts (matplotlib) likewise: imported here once, an
# in-process run (run_suite) does not import them again (about 0.6 s of CPU a run; 1.5 s more
# for a sweep's run that draws its report).

# How this project's own tests share the xdist workers (README: `python -m pytest -n 2`).
# A run of folders (the whole suite, `tests/core`) sends a module's tests to one worker
# (xdist's loadscope; a run of named files keeps xdist's load): its module and session fixtures (a
# launched server, a model loaded, the runs several tests assert on) are built once, not once
# on each worker as `load` did when it split a module. The modules go out in FOLDER_ORDER,
# longest-running folders first and the folders of many short modules last (longest jobs
# first: at the end a worker waits at most for one short module of the other), not in
# loadscope's own order (most tests first, which left one-test modules of 20-30 s to the end).
# The order is the folders' test time in a full run (docs/performance.md); a folder not
# listed goes after the listed ones.
FOLDER_ORDER = (
    "docs",  # before transformers: one worker builds the shared checkpoint meanwhile
    "transformers",
    "trio",
    "serving",
    "suites",
    "trackers",  # the MLflow module starts a real `mlflow server`
    "sweep",
    "cluster",
    "product",
    "batch",
    "sandbox",
    "sharding",
    "aime25",
    "bfcl",
    "testing",
    "core",
    "cost",
    "datagen",
    "gates",
    "sweep_gates",
    "reporting",
    "gaia",
    "golden",
)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: a run with -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "load":  # a --dist the command line chose stays
        return None
    if config.args and all(arg.split("::")[0].endswith(".py") for arg in config.args):
        return None  # named files: xdist's load, which splits a module between the workers
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # FOLDER_ORDER (pytest_collection_modifyitems) stays
    return LoadScopeScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent

    def rank(item: pytest.Item) -> int:
        try:
            folder = item.path.relative_to(tests).parts[0]
        except ValueError:
            return len(FOLDER_ORDER)
        return FOLDER_ORDER.index(folder) if folder in FOLDER_ORDER else len(FOLDER_ORDER)

    items.sort(key=rank)  # stable: the order within a folder stays


@pytest.fixture(scope="module", autouse=True)
def _freeze_the_heap() -> None:
    """At each module's start, what the earlier modules left (torch and transformers, a
    loaded model, BFCL's parsed entries: millions of objects in a worker) is collected once
    and moved out of the garbage collector's sight (`gc.freeze`). Every full collection
    after it (Python's own, and the one pytest makes at the end of each in-process run)
    scans only what this module made: in a late worker they took seconds each."""
    gc.collect()
    gc.freeze()


# Our own problems (not AIME's), with integer answers the replay texts can hit or miss.
TINY_PROBLEMS = [
    {"id": 0, "problem": "What is 30 + 40?", "answer": "70"},
    {"id": 1, "problem": "What is 12 * 49?", "answer": "588"},
    {"id": 2, "problem": "What is 2 to the power 4?", "answer": "16"},
    {"id": 3, "problem": "How many sides do 29 triangles have in total?", "answer": "87"},
]

SUITE_FILE = """
from pytest_agenteval.tasks.aime25 import Aime25

agenteval_suite = Aime25()


def test_aime25(evaluation):
    evaluation.check()
"""


def interruptible(command: Sequence[str], cwd: Path) -> subprocess.Popen[bytes]:
    """A quiet child process a test will send Ctrl-C, with SIGINT as a terminal has it: a
    process started in the background by a non-interactive shell (a CI runner, nohup)
    inherits SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    return subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@contextlib.contextmanager
def working_directory(folder: Path) -> Iterator[None]:
    """`contextlib.chdir`, which Python 3.10 (supported) lacks."""
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def as_a_process(
    folder: Path, env: Mapping[str, str] | None = None, *, hang_s: float = 300.0
) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """The working directory, environment (`env`: the whole of it; None: as it is) and
    streams a subprocess in `folder` would have, in this process: no interpreter to start
    and import, about 0.6 s of CPU a run. After it the environment and sys.path are restored
    and the modules imported from `folder` (its test modules and conftests) dropped, so the
    next run imports its folder afresh; the other modules it imported stay (numpy's and
    tree-sitter's C extensions cannot be loaded twice). `env`'s PYTHONPATH goes first on
    sys.path, as the interpreter would put it for the subprocess. A run still going after `hang_s`
    ends this process with every thread's traceback (faulthandler), as a subprocess's
    timeout would have ended the run: under xdist the test fails as its worker's crash, the
    suite goes on; it never hangs."""
    saved_env, saved_path, saved_modules = dict(os.environ), list(sys.path), set(sys.modules)
    out, err = io.StringIO(), io.StringIO()
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
        sys.path[:0] = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
        importlib.invalidate_caches()
    faulthandler.dump_traceback_later(hang_s, exit=True, file=sys.__stderr__)
    try:
        with working_directory(folder), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield out, err
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:] = saved_path
        inside = folder.resolve()
        for name in set(sys.modules) - saved_modules:
            file = getattr(sys.modules[name], "__file__", None)
            if file is not None and Path(file).resolve().is_relative_to(inside):
                del sys.modules[name]


def forget_the_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose controller is this process: when the test itself runs in an xdist worker,
    its PYTEST_XDIST_* variables would make the plugin take the controller for a worker."""
    for variable in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(variable, raising=False)


def run_in_a_process(
    folder: Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 600
) -> pytest.RunResult:
    """`python -m pytest ARGS` in a process of its own in `folder`, as
    `pytester.runpytest_subprocess` runs it, for a module- or session-scoped fixture (pytester
    is per test): no outer PYTEST_ADDOPTS, HOME a fresh folder, no colours, its basetemp in
    `folder`, no stdin."""
    environ = {k: v for k, v in (os.environ if env is None else env).items() if k != "PYTEST_ADDOPTS"}
    environ.update(HOME=str(folder), PY_COLORS="0")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", f"--basetemp={folder / 'basetemp'}", *args],
        cwd=folder,
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return pytest.RunResult(
        done.returncode, done.stdout.splitlines(), done.stderr.splitlines(), time.monotonic() - started
    )


def link_or_copy(source: Path | str, target: Path) -> Path:
    """`source`'s bytes under `target`: a hard link where the filesystem allows it (no copy of
    a 98 MB model per test; a test that changes the file unlinks it first), else a copy."""
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copyfile(source, target)
    return target


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def read_results(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return ([x for x in lines if x["type"] == "problem"], [x for x in lines if x["type"] == "summary"])


@pytest.fixture(autouse=True)
def _no_proxy_of_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sampler honours HTTP_PROXY/HTTPS_PROXY (aiohttp's trust_env): the host's own
    would carry the requests to the local test servers off to its proxy. Tests of the
    proxy set their own."""
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture(autouse=True)
def _own_generation_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each test its own generation cache ($AGENTEVAL_CACHE_DIR), never the user's cache
    folder (the default) nor another test's."""
    monkeypatch.setenv("AGENTEVAL_CACHE_DIR", str(tmp_path_factory.mktemp("agenteval-cache")))


@pytest.fixture
def tiny_aime(pytester: pytest.Pytester) -> Path:
    # `--dataset-path=...` form: a bare path argument would move pytest's rootdir
    return write_jsonl(pytester.path / "tiny_aime.jsonl", TINY_PROBLEMS)


@pytest.fixture
def aime_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester folder holding the AIME suite file."""
    pytester.makepyfile(test_tiny=SUITE_FILE)
    return pytester


@pytest.fixture
def run_suite(aime_suite: pytest.Pytester, tiny_aime: Path) -> Callable[..., tuple[pytest.RunResult, Path]]:
    """Run the tiny AIME suite; returns the result and the results path. In this process
    (`runpytest_inprocess`: no interpreter to start and import, about 0.6 s of CPU a run),
    or in a subprocess with `subprocess=True` where the test needs a process of its own
    (signals, a crash, environment read at import)."""

    def run(
        *args: str, data: Path | None = None, out: str = "results.jsonl", subprocess: bool = False
    ) -> tuple[pytest.RunResult, Path]:
        path = aime_suite.path / out
        # most tests exercise text-only (fast); retool tests say --mode=retool
        mode = () if any(a.split("=")[0] == "--mode" for a in args) else ("--mode=text-only",)
        runner = aime_suite.runpytest_subprocess if subprocess else aime_suite.runpytest_inprocess
        result = runner(
            "-p",
            "no:cacheprovider",
            f"--dataset-path={data or tiny_aime}",
            f"--agenteval-out={path}",
            *mode,
            *args,
        )
        return result, path

    return run


def replay_rows(texts: dict[int, Sequence[str]]) -> list[dict[str, Any]]:
    return [
        {"problem_id": pid, "sample_index": j, "text": text}
        for pid, samples in texts.items()
        for j, text in enumerate(samples)
    ]


@pytest.fixture(scope="session")
def small_bfcl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of each installed BFCL data file's first 5 entries (tests/bfcl/small_data.py),
    made once a session (each xdist worker its own), read and never changed by the tests that
    pass it as `--bfcl-data-dir`: their runs select items among those, and each process they
    start parses and collects the copy, not all 10,306 entries."""
    from tests.bfcl.small_data import small_bfcl_data

    return small_bfcl_data(tmp_path_factory.mktemp("bfcl-small") / "data")


@pytest.fixture(scope="session")
def llama_server() -> Any:
    """A real `python -m llama_cpp.server` with the embedded gguf, on a free port."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    from pytest_agenteval.models import embedded_model_path

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(embedded_model_path()),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_threads",
            "1",
            "--n_threads_batch",  # prompts on one thread too: the default (every core) spins
            "1",
            "--n_ctx",
            "2048",
            "--model_alias",
            "smollm2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2).read()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("python -m llama_cpp.server did not start")
            time.sleep(0.2)
    yield url
    process.terminate()
    process.wait(timeout=30)
