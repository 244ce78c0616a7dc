"""Benchmarks for `make bench`: each `bench_*.py` module has `run() -> str`, a Markdown section.

`python -m bench` runs them, prints each section and keeps the latest in docs/bench.md.
"""

from __future__ import annotations

import os

QUICK_ENV = "GPUPLAN_BENCH_QUICK"


def quick() -> bool:
    """True under `python -m bench --quick`: modules skip their slowest parts (and say so)."""
    return os.environ.get(QUICK_ENV) == "1"
