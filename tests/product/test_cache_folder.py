"""The generation cache does not move with pytest's rootdir (issue 33): it lives in the
user cache folder ($XDG_CACHE_HOME/pytest-agenteval), $AGENTEVAL_CACHE_DIR or
--agenteval-cache-dir; two processes share one folder and no reader takes half an entry;
`pytest-agenteval cache info | prune | clear` manage it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_agenteval.cli import main as cli
from pytest_agenteval.models.cache import GenerationCache
from pytest_agenteval.models.cache_folder import cache_directory, parse_age, prune, usage
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import TINY_PROBLEMS, read_results, working_directory, write_jsonl

AIME = ("--pyargs", "pytest_agenteval.suites.aime25", "--mode=text-only", "--val-n=2")


@pytest.fixture
def user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No $AGENTEVAL_CACHE_DIR: the default folder, under a $XDG_CACHE_HOME of the test's."""
    monkeypatch.delenv("AGENTEVAL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "pytest-agenteval"


def test_the_folder_is_the_option_else_the_variable_else_the_user_cache(
    user_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert cache_directory() == user_cache
    monkeypatch.setenv("AGENTEVAL_CACHE_DIR", str(tmp_path / "env"))
    assert cache_directory() == tmp_path / "env"
    assert cache_directory(str(tmp_path / "opt")) == tmp_path / "opt"


def test_how_a_path_option_is_spelled_does_not_move_the_cache(
    user_cache: Path, pytester: pytest.Pytester
) -> None:
    """`--dataset-path ../other/x.jsonl` (its own argument) makes pytest take ../other as
    the rootdir; the cache lived under the rootdir, so that spelling regenerated (and on a
    paid API re-paid) every generation that `--dataset-path=../other/x.jsonl` had cached."""
    for name in ("a", "b", "c"):
        (pytester.path / name).mkdir()
    (pytester.path / "other").mkdir()
    write_jsonl(pytester.path / "other" / "x.jsonl", TINY_PROBLEMS[:2])
    with OpenAITestServer(ServerConfig(answer="\\boxed{70}")) as server:
        counts = []
        for folder, spelling in (
            ("a", ["--dataset-path=../other/x.jsonl"]),
            ("b", ["--dataset-path", "../other/x.jsonl"]),
            ("c", ["--dataset-path=../other/x.jsonl"]),
        ):
            before = len(server.requests)
            with working_directory(pytester.path / folder):
                result = pytester.runpytest_inprocess(
                    *AIME, *spelling, f"--endpoint={server.url}", "--agenteval-out=r.jsonl"
                )
            assert result.ret == 1  # problem 1 is unsolved
            assert "cannot tell which weights" not in result.stdout.str()  # the server names itself
            counts.append(len(server.requests) - before)
    assert counts == [4, 0, 0]
    (summary,) = read_results(pytester.path / "b" / "r.jsonl")[1]
    assert summary["requests"]["cached_generations"] == 4
    assert usage(user_cache).entries == 4


WRITER = """
import hashlib, sys
from pathlib import Path
from pytest_agenteval.models.cache import GenerationCache

folder, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
cache = GenerationCache(folder)
for i in range(count):  # 40-80 KB a line: a reader often finds one half written
    cache.put(hashlib.sha256(f"{name}-{i}".encode()).hexdigest(), {"writer": name, "text": name * 20000})
cache.close()
"""


def _key(name: str, i: int) -> str:
    return hashlib.sha256(f"{name}-{i}".encode()).hexdigest()


def test_two_processes_write_one_folder_while_a_reader_never_takes_half_an_entry(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(folder), name, "150"]) for name in ("ab", "cdef")
    ]
    keys = [_key(name, i) for name in ("ab", "cdef") for i in range(150)]
    reader = GenerationCache(folder)
    looks = 0
    while any(w.poll() is None for w in writers):
        reader.refresh()
        looks += 1
        for key in keys:
            if key in reader:  # every entry a reader indexed reads whole
                value = reader.get(key)
                assert value is not None and value["text"] == value["writer"] * 20000
    assert [w.wait() for w in writers] == [0, 0]
    after = GenerationCache(folder)
    assert (len(after), after.notes, reader.notes) == (300, [], [])
    assert usage(folder).entries == 300 and usage(folder).segments == 2


@pytest.mark.parametrize(
    ("text", "seconds"), [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("45s", 45), ("2w", 1209600)]
)
def test_ages(text: str, seconds: float) -> None:
    assert parse_age(text) == seconds


