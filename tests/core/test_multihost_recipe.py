"""docs/distributed.md's multi-host recipe, typed as the docs write it (option values after
a space, the suite folder relative), runs: the command is read from the docs, so this test
breaks when they change. Only what cannot exist here is swapped: each `ssh=HOST` worker
becomes a `popen//chdir=DIR` worker (another folder, as an ssh worker has), `/shared` a
temporary folder, the vLLM endpoint the package's test server.

pytest-xdist maps every argument that names an existing file into the worker's rsync copy
and cannot tell a test path from an option's value: before plugin/remote_args.py the
recipe ended in `INTERNALERROR ... ValueError: arg suites/aime25 not relative to an rsync
root` (and, with absolute paths, naming `agenteval-results`, then the dataset file)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from pytest_agenteval.config.options import OPTIONS
from pytest_agenteval.plugin import remote_args
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import TINY_PROBLEMS, forget_the_xdist_worker, read_results, write_jsonl

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "distributed.md"
SUITE = ROOT / "suites" / "aime25" / "test_aime25.py"
SSH_WORKER = re.compile(r"(\d+)\*ssh=([\w.-]+)//python=(\S+)")


def recipe() -> list[str]:
    """The `python -m pytest ...` command of the docs' "Several machines" recipe, as tokens."""
    section = DOCS.read_text(encoding="utf-8").split("## Several machines", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "docs/distributed.md's Several machines section lost its recipe"
    lines = block[1].replace("\\\n", " ").splitlines()
    (command,) = [line for line in lines if line.startswith("python -m pytest ")]
    return shlex.split(command)[3:]


def as_here(args: list[str], hosts: Path, shared: Path, endpoint: str, absolute: Path | None) -> list[str]:
    """The recipe's arguments with its hosts, /shared and endpoint swapped for local ones;
    `absolute`: the suite folder written as an absolute path under that folder."""
    out = []
    for previous, arg in zip(["", *args], args, strict=False):
        if previous == "--tx":
            count, host, _python = SSH_WORKER.fullmatch(arg).groups()  # type: ignore[union-attr]
            (hosts / host).mkdir(parents=True, exist_ok=True)
            arg = f"{min(int(count), 1)}*popen//chdir={hosts / host}//python={sys.executable}"
        elif previous == "--endpoint":
            arg = endpoint
        elif arg.startswith("/shared/"):
            arg = str(shared / arg.removeprefix("/shared/"))
        elif absolute is not None and arg == "suites/aime25":
            arg = str(absolute / arg)
        out.append(arg)
    return out


def test_the_recipe_passes_option_values_after_a_space() -> None:
    args = recipe()
    assert args[0] == "suites/aime25"
    assert [args[i + 1] for i, a in enumerate(args) if a == "--tx"] == [
        "4*ssh=gpu1//python=/opt/venv/bin/python",
        "4*ssh=gpu2//python=/opt/venv/bin/python",
    ]
    for option in ("--rsyncdir", "--rsyncignore", "--endpoint", "--dataset-path", "--agenteval-cache-dir"):
        assert option in args and not any(a.startswith(option + "=") for a in args), option


@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
def test_the_docs_recipe_runs_as_written(
    pytester: pytest.Pytester,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    absolute: bool,
) -> None:
    # the controller in this process (its workers are processes of their own, in their own
    # folders): not taken for an xdist worker when this test runs in one
    forget_the_xdist_worker(monkeypatch)
    suite = pytester.mkdir("suites") / "aime25"
    suite.mkdir()
    (suite / SUITE.name).write_text(SUITE.read_text(encoding="utf-8"), encoding="utf-8")
    shared = tmp_path_factory.mktemp("shared")
    write_jsonl(shared / "aime25.jsonl", TINY_PROBLEMS)
    hosts = tmp_path_factory.mktemp("hosts")
    with OpenAITestServer(ServerConfig(answer="\\boxed{70} {seed}")) as server:
        args = as_here(recipe(), hosts, shared, server.url, pytester.path if absolute else None)
        first = pytester.runpytest_inprocess(*args)
        sent = len(server.requests)
        again = pytester.runpytest_inprocess(*args)  # agenteval-results/ exists now
        resent = len(server.requests) - sent
    assert "INTERNALERROR" not in first.stdout.str() + first.stderr.str()
    first.assert_outcomes(passed=1, failed=3)
    again.assert_outcomes(passed=1, failed=3)
    assert (sent, resent) == (4 * 12, 0)  # the shared cache: the rerun regenerates nothing
    runs = sorted((pytester.path / "agenteval-results").glob("*.jsonl"))
    assert len(runs) == 2
    for run in runs:
        problems, (summary,) = read_results(run)
        assert [len(p["generations"]) for p in problems] == [12] * 4 and summary["complete"] is True
    # each "host" ran in its own folder on its rsync copy of the suite (and of pytest, which
    # xdist adds), read /shared's data and cache, and wrote no results or cache of its own
    copies = sorted(  # what the workers' Python compiled there (without PYTHONDONTWRITEBYTECODE) aside
        str(p.relative_to(hosts))
        for p in hosts.glob("*/aime25/**/*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert copies == ["gpu1/aime25/test_aime25.py", "gpu2/aime25/test_aime25.py"]
    assert [p for p in hosts.rglob("*") if p.suffix == ".jsonl" or "agenteval" in p.name] == []
    assert len(list((shared / "agenteval-cache").rglob("*"))) > 0


@pytest.fixture
def arities(pytester: pytest.Pytester) -> dict[str, remote_args.Arity]:
    return remote_args.option_arities(pytester.parseconfig())


def test_the_parser_says_which_options_take_a_value(arities: dict[str, remote_args.Arity]) -> None:
    """The one pytest internal this relies on: every option string and its nargs."""
    assert {o: arities[o] for o in ("-x", "-v", "-k", "-p", "-n", "--rsyncdir", "--tx", "-d")} == {
        "-x": 0,
        "-v": 0,
        "-k": None,
        "-p": None,
        "-n": None,
        "--rsyncdir": None,
        "--tx": None,
        "-d": 0,
    }
    assert {arities[o.flag] for o in OPTIONS if o.type is not bool} <= {None}


# (typed, sent to the worker): values join their option, test paths become absolute
CASES = [
    (["suites/aime25"], ["{root}/suites/aime25"]),
    (["suites/aime25/test_aime25.py::test_aime25"], ["{root}/suites/aime25/test_aime25.py::test_aime25"]),
    (["--rsyncdir", "suites/aime25"], ["--rsyncdir=suites/aime25"]),
    (["--rsyncignore", "agenteval-results"], ["--rsyncignore=agenteval-results"]),
    (["--dataset-path", "{root}/data.jsonl"], ["--dataset-path={root}/data.jsonl"]),
    (["--dataset-path=data.jsonl"], ["--dataset-path=data.jsonl"]),
    (["--dataset-path", "missing.jsonl"], ["--dataset-path=missing.jsonl"]),  # made later
    (["missing.py", "-k", ""], ["missing.py", "-k", ""]),
    (["--tx", "popen//chdir=/tmp/x", "-k", "data.jsonl"], ["--tx=popen//chdir=/tmp/x", "-kdata.jsonl"]),
    (["-vk", "data.jsonl", "-x"], ["-vkdata.jsonl", "-x"]),
    (["-kdata.jsonl", "suites"], ["-kdata.jsonl", "{root}/suites"]),
    (["-x", "suites/aime25"], ["-x", "{root}/suites/aime25"]),
    (["-d", "--", "suites/aime25"], ["-d", "--", "{root}/suites/aime25"]),
    (["-p", "no:cacheprovider", "--val-n", "2"], ["-pno:cacheprovider", "--val-n=2"]),
    (["--tx", "2*ssh=-p 2222 gpu1//python=/opt/py"], ["--tx=2*ssh=-p 2222 gpu1//python=/opt/py"]),
    (["--unknown-flag", "suites"], ["--unknown-flag", "{root}/suites"]),
    (["--debug", "data.jsonl", "suites"], ["--debug=data.jsonl", "{root}/suites"]),  # nargs="?"
    (["--debug", "-x", "suites"], ["--debug", "-x", "{root}/suites"]),
]


@pytest.mark.parametrize(("typed", "sent"), CASES)
def test_arguments_are_rewritten_into_the_form_xdist_maps_right(
    tmp_path: Path, arities: dict[str, remote_args.Arity], typed: list[str], sent: list[str]
) -> None:
    (tmp_path / "suites" / "aime25").mkdir(parents=True)
    (tmp_path / "suites" / "aime25" / "test_aime25.py").touch()
    (tmp_path / "agenteval-results").mkdir()
    (tmp_path / "data.jsonl").touch()
    fill = [a.format(root=tmp_path) for a in typed]
    got = remote_args.worker_args(fill, arities, tmp_path, [tmp_path / "suites"], "ssh=gpu1")
    assert got == [a.format(root=tmp_path) for a in sent]


def test_values_of_an_option_with_several_cannot_be_joined_and_are_refused(
    tmp_path: Path, arities: dict[str, remote_args.Arity]
) -> None:
    (tmp_path / "data.jsonl").touch()
    many = {**arities, "--many": "+"}  # no option of pytest, xdist or ours takes several
    kept = remote_args.worker_args(["--many", "a", "b"], many, tmp_path, [], "ssh=gpu1")
    assert kept == ["--many", "a", "b"]
    with pytest.raises(remote_args.RemoteArgsError) as refused:
        remote_args.worker_args(["--many", "a", "data.jsonl"], many, tmp_path, [], "ssh=gpu1")
    assert str(refused.value) == (
        "--many takes several values, and pytest-xdist would send data.jsonl (a file here) to the "
        "worker --tx ssh=gpu1 as a test path: pass --many in an ini file's addopts instead"
    )


def test_a_test_path_outside_every_rsyncdir_is_a_usage_error(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_elsewhere="def test_x():\n    pass\n")
    pytester.mkdir("suites")
    result = pytester.runpytest_subprocess(
        "test_elsewhere.py", "--dist", "load", f"--tx=popen//chdir={tmp_path}", "--rsyncdir", "suites"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines(
        [
            f"ERROR: the test path test_elsewhere.py is outside every --rsyncdir, so the worker "
            f"--tx popen//chdir={tmp_path} (started in another folder) would not have it: "
            "add --rsyncdir test_elsewhere.py (or a folder above it)"
        ]
    )
