"""Benchmarks for `make bench`: each `bench_*.py` module has `run() -> str`, a Markdown section.

`python -m bench` runs them, prints each section and keeps the latest in out/bench/bench.md
(untracked), or in docs/bench.md with `--refresh-docs` (`make bench REFRESH_DOCS=1`).
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

QUICK_ENV = "GPUPLAN_BENCH_QUICK"
OUT_ENV = "GPUPLAN_BENCH_OUT"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "out" / "bench"  # out/ is ignored by git: a bench run leaves the tree clean


def quick() -> bool:
    """True under `python -m bench --quick`: modules skip their slowest parts (and say so)."""
    return os.environ.get(QUICK_ENV) == "1"


def output_dir() -> Path:
    """Where this run writes bench.md and its figures: out/bench/, or docs/ when refreshing them."""
    return Path(os.environ.get(OUT_ENV) or DEFAULT_OUT)


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def cpu_s() -> float:
    """CPU seconds of this process and its finished children (CBC and the CLI run as children):
    what the machine's load moves least."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime + children_cpu_s()
