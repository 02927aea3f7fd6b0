"""The split of the selected items into shards (`plugin/shards.py`): which shard each item
goes to, and what --agenteval-shard accepts, as tables."""

from __future__ import annotations

from collections import Counter

import pytest

from pytest_agenteval.plugin.shards import assign, parse_shard


@pytest.mark.parametrize(
    ("groups", "count", "expected"),
    [
        # one group: dealt round-robin
        (["a"] * 5, 2, [0, 1, 0, 1, 0]),
        # the counter runs on across groups: b starts where a stopped, so the sizes stay within 1
        (["a", "a", "a", "b", "b", "b"], 2, [0, 1, 0, 1, 0, 1]),
        (["a", "a", "a", "b", "b", "b"], 4, [0, 1, 2, 3, 0, 1]),
        # interleaved groups are dealt group by group, in order of first appearance
        (["a", "b", "a", "b", "a"], 2, [0, 1, 1, 0, 0]),
        # one shard holds everything
        (["a", "b", "c"], 1, [0, 0, 0]),
        # as many shards as items: one each
        (["x", "y", "x"], 3, [0, 2, 1]),
    ],
)
def test_items_are_dealt_round_robin_with_one_counter_across_groups(groups, count, expected) -> None:
    assert assign(groups, count) == expected


@pytest.mark.parametrize("count", [2, 3, 4, 7])
def test_every_group_and_every_shard_splits_within_one_item(count: int) -> None:
    # 13 BFCL-like categories of uneven sizes, interleaved as a collection would be
    sizes = [1, 2, 3, 5, 8, 13, 21, 4, 6, 9, 11, 2, 7]
    groups = [f"c{g}" for g, size in enumerate(sizes) for _ in range(size)]
    groups = groups[::2] + groups[1::2]
    shards = assign(groups, count)
    per_shard = Counter(shards)
    assert max(per_shard.values()) - min(per_shard.values()) <= 1
    assert sorted(per_shard) == list(range(count))
    for group in set(groups):
        split = Counter(s for g, s in zip(groups, shards, strict=True) if g == group)
        counts = [split.get(i, 0) for i in range(count)]
        assert max(counts) - min(counts) <= 1, (group, counts)


def test_the_split_is_the_same_every_time() -> None:
    groups = [f"c{i % 5}" for i in range(101)]
    assert assign(groups, 4) == assign(list(groups), 4)


