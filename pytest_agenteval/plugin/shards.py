"""`--agenteval-shard I/N`: this run evaluates shard I of N of the selected items, and
deselects the others (`pytest-agenteval merge` joins the shards' results files).

The split is over the items left after -k, -m, --limit and --lf, in collection order, so
every xdist worker (which collects the same items) and every -n deselects the same ones.
Items are grouped by suite and category (a BFCL category; a suite without categories is
one group) and dealt round-robin with one counter running across the groups: each group
splits within +-1 item between the shards, and so do the shards' sizes."""

from __future__ import annotations

import os
import re
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_agenteval.config.settings import Settings
from pytest_agenteval.output.summary import selection_hash
from pytest_agenteval.plugin.items import problem_of, suite_of

WORKERINPUT_KEY = "agenteval_shard"  # (index, count), resolved once on the controller
WORKEROUTPUT_KEY = "agenteval_shard_selection"  # (selected, selection hash), worker to controller
_EXPLICIT = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
K8S_VARIABLE = "JOB_COMPLETION_INDEX"


@dataclass
class ShardState:
    """This run's shard; `selected` and `selection` (the hash of the whole selection) are
    known once the items are (on the controller of an xdist run: from its workers)."""

    index: int
    count: int
    selected: int | None = None
    selection: str | None = None


SHARD = pytest.StashKey[ShardState]()


def parse_shard(value: str | None, count_option: int, environ: Mapping[str, str]) -> tuple[int, int] | None:
    """(index, count) from --agenteval-shard (`I/N` or `auto`), None when not sharded;
    raises pytest.UsageError with the fix."""
    if value is None:
        if count_option:
            raise pytest.UsageError(
                "--agenteval-shard-count is the N of --agenteval-shard auto (a Kubernetes Indexed Job, or "
                "a SLURM array task resubmitted alone); add --agenteval-shard auto, or drop it"
            )
        return None
    if value.strip() == "auto":
        return _from_scheduler(count_option, environ)
    match = _EXPLICIT.match(value)
    if not match:
        raise pytest.UsageError(
            f"--agenteval-shard {value!r}: expected I/N (shard I of N, 0 <= I < N, e.g. 0/4) or auto"
        )
    if count_option:
        raise pytest.UsageError(
            f"--agenteval-shard {value}: --agenteval-shard-count is for --agenteval-shard auto only; drop it"
        )
    return _checked(int(match[1]), int(match[2]), f"--agenteval-shard {value.strip()}")


def _checked(index: int, count: int, source: str) -> tuple[int, int]:
    if count < 1:
        raise pytest.UsageError(f"{source}: the shard count must be at least 1")
    if not 0 <= index < count:
        raise pytest.UsageError(
            f"{source}: shard {index} of {count} does not exist; shards are numbered 0 to {count - 1}"
        )
    return index, count


def _number(environ: Mapping[str, str], name: str) -> int:
    raw = environ[name]
    try:
        return int(raw)
    except ValueError:
        raise pytest.UsageError(f"--agenteval-shard auto: {name}={raw!r} is not a number") from None


def _from_scheduler(count_option: int, environ: Mapping[str, str]) -> tuple[int, int]:
    """A SLURM array task, else a Kubernetes Indexed Job's pod; neither is an error
    (never sharded by surprise)."""
    if "SLURM_ARRAY_TASK_ID" in environ:
        return _from_slurm(count_option, environ)
    if K8S_VARIABLE in environ:
        if count_option < 1:
            raise pytest.UsageError(
                f"--agenteval-shard auto: {K8S_VARIABLE} is set (a Kubernetes Indexed Job) but the "
                "count is not: add --agenteval-shard-count N (the Job's completions)"
            )
        return _checked(
            _number(environ, K8S_VARIABLE), count_option, f"--agenteval-shard auto ({K8S_VARIABLE})"
        )
    raise pytest.UsageError(
        "--agenteval-shard auto: no scheduler found: looked for SLURM_ARRAY_TASK_ID and "
        f"SLURM_ARRAY_TASK_COUNT (a SLURM array) and {K8S_VARIABLE} (a Kubernetes Indexed Job); "
        "pass --agenteval-shard I/N outside them"
    )


