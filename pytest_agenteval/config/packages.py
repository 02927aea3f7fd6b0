"""Whether an optional package (an extra of ours: a backend, a tracker) is installed, without
importing it: some take seconds to import (mlflow, torch)."""

from __future__ import annotations

import importlib.util


def installed(module: str | None) -> bool:
    """Whether `import module` would find it (None: nothing needed, True); a name set to None
    in sys.modules is not importable."""
    if module is None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