def test_cache_info_prune_and_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "c"
    old = GenerationCache(folder)
    for i in range(3):
        old.put(f"{i:064x}", {"i": i})
    old.close()
    (old_segment,) = folder.glob("*.jsonl")
    month_ago = time.time() - 31 * 86400
    os.utime(old_segment, (month_ago, month_ago))
    new = GenerationCache(folder)
    new.put(f"{9:064x}", {"i": 9})
    new.close()
    (folder / "model-hashes.json").write_text("{}")
    dir_arg = f"--agenteval-cache-dir={folder}"
    assert cli(["cache", "info", dir_arg]) == 0
    out = capsys.readouterr().out
    assert f"cache folder: {folder} (--agenteval-cache-dir)" in out
    assert "generations:  4 entries in 2 segment(s)" in out
    assert cli(["cache", "prune", "--older-than", "30d", dir_arg]) == 0
    assert capsys.readouterr().out.startswith("pruned 1 segment(s)")
    assert (usage(folder).entries, old_segment.exists()) == (1, False)
    assert prune(folder, 30 * 86400) == (0, 0)
    assert cli(["cache", "prune", "--older-than", "soon", dir_arg]) == 2
    assert "--older-than 'soon': give a number and a unit" in capsys.readouterr().err
    assert cli(["cache", "clear", dir_arg]) == 0
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("text", ["nand", "infd", "-infh", "1e400d"])
def test_ages_that_are_not_a_finite_number_are_refused(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="give a number and a unit"):
        parse_age(text)
    assert cli(["cache", "prune", f"--older-than={text}"]) == 2
    assert capsys.readouterr().err.count("\n") == 1  # one line


def test_clear_removes_only_the_caches_own_files_and_refuses_another_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"  # AGENTEVAL_CACHE_DIR=. in a project: its files stay
    cache = GenerationCache(project)
    cache.put(f"{1:064x}", {"i": 1})
    cache.close()
    (project / "model-hashes.json").write_text("{}")
    (project / "sdk-home").mkdir()
    (project / "sdk-home" / "state").write_text("x")
    (project / "notes.txt").write_text("mine")
    (project / "data.jsonl").write_text('{"id": 0}\n')
    (project / "src").mkdir()
    (project / "src" / "main.py").write_text("print()")
    # left: the segment of a run still writing (it holds its lock), the ledger of paid,
    # uncollected batches, a file being written
    writing = GenerationCache(project)
    writing.put(f"{2:064x}", {"i": 2})
    running = writing._segment
    kept = [running, project / "batches.json", project / "model-hashes.tmp"]
    for path in kept[1:]:
        path.write_text("{}\n")
    assert cli(["cache", "clear", f"--agenteval-cache-dir={project}"]) == 0
    assert "kept 3 entries the cache never writes" in capsys.readouterr().out
    names = ["data.jsonl", "notes.txt", "src"]
    assert sorted(p.name for p in project.iterdir()) == sorted([*names, *(p.name for p in kept)])
    writing.close()  # the run ended: its segment goes
    for path in kept[1:]:
        path.unlink()
    assert cli(["cache", "clear", f"--agenteval-cache-dir={project}"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in project.iterdir()) == names
    assert cli(["cache", "clear", f"--agenteval-cache-dir={project}"]) == 2  # nothing of a cache left
    assert capsys.readouterr().err.strip().splitlines() == [
        f"pytest-agenteval cache clear: {project} does not look like a generation cache folder (it holds "
        "data.jsonl, notes.txt, src and no cache segment): nothing removed; give the cache's folder with "
        "--agenteval-cache-dir DIR"
    ]
    assert sorted(p.name for p in project.iterdir()) == ["data.jsonl", "notes.txt", "src"]


def test_cache_reads_the_ini_of_the_current_folders_project_relative_to_the_ini(
    user_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\nagenteval_cache_dir = .gen-cache\n")
    with working_directory(project / "sub"):
        assert cli(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert (
        f"cache folder: {project / '.gen-cache'} (ini key agenteval_cache_dir in {project / 'pytest.ini'})"
        in out
    )
    with working_directory(tmp_path):
        assert cli(["cache", "info"]) == 0
    assert f"cache folder: {user_cache} (the user cache folder)" in capsys.readouterr().out


def test_a_run_resolves_a_relative_ini_cache_dir_against_the_ini_file(
    user_cache: Path, pytester: pytest.Pytester
) -> None:
    write_jsonl(pytester.path / "tiny.jsonl", TINY_PROBLEMS)
    pytester.makeini("[pytest]\nagenteval_cache_dir = .gen-cache\n")
    (pytester.path / "sub").mkdir()
    with (
        OpenAITestServer(ServerConfig(answer="\\boxed{70}")) as server,
        working_directory(pytester.path / "sub"),
    ):
        result = pytester.runpytest_inprocess(
            *AIME,
            "--dataset-path=../tiny.jsonl",
            f"--endpoint={server.url}",
            "--limit=1",
            "-p",
            "no:cacheprovider",
        )
    assert result.ret in (0, 1)
    assert usage(pytester.path / ".gen-cache").entries == 2
    assert not (pytester.path / "sub" / ".gen-cache").exists()
