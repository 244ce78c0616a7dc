"""Benchmark of `plan` on crowded fleets: wall and CPU of `plan()`, seats against first and best
fit and against the per-level upper bound, and the lines it prints.

A full fleet refuses hundreds of seats; this measures the issue's two crowded fleets against
their targets (64 × 8 within 5 s, 256 × 8 within 20 s; placed ≥ max(first fit, best fit) by
the priority score; gap to the bound ≤ 1 % at every level), and what `plan` prints by default
(the summary) and with --explain all.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass

from bench import cpu_s, quick
from bench.bench_plan import synthetic_fleet
from placement.cli.plan_text import render_plan
from placement.plan.greedy import best_fit, first_fit
from placement.plan.planner import PlanResult, plan
from placement.plan.problem import build_problem, new_seats
from placement.plan.score import priority_weights, score

# (hosts, cards, running, new, target seconds): the crowded fleets.
FULL = ((64, 8, 300, 2_000, 5.0), (256, 8, 1_200, 8_000, 20.0))
QUICK = ((16, 8, 75, 500, 5.0),)
RUNS = 3
GAP_TARGET = 0.01


def _timed_plan(size: tuple[int, int, int, int]) -> tuple[PlanResult, float, float]:
    """One `plan()` of the fleet: the result, wall seconds, CPU seconds."""
    catalogue, snapshots, adds = synthetic_fleet(*size)
    cpu, wall = cpu_s(), time.perf_counter()
    result = plan(catalogue, snapshots, adds, solver="cbc", time_limit=10.0)
    return result, time.perf_counter() - wall, cpu_s() - cpu


@dataclass(frozen=True)
class _Row:
    size: tuple[int, int, int, int]
    target_s: float
    wall: list[float]
    cpu: list[float]
    result: PlanResult
    first: tuple[float, int]  # (priority score, seats) of first-fit-decreasing
    best: tuple[float, int]  # the same of best-fit-decreasing
    ours: float  # the plan's priority score

    @property
    def placed(self) -> int:
        return sum(1 for v in self.result.verdicts if v.passed)

    @property
    def gap(self) -> float:
        return max((level.gap for level in self.result.bounds), default=0.0)


def _measure(size: tuple[int, int, int, int], target_s: float) -> _Row:
    """RUNS plans of the fleet, and first and best fit on the same problem, scored alike."""
    runs = [_timed_plan(size) for _ in range(RUNS)]
    result = runs[-1][0]
    catalogue, snapshots, adds = synthetic_fleet(*size)
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds))
    weights = priority_weights(problem.seats)
    first, best = first_fit(problem), best_fit(problem)
    return _Row(
        size,
        target_s,
        [r[1] for r in runs],
        [r[2] for r in runs],
        result,
        (score(first, weights), len(first)),
        (score(best, weights), len(best)),
        score((v.seat for v in result.verdicts if v.passed), weights),
    )


def _levels(row: _Row) -> str:
    return "; ".join(
        f"p{level.priority} {level.placed:,}/{level.bound:,}" for level in row.result.bounds
    )


def _table(rows: list[_Row]) -> list[str]:
    out = [
        "| hosts × cards | running + new | wall (median) | CPU | target | wall / target "
        "| placed | FFD | BFD | ≥ both | placed / bound per priority | worst gap | met |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---|",
    ]
    for row in rows:
        hosts, cards, running, new = row.size
        wall, cpu = statistics.median(row.wall), statistics.median(row.cpu)
        both = row.ours >= max(row.first[0], row.best[0])
        met = wall <= row.target_s and both and row.gap <= GAP_TARGET
        out.append(
            f"| {hosts} × {cards} | {running:,} + {new:,} | {wall:.2f} s | {cpu:.2f} s "
            f"| {row.target_s:g} s | {wall / row.target_s:.2f} | {row.placed:,} "
            f"| {row.first[1]:,} | {row.best[1]:,} | {'yes' if both else '**no**'} "
            f"| {_levels(row)} | {row.gap:.2%} | {'yes' if met else '**no**'} |"
        )
    return out


def _lines(text: str) -> int:
    return text.count("\n")


def run() -> str:
    """The Markdown section: each fleet against its targets, then the output's size each way."""
    sizes = QUICK if quick() else FULL
    rows = [_measure(size[:4], size[4]) for size in sizes]
    load = os.getloadavg()[0]
    first = rows[0]
    text_all = _lines(render_plan(first.result, explain="all"))
    text_summary = _lines(render_plan(first.result, explain="summary"))
    json_all = _lines(json.dumps(first.result.to_json("all"), indent=2))
    json_summary = _lines(json.dumps(first.result.to_json("summary"), indent=2))
    timings = ", ".join(f"{k} {v:.2f} s" for k, v in first.result.timings.items())
    hosts, cards, _, _ = first.size
    return "\n".join(
        [
            "## crowded fleet",
            "",
            f"`plan()` on the synthetic crowded fleets (bench/bench_plan.py `synthetic_fleet`; "
            f"CBC, time limit 10 s), median of {RUNS}"
            + (" (`--quick`: a quarter of the issue's 64 × 8 fleet)" if quick() else "")
            + f". 1-minute load average {load:.1f} on {os.cpu_count()} cores. *FFD*, *BFD*: "
            "seats first-fit- and best-fit-decreasing place on the same problem; *≥ both*: the "
            "plan's priority score is at least theirs; *bound*: the most seats any placement "
            "could place at that priority (placement.plan.bound), given the levels above.",
            "",
            *_table(rows),
            "",
            f"Time split of the last {hosts} × {cards} run: {timings}.",
            "",
            f"What the {hosts} × {cards} plan prints:",
            "",
            "| output | --explain all | summary (default) |",
            "|---|---|---|",
            f"| text lines (render_plan) | {text_all:,} | {text_summary:,} |",
            f"| `--json` lines | {json_all:,} | {json_summary:,} |",
            "",
        ]
    )