@pytest.mark.parametrize(
    ("value", "count", "environ", "expected"),
    [
        (None, 0, {}, None),
        ("0/1", 0, {}, (0, 1)),
        ("3/4", 0, {}, (3, 4)),
        (" 1 / 2 ", 0, {}, (1, 2)),
        ("auto", 0, {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4"}, (2, 4)),
        # an array --array=5-8: index = ID - MIN
        (
            "auto",
            0,
            {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "5"},
            (2, 4),
        ),
        ("auto", 3, {"JOB_COMPLETION_INDEX": "2"}, (2, 3)),
        # SLURM first where both are set (a SLURM job inside a pod; no count: k8s would refuse)
        (
            "auto",
            0,
            {"JOB_COMPLETION_INDEX": "0", "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"},
            (1, 2),
        ),
        # --array=0-6:2: IDs 0, 2, 4, 6, index = (ID - MIN) / STEP
        *(
            (
                "auto",
                0,
                {
                    "SLURM_ARRAY_TASK_ID": str(task),
                    "SLURM_ARRAY_TASK_COUNT": "4",
                    "SLURM_ARRAY_TASK_MIN": "0",
                    "SLURM_ARRAY_TASK_STEP": "2",
                },
                (task // 2, 4),
            )
            for task in (0, 2, 4, 6)
        ),
        # --array=3-12:3: IDs 3, 6, 9, 12
        (
            "auto",
            0,
            {
                "SLURM_ARRAY_TASK_ID": "9",
                "SLURM_ARRAY_TASK_COUNT": "4",
                "SLURM_ARRAY_TASK_MIN": "3",
                "SLURM_ARRAY_TASK_STEP": "3",
            },
            (2, 4),
        ),
        # a resubmitted index (sbatch --array=2) with the count named: the ID of N
        (
            "auto",
            4,
            {
                "SLURM_ARRAY_TASK_ID": "2",
                "SLURM_ARRAY_TASK_COUNT": "1",
                "SLURM_ARRAY_TASK_MIN": "2",
                "SLURM_ARRAY_TASK_MAX": "2",
            },
            (2, 4),
        ),
        ("auto", 4, {"SLURM_ARRAY_TASK_ID": "3"}, (3, 4)),
    ],
)
def test_the_shard_is_read_from_the_option_or_the_scheduler(value, count, environ, expected) -> None:
    assert parse_shard(value, count, environ) == expected


@pytest.mark.parametrize(
    ("value", "count", "environ", "message"),
    [
        ("3/2", 0, {}, "--agenteval-shard 3/2: shard 3 of 2 does not exist; shards are numbered 0 to 1"),
        ("0/0", 0, {}, "--agenteval-shard 0/0: the shard count must be at least 1"),
        ("x", 0, {}, "--agenteval-shard 'x': expected I/N (shard I of N, 0 <= I < N, e.g. 0/4) or auto"),
        (
            "1/2/3",
            0,
            {},
            "--agenteval-shard '1/2/3': expected I/N (shard I of N, 0 <= I < N, e.g. 0/4) or auto",
        ),
        (
            "auto",
            0,
            {},
            "--agenteval-shard auto: no scheduler found: looked for SLURM_ARRAY_TASK_ID and "
            "SLURM_ARRAY_TASK_COUNT (a SLURM array) and JOB_COMPLETION_INDEX (a Kubernetes Indexed Job); "
            "pass --agenteval-shard I/N outside them",
        ),
        (
            "auto",
            0,
            {"JOB_COMPLETION_INDEX": "1"},
            "--agenteval-shard auto: JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but the count "
            "is not: add --agenteval-shard-count N (the Job's completions)",
        ),
        (
            "auto",
            2,
            {"JOB_COMPLETION_INDEX": "2"},
            "--agenteval-shard auto (JOB_COMPLETION_INDEX): shard 2 of 2 does not exist; "
            "shards are numbered 0 to 1",
        ),
        (
            "auto",
            0,
            {"SLURM_ARRAY_TASK_ID": "3"},
            "--agenteval-shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not; "
            "add --agenteval-shard-count N, or pass --agenteval-shard I/N",
        ),
        (
            "auto",
            0,
            {"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "2"},
            "--agenteval-shard auto: SLURM_ARRAY_TASK_ID='x' is not a number",
        ),
        (
            None,
            4,
            {},
            "--agenteval-shard-count is the N of --agenteval-shard auto (a Kubernetes Indexed Job, or a "
            "SLURM array task resubmitted alone); add --agenteval-shard auto, or drop it",
        ),
        (
            "auto",
            0,
            {
                "SLURM_ARRAY_TASK_ID": "5",
                "SLURM_ARRAY_TASK_COUNT": "4",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_STEP": "2",
            },
            "--agenteval-shard auto (SLURM array): SLURM_ARRAY_TASK_ID 5 is not SLURM_ARRAY_TASK_MIN 0 "
            "plus a multiple of SLURM_ARRAY_TASK_STEP 2 (the index is (ID - MIN) / STEP); pass "
            "--agenteval-shard I/N",
        ),
        (
            "auto",
            0,
            {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4"},
            "--agenteval-shard auto (SLURM array: (ID - MIN) / STEP of COUNT): shard 4 of 4 does not "
            "exist; shards are numbered 0 to 3",
        ),
        (
            "auto",
            4,
            {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "1"},
            "--agenteval-shard auto (SLURM_ARRAY_TASK_ID of --agenteval-shard-count): shard 4 of 4 does not "
            "exist; shards are numbered 0 to 3",
        ),
        (
            "1/4",
            4,
            {},
            "--agenteval-shard 1/4: --agenteval-shard-count is for --agenteval-shard auto only; drop it",
        ),
    ],
)
def test_a_bad_shard_is_one_line_naming_the_fix(value, count, environ, message) -> None:
    with pytest.raises(pytest.UsageError) as raised:
        parse_shard(value, count, environ)
    assert str(raised.value) == message
