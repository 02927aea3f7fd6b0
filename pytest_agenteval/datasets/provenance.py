"""Where the data came from, for the results summary: the sha256 of a local file or folder,
or the hub commit a dataset id's revision resolved to.

A folder's sha256 covers every regular file under it (symbolic links are not followed), by
relative path and content: the sha256 of the lines `<file sha256>  <relative path>\\n` in
byte order of the paths, which is what

    cd FOLDER && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum

prints. Times, modes and empty folders are not covered."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

COMMIT = re.compile(r"^[0-9a-f]{40}$")
# hub commit of (dataset id, requested revision), recorded by a load in this process
_loaded_commits: dict[tuple[str, str | None], str | None] = {}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def folder_sha256(folder: Path) -> str:
    """The sha256 of `sha256sum` lines of every regular file under `folder` (see above)."""
    files: list[str] = []
    for parent, _, names in os.walk(folder):  # does not descend into linked folders
        for name in names:
            path = Path(parent, name)
            if path.is_file() and not path.is_symlink():
                files.append(path.relative_to(folder).as_posix())
    digest = hashlib.sha256()
    for relative in sorted(files, key=lambda p: p.encode("utf-8", "surrogateescape")):
        digest.update(f"{file_sha256(folder / relative)}  {relative}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def record_commit(source: str, revision: str | None, commit: Any) -> None:
    """What a hub load resolved `revision` to (the datasets builder's hash is the commit)."""
    _loaded_commits[(source, revision)] = commit if isinstance(commit, str) and COMMIT.match(commit) else None


def hub_commit(source: str, revision: str | None) -> str | None:
    """The commit a hub dataset's revision resolved to: from a load in this process, else
    from the caches a load elsewhere on this machine wrote (an xdist controller loads
    nothing), without asking the hub; None when neither tells."""
    if (source, revision) in _loaded_commits:
        return _loaded_commits[(source, revision)]
    if revision is not None and COMMIT.match(revision):
        return revision
    from pytest_agenteval.datasets.hub import offline_requested

    if offline_requested():  # the datasets library loads the newest prepared copy, whatever the revision
        return _newest_prepared(source)
    return _hub_ref(source, revision or "main")


def _hub_ref(source: str, revision: str) -> str | None:
    """huggingface_hub's cache: `datasets--owner--name/refs/<revision>` holds the commit
    the revision pointed to when the load downloaded from it."""
    from huggingface_hub import constants

    ref = Path(constants.HF_HUB_CACHE, "datasets--" + source.replace("/", "--"), "refs", revision)
    try:
        commit = ref.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return commit if COMMIT.match(commit) else None


def _newest_prepared(source: str) -> str | None:
    """The datasets library's own cache, as its offline loader picks: the most recently
    prepared `<owner>___<name>/<config>/<version>/<commit>` folder."""
    from datasets import config
    from datasets.naming import camelcase_to_snakecase

    owner, _, name = source.rpartition("/")
    cache = os.path.expanduser(str(config.HF_DATASETS_CACHE))
    root = Path(cache, f"{owner}___{camelcase_to_snakecase(name)}")
    prepared = [p for p in root.glob("*/*/*") if p.is_dir() and COMMIT.match(p.name)]
    return max(prepared, key=lambda p: p.stat().st_mtime).name if prepared else None


def describe_source(source: str, revision: str | None) -> dict[str, Any]:
    """Provenance of the data for the summary: a local file's or folder's path and sha256,
    or a hub id with the revision asked for and the commit it resolved to."""
    path = Path(source).expanduser()
    if path.is_file():
        return {"dataset_path": str(path.resolve()), "dataset_sha256": file_sha256(path)}
    if path.is_dir():
        return {"dataset_path": str(path.resolve()), "dataset_sha256": folder_sha256(path)}
    return {
        "dataset_id": source,
        "dataset_revision": hub_commit(source, revision),
        "dataset_revision_requested": revision,
    }
