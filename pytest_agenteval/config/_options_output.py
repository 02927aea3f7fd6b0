"""Output and gates: the results file, the threshold gates, the baseline comparison and
the progress line (part of the one table: `table.py`)."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, group, topic


def share(text: str) -> float:
    """A share of generations: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise ValueError("a share of the generations: give a number from 0 to 1, e.g. 0.1")
    return value


share.annotation = float  # type: ignore[attr-defined]  # the Settings attribute


def level(text: str) -> float:
    """A confidence: a number strictly between 0 and 1 (or a percentage)."""
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        value = -1.0
    if not 0.0 < value < 1.0:
        raise ValueError("a confidence: give a number between 0 and 1, e.g. 0.95 (or 95%)")
    return value


level.annotation = float  # type: ignore[attr-defined]  # the Settings attribute (None: unset)


OPTIONS: tuple[Option, ...] = group(
    "output and gates",
    *topic(
        "Results, gates and baselines",
        Option(
            "out",
            "--agenteval-out",
            None,
            "results JSONL (default: agenteval-results/<suite>-<model>-<time>-<pid>.jsonl)",
            local=True,
        ),
        Option(
            "gates",
            "--agenteval-gate",
            (),
            'threshold gate, e.g. "aime25.average_at_n >= '
            "0.30\" (repeatable; with a gate the exit status is the gate's)",
            multiple=True,
            local=True,
        ),
        Option(
            "gate_confidence",
            "--agenteval-gate-confidence",
            None,
            "decide every threshold gate by an interval at this confidence, e.g. 0.95: PASS when it "
            "lies wholly on the gate's side, FAIL when wholly on the other, UNDECIDED (exit 1) otherwise; "
            'a gate\'s own "@ 0.9" wins (without either: a point comparison)',
            level,
            local=True,
        ),
        Option(
            "sequential",
            "--agenteval-sequential",
            False,
            "draw generations one at a time (a problem at random, its next sample) and stop as soon "
            "as every gate is decided by its anytime-valid interval; every gate needs a level "
            '("@ 0.95" or --agenteval-gate-confidence); the budget is N x problems draws; a sweep\'s '
            "paired gate draws the same (problem, sample) for both models",
            bool,
        ),
        Option(
            "compare",
            "--agenteval-compare",
            None,
            "baseline results JSONL: fail on a significant drop (paired bootstrap over shared problems)",
            local=True,
        ),
        Option(
            "compare_tolerance",
            "--agenteval-compare-tolerance",
            0.0,
            "drop in a headline metric tolerated before the baseline comparison fails",
            float,
            local=True,
        ),
        Option(
            "allow_version_change",
            "--agenteval-allow-version-change",
            False,
            "compare with a baseline of another suite version (its prompt, scorer or metrics "
            "changed); refused without it, and said at start-up with it",
            bool,
            local=True,
        ),
        Option(
            "length_warn_share",
            "--length-warn-share",
            0.1,
            "warn in the summary when more than this share of a suite's generations hit max_tokens "
            "(the budget, not the model, decided the score)",
            share,
            local=True,
        ),
        Option(
            "progress",
            "--agenteval-progress",
            "auto",
            "live progress line: auto (redrawn in place on a terminal, a line every 30 s otherwise), "
            "off, or SECONDS between lines (also off with -q -q)",
            local=True,
        ),
    ),
    *topic(
        "Experiment trackers",
        Option(
            "log_targets",
            "--agenteval-log",
            (),
            "log the summary metrics, the reproducibility record and the results files to a tracker "
            "at the end, from the controller (repeatable): mlflow:[URI][?experiment=NAME&run_id=ID], "
            "wandb:PROJECT[/RUN_ID] or swanlab:PROJECT[/EXPERIMENT]; a sweep's models at their "
            "training steps (docs/trackers.md)",
            multiple=True,
            local=True,
            redact=True,
        ),
        Option(
            "log_always",
            "--agenteval-log-always",
            False,
            "log again what a results file's marker says was already logged with the same numbers "
            "(a rerun from the cache)",
            bool,
            local=True,
        ),
    ),
)
