"""The one table of options, grouped by concept: each declared once, with its flag, default,
help and type. The ini key (the flag's own name), argparse, `Settings` and docs/options.md
are derived from it (see `option`, `options`, `settings`, `reference`). Each `pytest --help`
group lives in its own `_options_<group>.py`, its topics in order; the groups here in the
order --help and docs/options.md list them."""

from __future__ import annotations

from pytest_agenteval.config import (
    _options_cluster,
    _options_cost,
    _options_model,
    _options_output,
    _options_reasoning,
    _options_run,
    _options_sampling,
    _options_suites,
)
from pytest_agenteval.config.option import Option

OPTIONS: tuple[Option, ...] = (
    *_options_model.OPTIONS,
    *_options_sampling.OPTIONS,
    *_options_reasoning.OPTIONS,
    *_options_run.OPTIONS,
    *_options_output.OPTIONS,
    *_options_cost.OPTIONS,
    *_options_cluster.OPTIONS,
    *_options_suites.OPTIONS,
)
