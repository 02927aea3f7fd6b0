"""Planning a sweep's servers (pure): grouping adapters beside their base, device sets,
waves, and the schedule that stops a server once its models are done."""

from __future__ import annotations

import pytest

from pytest_agenteval.models.serve.sweep_plan import (
    PlannedModel,
    PlannedServer,
    SweepSchedule,
    plan_servers,
)

THREE = [("/ck/step-100", ("step-100",)), ("/ck/step-200", ("step-200",)), ("/ck/step-300", ("step-300",))]
CKPT = [PlannedModel(f"step-{n}", "checkpoint", f"/ck/step-{n}") for n in (100, 200, 300)]
BASE = PlannedModel("base", "checkpoint", "/base")
LORAS = [PlannedModel(f"lora-{n}", "adapter", f"/lora/step-{n}", base="/base") for n in (1, 2, 3)]
GGUF = PlannedModel("smol", "gguf", "/m/smol.gguf")
GGUF_LORA = PlannedModel("smol-lora", "adapter", "/m/lora.gguf", base="/m/smol.gguf")
OTHER_GGUF = PlannedModel("copy", "gguf", "/m/copy.gguf")


@pytest.mark.parametrize(
    ("models", "gpus", "tp", "max_servers", "servers", "slots", "waves"),
    [
        pytest.param(
            CKPT, "0-7", 1, 0,
            THREE,
            ("0", "1", "2"), [(0, 1, 2)],
            id="8 GPUs tp 1, three checkpoints: three servers at once",
        ),
        pytest.param(
            CKPT, "0-1", 2, 0,
            THREE,
            ("0,1",), [(0,), (1,), (2,)],
            id="2 GPUs tp 2, three checkpoints: one after another",
        ),
        pytest.param(
            [BASE, *LORAS], "0-7", 2, 0,
            [("/base", ("base", "lora-1", "lora-2", "lora-3"))],
            ("0,1",), [(0,)],
            id="base + 3 adapters: one server",
        ),
        pytest.param(
            LORAS, "0-3", 1, 0,
            [("/base", ("lora-1", "lora-2", "lora-3"))],
            ("0",), [(0,)],
            id="adapters without their base in the sweep: still one server",
        ),
        pytest.param(
            [CKPT[0], *LORAS[:2], BASE, CKPT[1]], "0-3", 2, 0,
            [("/ck/step-100", ("step-100",)), ("/base", ("lora-1", "lora-2", "base")),
             ("/ck/step-200", ("step-200",))],
            ("0,1", "2,3"), [(0, 1), (2,)],
            id="mixed: 4 GPUs tp 2, two at a time, in model order",
        ),
        pytest.param(
            CKPT, "0-7", 1, 2,
            THREE,
            ("0", "1"), [(0, 1), (2,)],
            id="--serve-max-servers 2 caps what the GPUs allow",
        ),
        pytest.param(
            [GGUF, GGUF_LORA, OTHER_GGUF], None, 1, 0,
            [("/m/smol.gguf", ("smol", "smol-lora")), ("/m/copy.gguf", ("copy",))],
            (None, None), [(0, 1)],
            id="CPU: as many at once as there are servers",
        ),
        pytest.param(
            [GGUF, GGUF_LORA, OTHER_GGUF], None, 1, 1,
            [("/m/smol.gguf", ("smol", "smol-lora")), ("/m/copy.gguf", ("copy",))],
            (None,), [(0,), (1,)],
            id="CPU with --serve-max-servers 1: waves",
        ),
    ],
)  # fmt: skip
def test_plan(models, gpus, tp, max_servers, servers, slots, waves) -> None:
    plan = plan_servers(models, gpus, tp, max_servers)
    assert [(s.base, s.labels) for s in plan.servers] == servers
    assert plan.slots == slots
    assert plan.waves() == waves


def test_the_adapters_of_a_server_are_named() -> None:
    plan = plan_servers([BASE, *LORAS], None, 1)
    assert plan.servers == (
        PlannedServer("/base", ("base", "lora-1", "lora-2", "lora-3"), ("lora-1", "lora-2", "lora-3")),
    )


@pytest.mark.parametrize(
    ("gpus", "tp", "max_servers", "message"),
    [
        ("0-2", 2, 0, "--serve-gpus 0-2 has 3 devices, not a multiple of --serve-tp 2; "
                      "give a multiple or change --serve-tp"),
        (None, 1, -1, "--serve-max-servers must be >= 0 (0: as many as the GPUs allow), got -1"),
    ],
)  # fmt: skip
def test_bad_device_options_are_one_line(gpus, tp, max_servers, message) -> None:
    with pytest.raises(ValueError) as caught:
        plan_servers(CKPT, gpus, tp, max_servers)
    assert str(caught.value) == message


def _drive(plan, counts, events):
    """Replays finished items; returns what happened: ('start', server, devices) / ('stop', server)."""
    schedule = SweepSchedule(plan)
    log = [("start", s, d) for s, d in schedule.start_next()]
    log += [("stop", s) for s in schedule.expect(counts)]
    log += [("start", s, d) for s, d in schedule.start_next()]
    for label in events:
        log += [("stop", s) for s in schedule.finished(label)]
        log += [("start", s, d) for s, d in schedule.start_next()]
    return log


@pytest.mark.parametrize(
    ("models", "gpus", "tp", "counts", "events", "expected"),
    [
        pytest.param(
            CKPT, "0-1", 2, {"step-100": 2, "step-200": 1, "step-300": 1},
            ["step-100", "step-100", "step-200", "step-300"],
            [("start", 0, "0,1"), ("stop", 0), ("start", 1, "0,1"), ("stop", 1),
             ("start", 2, "0,1"), ("stop", 2)],
            id="one slot: each server stops after its last item and the next starts on its devices",
        ),
        pytest.param(
            CKPT, "0-1", 1, {"step-100": 2, "step-200": 1, "step-300": 1},
            ["step-200", "step-100", "step-300", "step-100"],
            [("start", 0, "0"), ("start", 1, "1"), ("stop", 1), ("start", 2, "1"), ("stop", 2), ("stop", 0)],
            id="two slots: the first slot freed takes the next server",
        ),
        pytest.param(
            [BASE, *LORAS[:1], OTHER_GGUF], None, 1, {"base": 1, "lora-1": 1, "copy": 1},
            ["base", "copy", "lora-1"],
            [("start", 0, None), ("start", 1, None), ("stop", 1), ("stop", 0)],
            id="a server serving base and adapter stops only when both are done",
        ),
        pytest.param(
            CKPT, "0", 1, {"step-100": 0, "step-200": 1, "step-300": 0},
            ["step-200"],
            [("start", 0, "0"), ("stop", 0), ("start", 1, "0"), ("stop", 1)],
            id="models without items (deselected): their servers stop at once or never start",
        ),
    ],
)  # fmt: skip
def test_schedule(models, gpus, tp, counts, events, expected) -> None:
    assert _drive(plan_servers(models, gpus, tp), counts, events) == expected


def test_a_server_that_failed_to_start_frees_its_slot_for_the_next() -> None:
    schedule = SweepSchedule(plan_servers(CKPT, "0", 1))
    assert schedule.start_next() == [(0, "0")]
    schedule.failed(0)
    assert schedule.start_next() == [(1, "0")]
