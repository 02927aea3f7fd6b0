"""The module paths of release 0.1 still import for one release: the same module objects as
the new paths, each with one DeprecationWarning that names the new path."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_agenteval._moved import new_path


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("pytest_agenteval.aime25", "pytest_agenteval.tasks.aime25"),
        ("pytest_agenteval.bfcl._checker", "pytest_agenteval.tasks.bfcl._checker"),
        ("pytest_agenteval.datagen.review", "pytest_agenteval.report.review"),
        ("pytest_agenteval.datagen._judge", "pytest_agenteval.tasks.datagen._judge"),
        ("pytest_agenteval.samplers._base", "pytest_agenteval.api.sampler"),
        ("pytest_agenteval.samplers._openai", "pytest_agenteval.models._openai"),
        ("pytest_agenteval.serving.launcher", "pytest_agenteval.models.serve.launcher"),
        ("pytest_agenteval.reporting", "pytest_agenteval.report"),
        ("pytest_agenteval.data", "pytest_agenteval.datasets.tabular"),
        ("pytest_agenteval.datagen", "pytest_agenteval.tasks.datagen"),
        ("pytest_agenteval.tasks.aime25", None),
        ("pytest_agenteval.report", None),
        ("pytest_agenteval.scorers", None),
        ("pytest_agenteval_other.aime25", None),
    ],
)
def test_old_paths_map_to_new_ones(old: str, new: str | None) -> None:
    assert new_path(old) == new


SCRIPT = """
import warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    from pytest_agenteval.aime25 import Aime25
    import pytest_agenteval.bfcl._checker as old_checker
    from pytest_agenteval.samplers import SamplingParams
from pytest_agenteval.tasks.aime25 import Aime25 as New
import pytest_agenteval.tasks.bfcl._checker as new_checker
from pytest_agenteval.api.sampler import SamplingParams as NewParams
import sys
print(Aime25 is New, old_checker is new_checker, SamplingParams is NewParams)
print(sys.modules["pytest_agenteval.tasks.aime25"].__spec__.name)
for w in caught:
    print(w.category.__name__, w.message)
"""


def test_old_imports_give_the_new_objects_and_warn_naming_the_new_path() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "True True True"
    assert lines[1] == "pytest_agenteval.tasks.aime25"  # the real module keeps its own spec
    assert lines[2:] == [
        "DeprecationWarning pytest_agenteval.aime25 moved to pytest_agenteval.tasks.aime25; "
        "the old path goes in the next release",
        "DeprecationWarning pytest_agenteval.bfcl moved to pytest_agenteval.tasks.bfcl; "
        "the old path goes in the next release",
        "DeprecationWarning pytest_agenteval.bfcl._checker moved to pytest_agenteval.tasks.bfcl._checker; "
        "the old path goes in the next release",
        "DeprecationWarning pytest_agenteval.samplers moved to pytest_agenteval.models; "
        "the old path goes in the next release",
    ]
