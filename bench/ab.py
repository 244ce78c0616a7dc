"""`python -m bench.ab OTHER_TREE [--runs N]`: this tree against another checkout, side by side.

For a change that must not make anything slower: each figure is measured in both trees,
alternating run by run in one process (the machine's load hits both alike), and printed as
medians and the ratio this/other. Figures: the crowded 64 × 8 plan's CPU (`plan()` in a fresh
interpreter), `check SEAT --gpu N` start-up CPU beside the fair floor (`import yaml` + one pydantic
model validated), and one `check --ledger` beside 1,000 active holds.

`--crowded`: instead, issue 35's crowded fleets (`synthetic_fleet`: 256 × 8 cards with 1,200 seats
running and 8,000 new, `--runs` times each side; with `--big` also 1,024 × 8 with 4,800 and
32,000, once each side: a run takes minutes), `plan()` in a fresh interpreter per run: wall and CPU
seconds, peak memory (max RSS), the seats placed per priority against the level's bound, and the
phase timings of the last run.

`--daily`: instead, issue 35's daily fleets (`synthetic_fleet`: 1,024 × 8 cards with 4,800 seats
running and 200 new, 4,096 × 8 with 19,200 and 20), `plan()` in a fresh interpreter per run:
wall and CPU seconds and the process's peak memory (max RSS, the fleet's own data included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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

# One plan() of a daily fleet in a fresh interpreter: wall s, CPU s, peak bytes, seats placed.
DAILY = """
import json, resource, sys, time
from bench.bench_plan import synthetic_fleet
from placement.plan.planner import plan
catalogue, snapshots, adds = synthetic_fleet(*(int(a) for a in sys.argv[1:5]))
cpu, start = time.process_time(), time.perf_counter()
result = plan(catalogue, snapshots, adds, time_limit=10.0)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps([wall, cpu, peak, sum(v.passed for v in result.verdicts)]))
"""
# The same of a crowded fleet, with the placed / bound per priority and the phase timings.
CROWDED_FLEET = DAILY.replace(
    "sum(v.passed for v in result.verdicts)]",
    "sum(v.passed for v in result.verdicts), "
    "[[b.priority, b.placed, b.bound] for b in result.bounds], result.timings]",
)
CROWDED_FLEETS = [((256, 8, 1_200, 8_000), 5.0)]
BIG_FLEET = ((1_024, 8, 4_800, 32_000), 20.0)
DAILY_FLEETS = [((1_024, 8, 4_800, 200), 1.0), ((4_096, 8, 19_200, 20), 2.0)]

HOLDS = """
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
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


def _stdout(
    code: str, tree: Path, args: Sequence[object] = (), timeout: float | None = None
) -> str:
    """What a snippet prints, run in `tree` with `args` as its arguments."""
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )
    return done.stdout


def _printed(code: str, tree: Path) -> tuple[float, int]:
    """(figure, count) a snippet prints, run in `tree`."""
    figure, count = _stdout(code, tree).split()[-2:]
    return float(figure), int(count)


def _last_json(code: str, size: Sequence[int], tree: Path, timeout: float) -> Any:
    """The JSON of the last line a fleet's snippet prints, run in `tree` for `size`: the daily
    fleet's [wall s, CPU s, peak bytes, seats placed]; the crowded one's also [[priority, placed,
    bound]…] and its timings."""
    return json.loads(_stdout(code, tree, size, timeout).strip().splitlines()[-1])


def crowded(trees: dict[str, Path], runs: int, big: bool) -> list[str]:
    """The crowded fleets in both trees, alternating run by run: a Markdown table of medians."""
    fleets = [(size, target, runs) for size, target in CROWDED_FLEETS]
    if big:
        fleets.append((*BIG_FLEET, 1))
    lines = [
        "| fleet (runs, alternated) | this wall | other wall | this CPU | other CPU | target "
        "| met (CPU) | this peak | other peak | this: placed / bound per priority | other: placed |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---|---|",
    ]
    notes: list[str] = []
    for size, target, count in fleets:
        got: dict[str, list[list[Any]]] = {"this": [], "other": []}
        for _ in range(count):
            for name, tree in trees.items():
                got[name].append(_last_json(CROWDED_FLEET, size, tree, 900))
        this, other = (
            [statistics.median(run[k] for run in got[name]) for k in range(3)]
            for name in ("this", "other")
        )
        levels = "; ".join(f"p{p} {placed:,}/{bound:,}" for p, placed, bound in got["this"][-1][4])
        theirs = "; ".join(f"p{p} {placed:,}" for p, placed, _ in got["other"][-1][4])
        met = "yes" if this[1] <= target else f"**no** (×{this[1] / target:.1f})"
        hosts, cards, running, new = size
        lines.append(
            f"| {hosts:,} × {cards}, {running:,} + {new:,} ({count}) | {this[0]:.2f} s "
            f"| {other[0]:.2f} s | {this[1]:.2f} s | {other[1]:.2f} s | {target:g} s | {met} "
            f"| {this[2] / 2**20:,.0f} MiB | {other[2] / 2**20:,.0f} MiB | {levels} | {theirs} |"
        )
        for name in ("this", "other"):
            phases = ", ".join(f"{k} {v:.2f}" for k, v in got[name][-1][5].items())
            notes.append(f"- {name}, {hosts:,} × {cards} + {new:,} (last run, s): {phases}")
    return [*lines, "", *notes]


def daily(trees: dict[str, Path], runs: int) -> list[str]:
    """The daily fleets in both trees, alternating run by run: a Markdown table of medians."""
    got: dict[tuple[int, str], list[list[float]]] = {}
    for _ in range(runs):
        for i, (size, _target) in enumerate(DAILY_FLEETS):
            for name, tree in trees.items():
                got.setdefault((i, name), []).append(
                    [float(x) for x in _last_json(DAILY, size, tree, 600)]
                )
    lines = [
        f"| fleet (medians of {runs}, alternated) | this wall | other wall | this / other "
        "| target | met | this CPU | other CPU | this peak | other peak | placed (this, other) |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for i, ((hosts, cards, running, new), target) in enumerate(DAILY_FLEETS):
        this, other = (
            [statistics.median(run[k] for run in got[(i, name)]) for k in range(4)]
            for name in ("this", "other")
        )
        met = "yes" if this[0] <= target else f"**no** (×{this[0] / target:.2f})"
        lines.append(
            f"| {hosts:,} × {cards}, {running:,} running + {new:,} new | {this[0]:.2f} s "
            f"| {other[0]:.2f} s | {this[0] / other[0]:.2f} | {target:g} s | {met} "
            f"| {this[1]:.2f} s | {other[1]:.2f} s | {this[2] / 2**20:,.0f} MiB "
            f"| {other[2] / 2**20:,.0f} MiB | {this[3]:.0f}, {other[3]:.0f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("other", type=Path, help="the other checkout (e.g. main before the change)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--daily", action="store_true", help="the daily fleets' plan() instead")
    parser.add_argument("--crowded", action="store_true", help="the crowded fleets' plan() instead")
    parser.add_argument("--big", action="store_true", help="with --crowded: 1,024 × 8 too")
    args = parser.parse_args(argv)
    trees = {"this": ROOT, "other": args.other.resolve()}
    if args.crowded:
        print("\n".join(crowded(trees, args.runs, args.big)))
        return 0
    if args.daily:
        print("\n".join(daily(trees, args.runs)))
        return 0
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
