"""`python -m bench.ab OTHER_TREE [--runs N]`: this tree against another checkout, side by side.

For a change that must not make anything slower: each figure is measured in both trees,
alternating run by run in one process (the machine's load hits both alike), and printed as
medians and the ratio this/other. Figures: the crowded 64 × 8 plan's CPU (`plan()` in a fresh
interpreter), `check SEAT --gpu N` start-up CPU beside the fair floor (`import yaml` + one pydantic
model validated), and one `check --ledger` beside 1,000 active holds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CROWDED = """
import resource, time
from bench.bench_plan import synthetic_fleet
from placement.plan.planner import plan
catalogue, snapshots, adds = synthetic_fleet(64, 8, 300, 2000)
def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
start = cpu()
result = plan(catalogue, snapshots, adds, solver="cbc", time_limit=10.0)
print(cpu() - start, sum(v.passed for v in result.verdicts))
"""

FLOOR = """
import yaml
from pydantic import BaseModel
class M(BaseModel):
    a: int
M.model_validate({"a": 1})
"""

CHECK = [
    "-m", "placement", "check", "vllm-voices", "--gpu", "0", "--util", "0.11",
    "--catalogue", "seats/catalogue/fv-ml1.yaml",
    "--snapshot", "seats/catalogue/fv-ml1-before-voices.snapshot.json",
]  # fmt: skip

HOLDS = """
import tempfile
from pathlib import Path
from bench import bench_holds
with tempfile.TemporaryDirectory() as folder:
    db = bench_holds._ledger(Path(folder) / "l.sqlite", 1000)
    print(min(bench_holds._check_ms(db) for _ in range(3)) / 1000, 0)
"""


def _cpu_of(argv: list[str], tree: Path) -> float:
    """CPU seconds of one child interpreter running `argv` in `tree`."""
    before = os.times()
    subprocess.run(
        [sys.executable, *argv],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def _printed(code: str, tree: Path) -> tuple[float, int]:
    """(figure, count) a snippet prints, run in `tree`."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    figure, count = done.stdout.split()[-2:]
    return float(figure), int(count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("other", type=Path, help="the other checkout (e.g. main before the change)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    trees = {"this": ROOT, "other": args.other.resolve()}
    got: dict[tuple[str, str], list[float]] = {}
    placed: dict[str, int] = {}
    for _ in range(args.runs):
        for name, tree in trees.items():
            cpu, placed[name] = _printed(CROWDED, tree)
            runs = {
                "crowded 64×8 plan CPU s": cpu,
                "check start-up CPU s": _cpu_of(CHECK, tree),
                "fair floor CPU s": _cpu_of(["-c", FLOOR], tree),
                "check beside 1,000 holds s": _printed(HOLDS, tree)[0],
            }
            for figure, value in runs.items():
                got.setdefault((figure, name), []).append(value)
    print(f"| figure (medians of {args.runs}, alternated) | this | other | this / other |")
    print("|---|---|---|---|")
    for figure in dict.fromkeys(key[0] for key in got):
        this = statistics.median(got[(figure, "this")])
        other = statistics.median(got[(figure, "other")])
        print(f"| {figure} | {this:.3f} | {other:.3f} | {this / other:.2f} |")
    print(f"| crowded 64×8 seats placed | {placed['this']} | {placed['other']} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