def _from_slurm(count_option: int, environ: Mapping[str, str]) -> tuple[int, int]:
    """With --agenteval-shard-count N: shard SLURM_ARRAY_TASK_ID of N (the --array numbers
    are the shard indices; a resubmitted `--array=2` is a one-task array). Without: the
    task's place in its array, (ID - MIN) / STEP, of SLURM_ARRAY_TASK_COUNT."""
    task = _number(environ, "SLURM_ARRAY_TASK_ID")
    if count_option:
        return _checked(
            task, count_option, "--agenteval-shard auto (SLURM_ARRAY_TASK_ID of --agenteval-shard-count)"
        )
    if "SLURM_ARRAY_TASK_COUNT" not in environ:
        raise pytest.UsageError(
            "--agenteval-shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not; "
            "add --agenteval-shard-count N, or pass --agenteval-shard I/N"
        )
    first = _number(environ, "SLURM_ARRAY_TASK_MIN") if "SLURM_ARRAY_TASK_MIN" in environ else 0
    step = _number(environ, "SLURM_ARRAY_TASK_STEP") if "SLURM_ARRAY_TASK_STEP" in environ else 1
    if step < 1 or (task - first) % step:
        raise pytest.UsageError(
            f"--agenteval-shard auto (SLURM array): SLURM_ARRAY_TASK_ID {task} is not SLURM_ARRAY_TASK_MIN "
            f"{first} plus a multiple of SLURM_ARRAY_TASK_STEP {step} (the index is (ID - MIN) / STEP); "
            "pass --agenteval-shard I/N"
        )
    count = _number(environ, "SLURM_ARRAY_TASK_COUNT")
    return _checked(
        (task - first) // step, count, "--agenteval-shard auto (SLURM array: (ID - MIN) / STEP of COUNT)"
    )


def assign(groups: Sequence[Hashable], count: int) -> list[int]:
    """The shard of each item, given each item's group in collection order: the groups in
    order of first appearance, each dealt round-robin, one counter across them."""
    members: dict[Hashable, list[int]] = {}
    for position, group in enumerate(groups):
        members.setdefault(group, []).append(position)
    shards = [0] * len(groups)
    dealt = 0
    for positions in members.values():
        for position in positions:
            shards[position] = dealt % count
            dealt += 1
    return shards


def group_of(item: pytest.Item) -> tuple[str, str]:
    """(suite, category) of an evaluation item; an ordinary test is grouped by its file."""
    suite, problem = suite_of(getattr(item, "module", None)), problem_of(item)
    if suite is None or problem is None:
        return ("", item.nodeid.split("::")[0])
    return (suite.name, str(suite.category_of(problem)))


def install(config: pytest.Config, settings: Settings) -> None:
    """Checks the options (a usage error before anything starts) and, for a sharded run,
    registers the plugin that deselects the other shards' items."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get(WORKERINPUT_KEY):
        index, count = workerinput[WORKERINPUT_KEY]  # as the controller read its environment
    else:
        shard = parse_shard(settings.shard, settings.shard_count, os.environ)
        if shard is None:
            return
        index, count = shard
    if settings.bfcl_progressive is not None:
        raise pytest.UsageError(
            "--bfcl-progressive decides each stage from the whole previous one: "
            "run it without --agenteval-shard"
        )
    config.stash[SHARD] = ShardState(index, count)
    config.pluginmanager.register(ShardSelection(config.stash[SHARD]), "agenteval-shards")


class ShardSelection:
    def __init__(self, state: ShardState) -> None:
        self.state = state

    # outermost, registered after pytest's own: runs once -k, -m, --lf and --limit have deselected
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> Iterator[None]:
        result = yield
        state = self.state
        if len(items) < state.count:
            if hasattr(config, "workerinput"):  # the controller says it, when it hears of no items
                config.hook.pytest_deselected(items=list(items))
                items[:] = []
                return result
            raise pytest.UsageError(self.too_few())
        shards = assign([group_of(item) for item in items], state.count)
        state.selected, state.selection = len(items), selection_hash(item.nodeid for item in items)
        kept = [item for item, shard in zip(items, shards, strict=True) if shard == state.index]
        dropped = [item for item, shard in zip(items, shards, strict=True) if shard != state.index]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
        return result

    def too_few(self) -> str:
        count = self.state.count
        return (
            f"--agenteval-shard {self.state.index}/{count}: fewer items are selected than the {count} "
            "shards; use at most as many shards as selected items"
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        if not ids:  # a worker found fewer items than shards (or none were selected)
            raise pytest.UsageError(self.too_few())

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = (self.state.index, self.state.count)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        selection = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        if selection and self.state.selection is None:
            self.state.selected, self.state.selection = selection

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None and self.state.selection is not None:
            workeroutput[WORKEROUTPUT_KEY] = (self.state.selected, self.state.selection)
