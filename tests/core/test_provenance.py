"""Provenance of the data in the results summary: the sha256 of a local JSONL or parquet
file or save_to_disk folder (as coreutils' sha256sum computes it), and the hub commit a
dataset id resolved to (read back from a real datasets cache, offline, and from
huggingface_hub's refs)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pytest_agenteval.datasets.tabular import describe_source
from tests.conftest import SUITE_FILE, TINY_PROBLEMS, read_results, replay_rows, write_jsonl

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OLDER = "89abcdef0123456789abcdef0123456789abcdef"
FOLDER_SHA256 = (  # the documented recipe (docs/results.md), run by the shell
    "find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum"
)


def shell(command: str, cwd: Path) -> str:
    done = subprocess.run(command, shell=True, cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.split()[0]


def _jsonl(folder: Path) -> Path:
    return write_jsonl(folder / "tiny.jsonl", TINY_PROBLEMS)


def _parquet(folder: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(TINY_PROBLEMS), folder / "tiny.parquet")
    return folder / "tiny.parquet"


def _saved(folder: Path) -> Path:
    import datasets

    datasets.DatasetDict({"train": datasets.Dataset.from_list(TINY_PROBLEMS)}).save_to_disk(folder / "saved")
    return folder / "saved"


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (_jsonl, "sha256sum tiny.jsonl"),
        (_parquet, "sha256sum tiny.parquet"),
        (_saved, f"cd saved && {FOLDER_SHA256}"),
    ],
)
def test_a_local_source_records_its_path_and_sha256(tmp_path: Path, make, expected: str) -> None:
    path = make(tmp_path)
    assert describe_source(str(path), None) == {
        "dataset_path": str(path.resolve()),
        "dataset_sha256": shell(expected, tmp_path),
    }


def test_a_folder_hash_covers_names_and_contents(tmp_path: Path) -> None:
    folder = _saved(tmp_path)
    before = describe_source(str(folder), None)["dataset_sha256"]
    (folder / "train" / "state.json").rename(folder / "train" / "state2.json")
    renamed = describe_source(str(folder), None)["dataset_sha256"]
    (folder / "train" / "state2.json").write_text("{}")
    assert len({before, renamed, describe_source(str(folder), None)["dataset_sha256"]}) == 3


def prepare_hub_cache(cache: Path, source: str, commit: str, rows: list[dict]) -> Path:
    """The datasets cache an online load of hub dataset `source` at `commit` leaves,
    `<owner>___<name>/default/0.0.0/<commit>/`, made by the datasets library's own JSON
    builder (it refuses local data files for a repo id, hence the rename)."""
    import datasets
    from datasets.data_files import DataFilesDict
    from datasets.packaged_modules.json.json import Json

    owner, name = source.split("/")
    data = write_jsonl(cache.parent / f"{name}-{commit[:8]}.jsonl", rows)
    builder = Json(
        cache_dir=str(cache),
        dataset_name=name,
        config_name="default",
        hash=commit,
        data_files=DataFilesDict.from_patterns({"train": [str(data)]}),
    )
    builder.download_and_prepare()
    prepared = Path(builder.cache_dir)
    target = cache / f"{owner}___{name}" / "default" / "0.0.0" / commit
    target.parent.mkdir(parents=True, exist_ok=True)
    prepared.rename(target)
    assert datasets.__version__  # the library made it
    return target


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A datasets cache holding `owner/tiny` at COMMIT (newest) and OLDER, and the
    environment of an offline run that uses it."""
    cache = tmp_path / "datasets-cache"
    older = prepare_hub_cache(cache, "owner/tiny", OLDER, TINY_PROBLEMS[:1])
    newest = prepare_hub_cache(cache, "owner/tiny", COMMIT, TINY_PROBLEMS)
    os.utime(older, (1_000_000_000, 1_000_000_000))  # the offline loader takes the newest
    os.utime(newest, (2_000_000_000, 2_000_000_000))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))  # empty: no refs
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


@pytest.mark.parametrize("workers", [("-n", "0"), ("-n", "2")])
def test_a_hub_dataset_records_the_commit_it_loaded(
    pytester: pytest.Pytester, offline_hub: Path, workers: tuple[str, str]
) -> None:
    pytester.makepyfile(test_tiny=SUITE_FILE)
    texts = {p["id"]: ["\\boxed{70}"] for p in TINY_PROBLEMS}
    replay = write_jsonl(pytester.path / "replay.jsonl", replay_rows(texts))
    out = pytester.path / "results.jsonl"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--dataset-id=owner/tiny",
        f"--model-path=replay:{replay}",
        "--mode=text-only",
        "--val-n=1",
        f"--agenteval-out={out}",
        *workers,
    )
    result.assert_outcomes(passed=1, failed=3)  # four problems: the newest commit's rows
    (summary,) = read_results(out)[1]
    assert {k: summary.get(k) for k in ("dataset_id", "dataset_revision", "dataset_revision_requested")} == {
        "dataset_id": "owner/tiny",
        "dataset_revision": COMMIT,
        "dataset_revision_requested": None,
    }


@pytest.mark.parametrize(
    ("revision", "refs", "expected"),
    [
        (None, {"main": COMMIT}, COMMIT),  # the default branch, as the load resolved it
        ("v1", {"main": OLDER, "v1": COMMIT}, COMMIT),  # a tag
        (OLDER, {"main": COMMIT}, OLDER),  # a commit is its own resolution
        (None, {}, None),  # nothing downloaded here: unknown, not guessed
        (None, {"main": "not-a-commit"}, None),
    ],
)
def test_an_online_load_s_commit_is_read_from_the_hub_cache_refs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, revision: str | None, refs: dict, expected: str | None
) -> None:
    from huggingface_hub import constants

    from pytest_agenteval.datasets import provenance

    repo = tmp_path / "datasets--owner--tiny"
    (repo / "refs").mkdir(parents=True)
    for name, commit in refs.items():
        (repo / "refs" / name).write_text(commit)
        (repo / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))  # what HF_HUB_CACHE sets at import
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(provenance, "_loaded_commits", {})
    assert provenance.hub_commit("owner/tiny", revision) == expected


def test_a_load_in_this_process_is_what_the_summary_records(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_agenteval.datasets import provenance

    monkeypatch.setattr(provenance, "_loaded_commits", {})
    provenance.record_commit("owner/tiny", "main", COMMIT)
    provenance.record_commit("owner/other", None, "0.0.0")  # an older datasets' module hash: not a commit
    resolved = (provenance.hub_commit("owner/tiny", "main"), provenance.hub_commit("owner/other", None))
    assert resolved == (COMMIT, None)
    assert json.dumps(describe_source("owner/tiny", "main")) == json.dumps(
        {"dataset_id": "owner/tiny", "dataset_revision": COMMIT, "dataset_revision_requested": "main"}
    )
