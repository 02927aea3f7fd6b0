"""The presets of `--agenteval-preset NAME`: published evaluation protocols as named bundles
of option defaults. A preset's value replaces the table's default of an option the user did
not set; an option set on the command line or in the ini file wins over it (`build_settings`).
Like the table's defaults, a preset's values are not `Settings.explicit`: a suite with its own
default (BFCL and GAIA: N 1, their own temperature) keeps it, so `N 64 for AIME` stays AIME's.
Each preset names the published numbers it should reproduce and where they were published
(docs/presets.md gives the interval to expect)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

QWEN3_REPORT = "Qwen3 Technical Report (arXiv 2505.09388)"


@dataclass(frozen=True)
class Published:
    """One published number a preset should reproduce: `value` of `metric` (a summary
    field, a fraction) for `model` on `suite`, and where it was published."""

    model: str
    value: float
    source: str
    suite: str = "aime25"
    metric: str = "average_at_n"
    samples: int | None = 64  # generations per problem behind `value`; None: not stated


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    # Settings attribute -> value, typed as the attribute is (tests/core/test_presets.py
    # checks each against the table: the option exists and takes the value)
    values: Mapping[str, Any] = field(default_factory=dict)
    published: tuple[Published, ...] = ()


PRESETS: tuple[Preset, ...] = (
    Preset(
        "retool-lab",
        "the ReTool lab's protocol: today's defaults (retool mode, T 1.0, top-p 0.7, N 12); changes nothing",
    ),
    Preset(
        "qwen3-thinking",
        "Qwen3 thinking mode on AIME'25 as the Qwen3 report ran it: text-only, avg@64",
        {
            "mode": "text-only",
            "thinking": "on",
            "temperature": 0.6,
            "top_p": 0.95,
            "top_k": 20,
            "max_tokens": 38912,
            "val_n": 64,
        },
        (
            Published("Qwen/Qwen3-0.6B", 0.151, f"{QWEN3_REPORT}, Tables 17 and 19, §4"),
            Published("Qwen/Qwen3-1.7B", 0.368, f"{QWEN3_REPORT}, Tables 17 and 19, §4"),
            Published("Qwen/Qwen3-4B", 0.656, f"{QWEN3_REPORT}, Tables 17 and 19, §4"),
        ),
    ),
    Preset(
        "qwen3-nonthinking",
        "Qwen3 non-thinking mode on AIME'25 as the Qwen3 report ran it: text-only, avg@64",
        {
            "mode": "text-only",
            "thinking": "off",
            "temperature": 0.7,
            "top_p": 0.8,
            "top_k": 20,
            "presence_penalty": 1.5,
            "val_n": 64,
        },
        (
            Published("Qwen/Qwen3-0.6B", 0.026, f"{QWEN3_REPORT}, Tables 18 and 20"),
            Published("Qwen/Qwen3-1.7B", 0.098, f"{QWEN3_REPORT}, Tables 18 and 20"),
            Published("Qwen/Qwen3-4B", 0.191, f"{QWEN3_REPORT}, Tables 18 and 20"),
        ),
    ),
    Preset(
        "deepseek-r1",
        "DeepSeek-R1's recommended sampling on AIME'25: thinking on, T 0.6, top-p 0.95, 32,768 tokens, "
        "text-only, avg@64",
        {
            "mode": "text-only",
            "thinking": "on",
            "temperature": 0.6,
            "top_p": 0.95,
            "max_tokens": 32768,
            "val_n": 64,
        },
        (
            Published(
                "deepseek-ai/DeepSeek-R1-0528-Qwen3-8B",
                0.763,
                "reported; reproduced as 0.766 by lm-evaluation-harness --repeats 32 "
                "(EleutherAI/lm-evaluation-harness PR #3351)",
                samples=None,  # the reported number's N is not in our sources
            ),
        ),
    ),
)

BY_NAME: Mapping[str, Preset] = {preset.name: preset for preset in PRESETS}


class PresetName:
    """The type of --agenteval-preset: the name of one of `PRESETS`."""

    __name__ = "preset name"  # what the options reference shows as its type
    annotation = str

    def __call__(self, raw: str) -> str:
        name = raw.strip()
        if name not in BY_NAME:
            raise ValueError(f"a preset: choose one of {', '.join(BY_NAME)} (docs/presets.md)")
        return name


def published_for(name: str, model: str) -> Published | None:
    """The published number of preset `name` for `model` (a hub id, or a folder named as the
    hub id's last part, case aside); None where the preset publishes none for it."""
    wanted = model.rstrip("/").rsplit("/", 1)[-1].lower()
    for published in BY_NAME[name].published:
        if published.model == model or published.model.rsplit("/", 1)[-1].lower() == wanted:
            return published
    return None


def apply_preset(name: str | None, values: dict[str, Any], explicit: frozenset[str] | set[str]) -> None:
    """Put preset `name`'s values into `values` (Settings attribute -> value) for the
    options not in `explicit`."""
    if not name:
        return
    for dest, value in BY_NAME[name].values.items():
        if dest not in explicit:
            values[dest] = value


def preset_record(settings: Any, used: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The summary's `preset` field: the preset's name, the values it set, and the ones the
    user's explicit options overrode (with the value used instead); None without a preset.
    `used`: what the suite ran with (its sampling and N). A suite that keeps its own default
    where the user gave no option (BFCL's N 1 and 1024 tokens) lists it under `suite_kept`,
    not as a value the preset set."""
    if not settings.preset:
        return None
    preset = BY_NAME[settings.preset]
    given = {dest: value for dest, value in preset.values.items() if dest in settings.explicit}
    used = used or {}
    kept = {
        dest: used[dest]
        for dest, value in preset.values.items()
        if dest not in given and dest in used and used[dest] != value
    }
    record = {
        "name": preset.name,
        "set": {
            dest: value for dest, value in preset.values.items() if dest not in given and dest not in kept
        },
        "overridden": {dest: getattr(settings, dest) for dest in given},
    }
    if kept:
        record["suite_kept"] = kept
    return record


def preset_line(record: Mapping[str, Any]) -> str:
    """The summary's one terminal line of a preset: `qwen3-thinking: mode=text-only ...
    (overridden: val_n=4)`."""
    shown = " ".join(f"{k}={v}" for k, v in record.get("set", {}).items()) or "today's defaults"
    overridden = record.get("overridden") or {}
    if overridden:
        shown += " (overridden: " + " ".join(f"{k}={v}" for k, v in overridden.items()) + ")"
    kept = record.get("suite_kept") or {}
    if kept:
        shown += " (the suite's own: " + " ".join(f"{k}={v}" for k, v in kept.items()) + ")"
    return f"{record.get('name')}: {shown}"
