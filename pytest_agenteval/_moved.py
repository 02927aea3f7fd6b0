"""The module paths of release 0.1, before the packages were layered: `import
pytest_agenteval.aime25` (and every old path below) still works for one release and warns
once where it is used, naming the new path."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import ModuleType

# old dotted path (under pytest_agenteval) -> new one; a submodule follows its package
MOVED = {
    "aime25": "tasks.aime25",
    "bfcl": "tasks.bfcl",
    "gaia": "tasks.gaia",
    "datagen.review": "report.review",
    "datagen._review_page": "report._review_page",
    "datagen": "tasks.datagen",
    "registry": "tasks.registry",
    "markers": "tasks.markers",
    "suite": "api.suite",
    "records": "api.records",
    "samplers._base": "api.sampler",
    "samplers": "models",
    "serving": "models.serve",
    "cache": "models.cache",
    "options": "config.options",
    "data": "datasets.tabular",
    "hub": "datasets.hub",
    "tool_loop": "solvers.tool_loop",
    "metrics": "api.metrics",
    "reporting": "report",
    "results": "output.results",
    "gate": "output.gate",
    "compare": "output.compare",
    "spool": "output.spool",
    "ci": "output.ci",
    "engine": "run.engine",
    "runtime": "run.runtime",
    "controller": "plugin.controller",
    "items": "plugin.items",
    "progress": "plugin.progress",
    "hosts": "plugin.hosts",
    "stealing": "plugin.stealing",
    "steal_scheduler": "plugin.steal_scheduler",
}
# Not aliased: `pytest_agenteval.report` was the terminal summary (now output.terminal) and is
# now the `pytest-agenteval report` package; `pytest_agenteval.plugin` is now the pytest glue
# package (its hooks are plugin.hooks; load the plugin by name with `-p agenteval`).
PREFIX = "pytest_agenteval."


def new_path(old: str) -> str | None:
    """The new dotted path of an old one, or None where the name did not move."""
    if not old.startswith(PREFIX):
        return None
    rest = old[len(PREFIX) :]
    for before in sorted(MOVED, key=len, reverse=True):
        if rest == before or rest.startswith(before + "."):
            return PREFIX + MOVED[before] + rest[len(before) :]
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.target}; the old path goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(self.target)
        self.spec = module.__spec__  # the import system sets the alias's spec on it next
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec  # the new module is already executed: keep its own spec


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths only; every other import goes on to the usual finders."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        target_name = new_path(name)
        if target_name is None:
            return None
        return importlib.util.spec_from_loader(name, _Alias(target_name))


def install() -> None:
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        # first: under an old package's alias, the path finder would load a second copy of a
        # submodule (pytest_agenteval.bfcl._checker beside pytest_agenteval.tasks.bfcl._checker)
        sys.meta_path.insert(0, MovedFinder())
