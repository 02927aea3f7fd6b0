"""The architecture as written down matches the tree: docs/design.md names every package
once and in the order of the import-linter layers, no module outgrows 500 lines without saying why, and a
contract breaks when a lower layer imports a higher one."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_agenteval"
ROW = re.compile(r"^\| `(?P<name>[a-z_0-9/]+)` \| (?P<layer>\d+)")


def documented() -> list[tuple[str, int]]:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    return [(m["name"], int(m["layer"])) for line in text.splitlines() if (m := ROW.match(line))]


def packages_in_tree() -> set[str]:
    """Every package under pytest_agenteval (two levels), and the top-level public modules."""
    names = {p.parent.relative_to(PACKAGE).as_posix() + "/" for p in PACKAGE.glob("*/__init__.py")}
    names |= {p.parent.relative_to(PACKAGE).as_posix() + "/" for p in PACKAGE.glob("*/*/__init__.py")}
    names |= {p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_")}
    return names


def layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


def test_the_design_doc_names_every_package_once() -> None:
    names = [name for name, _ in documented()]
    assert len(names) == len(set(names))
    assert set(names) == packages_in_tree()


def test_the_design_doc_gives_each_package_its_import_linter_layer() -> None:
    expected = {name: index for index, layer in enumerate(layers(), 1) for name in layer}
    for name, layer in documented():
        top = name.split("/")[0]
        assert layer == expected[top], name


LONG_MODULE_REASON = re.compile(r"^# One concept, over 500 lines: \S.*")


def test_no_module_is_over_500_lines_unless_its_first_line_says_why() -> None:
    """A module over 500 lines is allowed where its concept is one: its first line is a
    comment `# One concept, over 500 lines: <why>`."""
    long = {
        path.relative_to(ROOT).as_posix(): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(lines := path.read_text(encoding="utf-8").splitlines())) > 500
        and not LONG_MODULE_REASON.match(lines[0])
    }
    assert long == {}


@pytest.mark.parametrize(
    ("module", "upward", "broken"),
    [
        (
            "api/records.py",
            "import pytest_agenteval.models",
            "The public contract (api) imports only stats",
        ),
        (
            "stats/bootstrap.py",
            "import pytest_agenteval.api.records",
            "The statistics (stats) import nothing else of ours",
        ),
        (
            "models/http/retry.py",
            "import pytest_agenteval.plugin.hooks",
            "Nothing below the pytest glue imports it",
        ),
        ("stats/paired.py", "from pytest_agenteval.output import gate", "Layers"),
    ],
)
def test_an_upward_import_breaks_a_contract(tmp_path: Path, module: str, upward: str, broken: str) -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint is not None, "lint-imports is part of the dev extra: pip install -e '.[dev]'"
    shutil.copytree(PACKAGE, tmp_path / "pytest_agenteval", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    target = tmp_path / "pytest_agenteval" / module
    target.write_text(
        target.read_text(encoding="utf-8") + f"\n\ndef _upward():\n    {upward}\n", encoding="utf-8"
    )
    env = {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(tmp_path)}
    result = subprocess.run([lint, "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 1, result.stdout[-2000:]
    kept_or_broken = {
        line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1]
        for line in result.stdout.splitlines()
        if line.endswith((" KEPT", " BROKEN"))
    }
    assert [
        name for name, verdict in kept_or_broken.items() if verdict == "BROKEN" and name.startswith(broken)
    ]


def test_the_tree_keeps_every_contract() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint is not None, "lint-imports is part of the dev extra: pip install -e '.[dev]'"
    result = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "BROKEN" not in result.stdout


FEATURE_ROW = re.compile(
    r"^\| (?P<feature>[^|`][^|]*) \| (?P<code>[^|]*`[^|]*) \| (?P<options>[^|]*) "
    r"\| (?P<tests>[^|]*) \| (?P<docs>[^|]*) \|$"
)
FEATURES = (
    "cost",
    "budgets",
    "batch",
    "AIMD",
    "sweeps",
    "shards and merge",
    "reasoning",
    "presets",
    "launched servers",
    "the sandbox",
    "gates with a confidence",
    "the generation cache",
    "the installed product",
    "trackers",
)


def feature_map() -> dict[str, dict[str, list[str]]]:
    """The feature table of docs/design.md: feature -> column -> the paths it names."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("## Where each feature lives", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if (m := FEATURE_ROW.match(line)) and m["feature"] != "feature":
            rows[m["feature"].split(" (")[0]] = {
                "code": re.findall(r"`([^`]+)`", m["code"]),
                "options": re.findall(r"`([^`]+)`", m["options"]),
                "tests": re.findall(r"`([^`]+)`", m["tests"]),
                "docs": re.findall(r"\]\(([^)#]+)", m["docs"]),
            }
    return rows


def test_the_feature_map_lists_each_feature() -> None:
    assert tuple(feature_map()) == FEATURES


def test_every_file_the_feature_map_names_exists() -> None:
    missing = []
    for feature, columns in feature_map().items():
        assert all(columns.values()), f"{feature}: a column names nothing"
        paths = [PACKAGE / p for p in columns["code"] + columns["options"]]
        paths += [ROOT / p for p in columns["tests"]] + [ROOT / "docs" / p for p in columns["docs"]]
        missing += [f"{feature}: {p.relative_to(ROOT)}" for p in paths if not p.exists()]
    assert missing == []


def test_every_module_of_a_features_own_package_is_on_the_map() -> None:
    """The packages that hold one feature each have no module the map leaves out."""
    named = {p for columns in feature_map().values() for p in columns["code"]}
    for package in ("models/cost", "models/serve"):
        modules = {
            p.relative_to(PACKAGE).as_posix()
            for p in (PACKAGE / package).glob("*.py")
            if p.name != "__init__.py"
        }
        assert modules - named == set(), package
