"""The seed lab's own functions, as the oracle of the parity tests. They are read from
`../shared/seeds/lab-05-retool/` beside the checkout (CI has it), or from the folder
AGENTEVAL_LAB_DIR names (a checkout elsewhere, a git worktree). Without it the tests that
need it skip, and fail under AGENTEVAL_CI=1 (tests/_oracle.py). eval.py and rollout.py
import pytrio at the top, which is not installable here, so only the functions the tests
need are compiled from those files' source, with the names they use."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from tests._oracle import require_oracle

LAB = Path(
    os.environ.get("AGENTEVAL_LAB_DIR")
    or Path(__file__).resolve().parents[2].parent / "shared" / "seeds" / "lab-05-retool"
)


def require_lab() -> Path:
    if not (LAB / "protocol.py").is_file():
        where = "shared/ beside the checkout, or set AGENTEVAL_LAB_DIR"
        require_oracle(f"the seed lab's code is not at {LAB} ({where})")
    return LAB


@cache
def module(name: str) -> ModuleType:
    """A lab file that imports only what is installed here (protocol, reward, sandbox)."""
    path = require_lab() / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"lab_{name}", path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = loaded
    spec.loader.exec_module(loaded)
    return loaded


def functions(name: str, wanted: tuple[str, ...], **namespace: Any) -> dict[str, Any]:
    """Compile only the named top-level functions of a lab file."""
    tree = ast.parse((require_lab() / f"{name}.py").read_text(encoding="utf-8"))
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    missing = set(wanted) - {n.name for n in body}
    assert not missing, f"the lab's {name}.py has no {sorted(missing)}"
    scope: dict[str, Any] = {"re": re, "Any": Any, "__name__": f"lab_{name}", **namespace}
    exec(compile(ast.Module(body=body, type_ignores=[]), str(LAB / f"{name}.py"), "exec"), scope)
    return {key: scope[key] for key in wanted}
