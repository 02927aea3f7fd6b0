"""Storage faults lose nothing: a disk that fills up under the cache or the results file,
a cache segment corrupted in the middle, a results folder that turns read-only mid-run
and a partial results file deleted mid-run. Each test asserts the one line the user
sees and what is kept. Full and read-only disks are real: small tmpfs mounts and
read-only bind mounts (root only; skipped with the reason elsewhere)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_agenteval.models.cache import GenerationCache
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results

GENERATIONS = 8  # the tiny suite: 4 problems x --val-n=2
CACHE_SEGMENT_ROOM = 4096  # bytes left on the cache's disk (one tmpfs page)...
LONG_ANSWER = "Adding up. " * 80 + "\\boxed{70} {seed}"  # ...holds some of 8 entries, not all


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """mounts(name, size=None): a small tmpfs (size) or a read-only bind mount of the
    existing folder `name` (size=None); all unmounted afterwards."""
    made: list[Path] = []

    def mount(path: Path, size: str | None = None) -> Path:
        path.mkdir(exist_ok=True)
        if size is not None:
            steps = [["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]]
        else:
            steps = [["mount", "--bind", str(path), str(path)], ["mount", "-o", "remount,bind,ro", str(path)]]
        for step in steps:
            done = _run(step)
            if done.returncode != 0:
                pytest.skip(f"cannot mount here ({done.stderr.strip() or done.returncode}): needs root")
            if step is steps[0]:
                made.append(path)
        return path

    yield mount
    for path in reversed(made):
        _run(["umount", "-l", str(path)])


def fill(disk: Path, leave: int = 0) -> None:
    """Fill a tmpfs until the kernel refuses, then free `leave` bytes."""
    filler = disk / "filler"
    with filler.open("wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    with filler.open("r+b") as handle:
        handle.truncate(max(0, filler.stat().st_size - leave))


def storage_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("storage: ")]


def _mid_run(pytester: pytest.Pytester, actions: dict[int, str]) -> None:
    """A conftest that runs actions[k] on the controller once k items have reported
    (after the plugin streamed them)."""
    steps = "".join(f"    if len(SEEN) == {k}:\n        {action}\n" for k, action in actions.items())
    pytester.makeconftest(
        "import json, os, shutil, subprocess\n"
        "import pytest\n"
        "SEEN = []\n"
        "WORKER = []\n"
        "def pytest_configure(config):\n"
        "    WORKER.append(hasattr(config, 'workerinput'))\n"
        "@pytest.hookimpl(trylast=True)\n"
        "def pytest_runtest_logreport(report):\n"
        "    if report.when != 'setup' or WORKER[0]:\n"
        "        return\n"
        "    SEEN.append(report.nodeid)\n" + steps
    )


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_full_disk_under_the_cache_keeps_every_generation_and_says_so_once(
    run_suite, pytester: pytest.Pytester, mounts, workers: str
) -> None:
    disk = mounts(pytester.path / "cache", size="256k")
    fill(disk, leave=CACHE_SEGMENT_ROOM)
    cache = f"--agenteval-cache-dir={disk}"
    with OpenAITestServer(ServerConfig(answer=LONG_ANSWER)) as server:
        result, out = run_suite(f"--endpoint={server.url}", "--val-n=2", cache, "-n", workers)
        first = len(server.requests)
        kept = len(GenerationCache(disk))
        again, _ = run_suite(f"--endpoint={server.url}", "--val-n=2", cache, out="again.jsonl")
        second = len(server.requests) - first
    problems, (summary,) = read_results(out)
    assert [len(p["generations"]) for p in problems] == [2, 2, 2, 2] and summary["complete"] is True
    assert storage_lines(result) == [
        f"storage: the generation cache in {disk} could not be written (No space left on device): "
        "caching stopped there; this run's results are complete, a rerun requests again only what "
        "was not cached"
    ]
    assert summary["storage"] == [storage_lines(result)[0].removeprefix("storage: ")]
    assert first == GENERATIONS and 0 < kept < GENERATIONS
    assert second == GENERATIONS - kept  # what the full disk took is never requested again


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_full_disk_under_the_results_file_writes_it_to_the_rescue_folder(
    run_suite, pytester: pytest.Pytester, mounts, monkeypatch, workers: str
) -> None:
    disk = mounts(pytester.path / "out", size="64k")
    fill(disk)
    monkeypatch.setenv("TMPDIR", str(pytester.path / "tmp"))
    (pytester.path / "tmp").mkdir()
    with OpenAITestServer(ServerConfig(answer="\\boxed{70} {seed}")) as server:
        result, out = run_suite(  # a process of its own: tempfile reads TMPDIR once per process
            f"--endpoint={server.url}", "--val-n=2", "-n", workers, out="out/results.jsonl", subprocess=True
        )
    (rescued,) = (pytester.path / "tmp").glob("agenteval-rescue-*/results.jsonl")  # its own private folder
    assert rescued.parent.stat().st_mode & 0o777 == 0o700
    assert storage_lines(result) == [
        f"storage: could not write the results file {out} (No space left on device); "
        f"wrote it to {rescued} instead"
    ]
    assert f"results: {rescued}" in result.outlines
    problems, (summary,) = read_results(rescued)
    assert [p["problem_id"] for p in problems] == [0, 1, 2, 3] and summary["complete"] is True
    assert not out.exists()
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the asked-for file is not there


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_results_folder_turning_read_only_mid_run_loses_nothing(
    run_suite, pytester: pytest.Pytester, mounts, monkeypatch, workers: str
) -> None:
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    folder = pytester.path / "out"
    folder.mkdir()
    _mid_run(
        pytester,
        {
            2: f"subprocess.run(['mount', '--bind', '{folder}', '{folder}'], check=True); "
            f"subprocess.run(['mount', '-o', 'remount,bind,ro', '{folder}'], check=True)"
        },
    )
    monkeypatch.setenv("TMPDIR", str(pytester.path / "tmp"))
    (pytester.path / "tmp").mkdir()
    try:
        with OpenAITestServer(ServerConfig(answer="\\boxed{70} {seed}")) as server:
            result, out = run_suite(  # a process of its own: tempfile reads TMPDIR once per process
                f"--endpoint={server.url}", "--val-n=2", "-n", workers, out="out/r.jsonl", subprocess=True
            )
    finally:
        while _run(["umount", str(folder)]).returncode == 0:
            pass
    (rescued,) = (pytester.path / "tmp").glob("agenteval-rescue-*/r.jsonl")  # its own private folder
    assert rescued.parent.stat().st_mode & 0o777 == 0o700
    assert storage_lines(result) == [
        f"storage: could not write the results file {out} (Read-only file system); "
        f"wrote it to {rescued} instead"
    ]
    problems, (summary,) = read_results(rescued)
    assert [p["problem_id"] for p in problems] == [0, 1, 2, 3] and summary["complete"] is True
    # what was streamed before the folder went read-only is still beside the asked-for file
    assert len((folder / "r.jsonl.partial").read_text().splitlines()) == 4


@pytest.mark.parametrize("deleted", ["file", "folder"])
def test_a_partial_results_file_deleted_mid_run_is_written_again(
    run_suite, pytester: pytest.Pytester, deleted: str
) -> None:
    partial = pytester.path / "out" / "results.jsonl.partial"
    seen = pytester.path / "seen.json"
    delete = f"os.unlink('{partial}')" if deleted == "file" else f"shutil.rmtree('{partial.parent}')"
    _mid_run(
        pytester,
        {
            2: delete,
            # after item 3: what a crash at that moment would leave behind
            3: f"ids = [json.loads(x)['problem_id'] for x in open('{partial}')]; "
            f"open('{seen}', 'w').write(json.dumps(ids))",
        },
    )
    with OpenAITestServer(ServerConfig(answer="\\boxed{70} {seed}")) as server:
        result, out = run_suite(f"--endpoint={server.url}", "--val-n=2", out="out/results.jsonl")
    assert storage_lines(result) == [
        f"storage: the partial results file {partial} was deleted during the run; "
        "it was written again with the 3 items finished so far"
    ]
    assert json.loads(seen.read_text()) == [0, 1, 2]
    problems, (summary,) = read_results(out)
    assert [p["problem_id"] for p in problems] == [0, 1, 2, 3] and summary["complete"] is True
    assert summary["storage"] == [storage_lines(result)[0].removeprefix("storage: ")]
    assert not partial.exists()


# -- a cache segment corrupted in the middle ---------------------------------------------


def _three_entries(directory: Path) -> tuple[Path, list[str]]:
    cache = GenerationCache(directory)
    keys = [c * 64 for c in "abc"]
    for number, key in enumerate(keys):
        cache.put(key, {"text": f"answer {number}"})
    cache.close()
    return next(directory.glob("*.jsonl")), keys


def test_a_flipped_byte_in_a_middle_entry_is_skipped_and_named(tmp_path: Path) -> None:
    segment, keys = _three_entries(tmp_path)
    data = segment.read_bytes()
    segment.write_bytes(data.replace(b"answer 1", b"answer 7"))  # still valid JSON
    reloaded = GenerationCache(tmp_path)
    assert [reloaded.get(k) for k in keys] == [{"text": "answer 0"}, None, {"text": "answer 2"}]
    assert reloaded.notes == [
        f"cache segment {segment}: 1 corrupt line(s) skipped; those generations are requested again"
    ]


def test_a_nul_block_over_a_middle_entry_keeps_the_entries_after_it(tmp_path: Path) -> None:
    segment, keys = _three_entries(tmp_path)
    lines = segment.read_bytes().splitlines(keepends=True)
    segment.write_bytes(lines[0] + b"\0" * len(lines[1]) + lines[2])  # what a crash can leave
    reloaded = GenerationCache(tmp_path)
    assert [reloaded.get(k) for k in keys] == [{"text": "answer 0"}, None, {"text": "answer 2"}]
    assert len(reloaded.notes) == 1 and "1 corrupt line(s) skipped" in reloaded.notes[0]


def test_a_rerun_over_a_corrupted_segment_requests_only_the_corrupted_generation(
    run_suite, pytester: pytest.Pytester
) -> None:
    directory = pytester.path / "cache"
    cache = f"--agenteval-cache-dir={directory}"
    with OpenAITestServer(ServerConfig(answer="\\boxed{70} {seed}")) as server:
        run_suite(f"--endpoint={server.url}", "--val-n=2", cache)
        first = len(server.requests)
        (segment,) = directory.glob("*.jsonl")
        lines = segment.read_bytes().splitlines(keepends=True)
        middle = len(lines) // 2
        lines[middle] = lines[middle].replace(b"boxed", b"boxxd", 1)
        segment.write_bytes(b"".join(lines))
        result, out = run_suite(f"--endpoint={server.url}", "--val-n=2", cache, out="again.jsonl")
        second = len(server.requests) - first
    assert (first, second) == (GENERATIONS, 1)
    assert storage_lines(result) == [
        f"storage: cache segment {segment}: 1 corrupt line(s) skipped; those generations are requested again"
    ]
    problems, (summary,) = read_results(out)
    assert summary["requests"]["cached_generations"] == GENERATIONS - 1 and summary["complete"] is True


def test_a_read_only_cache_folder_still_serves_and_says_why_nothing_is_added(tmp_path: Path, mounts) -> None:
    folder = tmp_path / "cache"
    segment, keys = _three_entries(folder)
    mounts(folder)  # read-only from now on
    cache = GenerationCache(folder)
    cache.put("d" * 64, {"text": "new"})  # no exception: the generation is not lost
    assert (cache.get(keys[0]), cache.get("d" * 64), cache.writes) == ({"text": "answer 0"}, None, 0)
    assert cache.notes == [
        f"the generation cache in {folder} could not be written (Read-only file system): caching "
        "stopped there; this run's results are complete, a rerun requests again only what was not cached"
    ]
