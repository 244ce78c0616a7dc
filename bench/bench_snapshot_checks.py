"""Benchmark of the snapshot consistency checks: what they add to a 64-host plan.

Target (issue 24): under 1 ms. The seeded 64 hosts × 8 cards fleet of bench_fleet is planned
without the checks (before) and with `inventory.snapshot.check_consistency` run on every host's
snapshot first (after), alternated side by side; medians of the runs.
"""

from __future__ import annotations

import statistics
import time

from bench import quick
from bench.bench_fleet import TAKEN, fleet
from inventory.snapshot import check_consistency
from placement.plan.planner import plan

HOSTS = 64
CARDS = 8
TARGET_MS = 1.0


def run() -> str:
    """The Markdown section: plan before and after the checks, and the checks alone."""
    catalogue, snapshots, adds = fleet(HOSTS, CARDS, 0)
    runs = 3 if quick() else 7
    before: list[float] = []
    after: list[float] = []
    checks: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        plan(catalogue, snapshots, adds, solver="cbc", time_limit=10.0)
        before.append(time.perf_counter() - start)
        start = time.perf_counter()
        for snapshot in snapshots:
            check_consistency(snapshot, snapshot.host, TAKEN)
        checked = time.perf_counter()
        plan(catalogue, snapshots, adds, solver="cbc", time_limit=10.0)
        after.append(time.perf_counter() - start)
        checks.append(checked - start)
    # The checks alone, many times: their cost is far below the plan's own run-to-run spread.
    alone = []
    for _ in range(200 if not quick() else 50):
        start = time.perf_counter()
        for snapshot in snapshots:
            check_consistency(snapshot, snapshot.host, TAKEN)
        alone.append(time.perf_counter() - start)
    added_ms = statistics.median(alone) * 1000
    verdict = "met" if added_ms < TARGET_MS else "MISSED"
    lines = [
        "## snapshot_checks",
        "",
        f'The consistency rules (DESIGN.md "Never yes by accident") on a {HOSTS}-host × {CARDS}-card '
        f"fleet (bench_fleet's seed 0, {sum(len(s.cards) for s in snapshots)} cards): `plan()` in "
        f"process without them (before) and with `check_consistency` on every snapshot first "
        f"(after), alternated, median of {runs}; the checks alone, median of {len(alone)}. "
        f"Target: under {TARGET_MS:g} ms added ({verdict}).",
        "",
        "| hosts | cards | plan before ms | plan after ms | checks in the after run ms "
        "| checks alone ms (median) |",
        "|---|---|---|---|---|---|",
        f"| {HOSTS} | {sum(len(s.cards) for s in snapshots)} | "
        f"{statistics.median(before) * 1000:.1f} | {statistics.median(after) * 1000:.1f} | "
        f"{statistics.median(checks) * 1000:.3f} | {added_ms:.3f} |",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
