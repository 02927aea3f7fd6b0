"""The tree's conventions, checked on every module of the package:

- an underscore means only its package imports it: no module imports an underscore module
  of another package, or an underscore name defined in another package (a package's own
  subpackages count as inside it);
- a folder holds few enough modules to be read at a glance: at most 15 in `models/` and
  its subfolders, at most 20 elsewhere (`testing/` and `tasks/` are collections of
  servers and benchmarks, and exempt).

The checks read the source with `ast`, so imports inside functions count as well."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_agenteval"
MAX_MODULES = {"models": 15}
DEFAULT_MAX_MODULES = 20
EXEMPT = ("testing", "tasks")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(path: Path, package: Path) -> str:
    name = _module_name(path, package)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _inside(importer_package: str, owner: str) -> bool:
    return importer_package == owner or importer_package.startswith(owner + ".")


def private_imports(package: Path) -> list[str]:
    """'importer: what' for each import across a package boundary of an underscore
    module or name."""
    modules = {_module_name(p, package): p for p in package.rglob("*.py")}
    found = []
    for module, path in sorted(modules.items()):
        here = _package_of(path, package)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = []
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append((full, None) if full in modules else (base, alias.name))
            else:
                continue
            for target, name in targets:
                if not target.startswith(package.name):
                    continue
                parts = target.split(".")
                hidden = next((i for i, part in enumerate(parts) if _private(part)), None)
                if hidden is not None and not _inside(here, ".".join(parts[:hidden])):
                    found.append(f"{module}: {target}")
                elif hidden is None and name and _private(name):
                    owner = (
                        target
                        if modules.get(target, Path()).name == "__init__.py"
                        else target.rpartition(".")[0]
                    )
                    if not _inside(here, owner):
                        found.append(f"{module}: {target}.{name}")
    return found


def test_no_package_imports_another_packages_underscore_module_or_name() -> None:
    assert private_imports(PACKAGE) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from pkg.b._inner import x\n", ["pkg.a.mod: pkg.b._inner"]),
        ("from pkg.b import _inner\n", ["pkg.a.mod: pkg.b._inner"]),
        ("import pkg.b._inner\n", ["pkg.a.mod: pkg.b._inner"]),
        ("from pkg.b.public import _helper\n", ["pkg.a.mod: pkg.b.public._helper"]),
        ("def f():\n    from ..b._inner import x\n", ["pkg.a.mod: pkg.b._inner"]),
        ("from pkg.a._own import x\n", []),  # its own package's
        ("from pkg.b.public import helper\n", []),
        ("from pkg.b.public import __version__\n", []),
    ],
)
def test_the_check_finds_each_form_of_a_private_import(
    tmp_path: Path, source: str, expected: list[str]
) -> None:
    """The rule itself can fail: each spelling of a private import across packages is found."""
    package = tmp_path / "pkg"
    for folder in (package, package / "a", package / "b"):
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("")
    (package / "a" / "_own.py").write_text("x = 1\n")
    (package / "b" / "_inner.py").write_text("x = 1\n")
    (package / "b" / "public.py").write_text("_helper = helper = 1\n__version__ = '1'\n")
    (package / "a" / "mod.py").write_text(source)
    assert private_imports(package) == expected


def test_the_subpackages_of_a_package_may_import_its_underscore_modules(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "b" / "inner").mkdir(parents=True)
    for folder in (package, package / "b", package / "b" / "inner"):
        (folder / "__init__.py").write_text("")
    (package / "b" / "_guard.py").write_text("x = 1\n")
    (package / "b" / "inner" / "mod.py").write_text("from pkg.b import _guard\n")
    assert private_imports(package) == []


def test_no_folder_holds_more_modules_than_a_reader_can_take_in() -> None:
    crowded = {}
    for folder in sorted({p.parent for p in PACKAGE.rglob("*.py")}):
        relative = folder.relative_to(PACKAGE).as_posix()
        if relative.split("/")[0] in EXEMPT:
            continue
        limit = MAX_MODULES.get(relative.split("/")[0], DEFAULT_MAX_MODULES)
        count = len([p for p in folder.glob("*.py") if p.name != "__init__.py"])
        if count > limit:
            crowded[relative] = (count, limit)
    assert crowded == {}
