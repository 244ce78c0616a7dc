"""Benchmark of `plan` on a crowded fleet: wall and CPU of `plan()`, and the lines it prints.

A full fleet refuses hundreds of seats on hundreds of cards each; this row measures what the
explanation costs and how much of it `plan` prints by default (the summary) and with --explain all.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import time

from bench import quick
from bench.bench_plan import synthetic_fleet
from placement.cli.plan_text import render_plan
from placement.plan.planner import PlanResult, plan

# (hosts, cards, running, new): the crowded fleet; --quick plans a quarter of it.
FULL = (64, 8, 300, 2_000)
QUICK = (16, 8, 75, 500)
RUNS = 3


def _cpu() -> float:
    """CPU seconds of this process and its finished children (CBC runs as a child)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed_plan(size: tuple[int, int, int, int]) -> tuple[PlanResult, float, float]:
    """One `plan()` of the fleet: the result, wall seconds, CPU seconds."""
    catalogue, snapshots, adds = synthetic_fleet(*size)
    cpu, wall = _cpu(), time.perf_counter()
    result = plan(catalogue, snapshots, adds, solver="cbc", time_limit=10.0)
    return result, time.perf_counter() - wall, _cpu() - cpu


def _lines(text: str) -> int:
    return text.count("\n")


def run() -> str:
    """The Markdown section: medians of RUNS plans, then the output's size each way."""
    size = QUICK if quick() else FULL
    hosts, cards, running, new = size
    runs = [_timed_plan(size) for _ in range(RUNS)]
    result = runs[-1][0]
    wall = statistics.median(r[1] for r in runs)
    cpu = statistics.median(r[2] for r in runs)
    explain = statistics.median(r[0].timings.get("explain", 0.0) for r in runs)
    refused = [v for v in result.verdicts if not v.passed]
    reasons = sum(len(v.reasons) for v in refused)
    text_all = _lines(render_plan(result, explain="all"))
    text_summary = _lines(render_plan(result, explain="summary"))
    json_all = _lines(json.dumps(result.to_json("all"), indent=2))
    json_summary = _lines(json.dumps(result.to_json("summary"), indent=2))
    load = os.getloadavg()[0]
    return "\n".join(
        [
            "## crowded fleet",
            "",
            f"`plan()` on the synthetic fleet of {hosts} × {cards} cards, {running} running and "
            f"{new} new seats (CBC, time limit 10 s), median of {RUNS}"
            + (" (`--quick`: a quarter of the issue's 64 × 8 fleet)" if quick() else "")
            + f": **{wall:.2f} s wall, {cpu:.2f} s CPU**, of which explaining the refused seats "
            f"{explain:.2f} s. Placed {len(result.verdicts) - len(refused)}, refused "
            f"{len(refused)} ({reasons} card reasons in all); status {result.status}. "
            f"1-minute load average {load:.1f} on {os.cpu_count()} cores.",
            "",
            "| output | --explain all | summary (default) |",
            "|---|---|---|",
            f"| text lines (render_plan) | {text_all} | {text_summary} |",
            f"| `--json` lines | {json_all} | {json_summary} |",
            "",
        ]
    )


if __name__ == "__main__":
    print(run())
