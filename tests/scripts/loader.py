"""scripts/layout_report.py as a module, for the tests that read the import graph with it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def layout_report() -> ModuleType:
    """Load scripts/layout_report.py once (scripts/ is not a package)."""
    if "layout_report" in sys.modules:
        return sys.modules["layout_report"]
    spec = importlib.util.spec_from_file_location(
        "layout_report", ROOT / "scripts" / "layout_report.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["layout_report"] = module
    spec.loader.exec_module(module)
    return module
