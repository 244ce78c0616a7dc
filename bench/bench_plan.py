"""Benchmarks of `plan`: the issue's fleets before and after, the whole command on fv-ml1, and
model build + solve on fleets up to 64 × 8 cards.

`run()` returns a Markdown section for `make bench`; `synthetic_fleet` and `planner.plan` serve the
fleet bench. `GPUPLAN_BENCH_BEFORE=COMMIT` names the commit the fleets are measured at beside
this tree (default: the commit before the crowded-fleet speed work), in a temporary worktree.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import children_cpu_s
from bench.fleetgen import running_fleet
from inventory.snapshot import Snapshot
from placement.plan.model import Solution, solve
from placement.plan.planner import PlanResult, greedy_assignment, plan
from placement.plan.problem import build_problem, new_seats
from seats.model import Catalogue, Seat

ROOT = Path(__file__).resolve().parent.parent
MIB = 2**20
GIB = 2**30
CARD_TOTAL = 81_559 * MIB  # an 80 GB-class card as NVML reports it
DRIVER_RESERVE = 530 * MIB
TAKEN = datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)
SIZES = [(1, 8, 6, 10), (8, 8, 50, 40), (32, 8, 200, 120), (64, 8, 300, 200)]

# The fleets: (hosts, cards, running, new, target s, runs). The crowded 1,024 × 8 fleet
# takes minutes a run before the change: it is measured once on each side.
FLEETS = [
    (256, 8, 1_200, 8_000, 5.0, 3),
    (1_024, 8, 4_800, 200, 1.0, 3),
    (4_096, 8, 19_200, 20, 2.0, 3),
    (1_024, 8, 4_800, 32_000, 20.0, 1),
]
BEFORE_ENV = "GPUPLAN_BENCH_BEFORE"
BEFORE_COMMIT = "12c58cc"  # main before HiGHS by default and explanations per card state
MEMORY_TARGET_BYTES = 2**30
GAP_TARGET = 0.01

# One plan() of a fleet in a fresh process, under the checkout on PYTHONPATH; prints JSON.
_CHILD = """
import json, resource, sys, time
from bench.bench_plan import synthetic_fleet
from placement.plan.greedy import best_fit, first_fit
from placement.plan.planner import plan
from placement.plan.problem import build_problem, new_seats
size = tuple(int(a) for a in sys.argv[1:5])
catalogue, snapshots, adds = synthetic_fleet(*size)
start = time.perf_counter()
result = plan(catalogue, snapshots, adds, time_limit=10.0)
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out = {"wall": wall, "peak": peak, "solver": result.solver, "status": result.status,
       "timings": result.timings,
       "levels": [[b.priority, b.placed, b.bound, b.gap] for b in result.bounds]}
if sys.argv[5] == "1":
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds))
    prio = {n.name: n.seat.priority for n in problem.seats}
    for name, placed in (("ffd", first_fit(problem)), ("bfd", best_fit(problem))):
        per = {}
        for seat in placed:
            per[prio[seat]] = per.get(prio[seat], 0) + 1
        out[name] = per
print(json.dumps(out))
"""


def _fleet_once(root: Path, size: tuple[int, int, int, int], greedy: bool) -> dict[str, Any]:
    """One plan() of the fleet in a fresh process of the checkout at `root`."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *map(str, size), "1" if greedy else "0"],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        check=True,
        timeout=1_800,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _before_tree(commit: str) -> Path:
    """A temporary worktree of this repository at `commit` (the caller removes it)."""
    where = Path(tempfile.mkdtemp(prefix="gpuplan-before-")) / "tree"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(where), commit],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return where


def fleets_section() -> list[str]:
    """The issue's fleets, before (the old commit) and after (this tree), runs interleaved."""
    commit = os.environ.get(BEFORE_ENV, BEFORE_COMMIT)
    before = _before_tree(commit)
    try:
        rows = []
        for hosts, cards, running, new, target, runs in FLEETS:
            size = (hosts, cards, running, new)
            sides: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
            for i in range(runs):
                sides["before"].append(_fleet_once(before, size, False))
                sides["after"].append(_fleet_once(ROOT, size, i == runs - 1))
            rows.append((size, target, runs, sides))
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(before)],
            cwd=ROOT,
            check=False,
            capture_output=True,
            timeout=120,
        )
    return _fleets_table(rows, commit)


def _fleets_table(
    rows: list[tuple[tuple[int, int, int, int], float, int, dict[str, list[dict[str, Any]]]]],
    commit: str,
) -> list[str]:
    lines = [
        f"The issue's fleets (`synthetic_fleet`), `plan()` in a fresh process per run, each "
        f"side with its default solver (before: commit {commit}, CBC; after: this tree, HiGHS), "
        "time limit 10 s, runs interleaved before/after; wall and peak memory (max RSS of the "
        "process, the fleet's own data included) are medians. *Placed / bound* per priority: "
        "the seats placed and the most any placement could place at that level "
        "(placement.plan.bound); *FFD*, *BFD*: seats first-fit- and best-fit-decreasing place at "
        "each level on the same problem.",
        "",
        "| hosts × cards | running + new | runs | before wall | after wall | after / before "
        "| target | met | before peak | after peak | after: placed / bound per priority (gap) "
        "| FFD / BFD per priority | ≥ both, gap ≤ 1 % |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---|---|---|",
    ]
    for (hosts, cards, running, new), target, runs, sides in rows:
        wall = {k: statistics.median(r["wall"] for r in v) for k, v in sides.items()}
        peak = {k: statistics.median(r["peak"] for r in v) for k, v in sides.items()}
        last = sides["after"][-1]
        levels = "; ".join(
            f"p{p} {placed:,}/{bound:,} ({gap:.2%})" for p, placed, bound, gap in last["levels"]
        )
        ffd, bfd = last.get("ffd", {}), last.get("bfd", {})
        greedy = "; ".join(
            f"p{p} {ffd.get(str(p), 0):,}/{bfd.get(str(p), 0):,}" for p, *_ in last["levels"]
        )
        both = all(
            placed >= max(ffd.get(str(p), 0), bfd.get(str(p), 0)) and gap <= GAP_TARGET
            for p, placed, _, gap in last["levels"]
        )
        memory_ok = new < 10_000 or peak["after"] <= MEMORY_TARGET_BYTES
        met = wall["after"] <= target and memory_ok
        verdict = "yes" if met else f"**no** (×{wall['after'] / target:.1f} of target)"
        lines.append(
            f"| {hosts:,} × {cards} | {running:,} + {new:,} | {runs} | {wall['before']:.2f} s "
            f"| {wall['after']:.2f} s | {wall['after'] / wall['before']:.2f} | {target:g} s "
            f"| {verdict} "
            f"| {peak['before'] / 2**20:,.0f} MiB | {peak['after'] / 2**20:,.0f} MiB "
            f"| {levels} | {greedy} | {'yes' if both else '**no**'} |"
        )
    lines.append("")
    for (hosts, cards, _running, new), _, _, sides in rows:
        timings = ", ".join(f"{k} {v:.2f}" for k, v in sides["after"][-1]["timings"].items())
        lines.append(f"- after, {hosts:,} × {cards} + {new:,}: {timings} (seconds, last run)")
    lines.append("")
    return lines


def synthetic_fleet(
    hosts: int = 64, cards: int = 8, running: int = 300, new: int = 200, seed: int = 0
) -> tuple[Catalogue, list[Snapshot], list[tuple[str, Seat]]]:
    """A fleet of `hosts` × `cards` with `running` seats in place and `new` seats to plan.

    Running seats fill cards to 40–95 %; new seats mix vLLM (pinned KV cache, declared or
    proposed util) and other engines, priorities 0–2, one in ten taking two cards.
    """
    rng = random.Random(seed)
    names = [f"h{h:02d}" for h in range(hosts)]
    cuda_total = CARD_TOTAL - DRIVER_RESERVE
    catalogue, snapshots = running_fleet(
        rng,
        {h: (cards, CARD_TOTAL, DRIVER_RESERVE) for h in names},
        running,
        lambda _key, _cuda_total: rng.randint(4, 40) * GIB,
        0.05,
    )
    adds: list[tuple[str, Seat]] = []
    for j in range(new):
        kind = rng.random()
        data: dict[str, Any] = {
            "name": f"new{j}",
            "resident": rng.randint(2, 30) * GIB,
            "priority": rng.choice([0, 0, 1, 2]),
        }
        if rng.random() < 0.1:
            data["gpus"] = 2
        if kind < 0.5:
            data["engine"] = {"kind": "vllm", "version": "0.11.0", "kv_cache_memory": 2 * GIB}
        elif kind < 0.7:
            share = round(data["resident"] / cuda_total + 0.01, 2)
            data["engine"] = {
                "kind": "vllm",
                "version": "0.11.0",
                "gpu_memory_utilization": min(1.0, share),
                "kv_cache_memory": GIB,
            }
        adds.append(("bench", Seat.model_validate(data)))
    return catalogue, snapshots, adds


def plan_fleet(
    hosts: int, cards: int, running: int, new: int, *, solver: str, time_limit: float = 10.0
) -> PlanResult:
    """Plan a synthetic fleet; `result.timings` holds problem, build, solve, verify, explain seconds."""
    catalogue, snapshots, adds = synthetic_fleet(hosts, cards, running, new)
    return plan(catalogue, snapshots, adds, solver=solver, time_limit=time_limit)


def _timed_process(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + sys, children included) seconds of one process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    cpu = children_cpu_s()
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=False, cwd=ROOT, env=env)
    return time.perf_counter() - start, children_cpu_s() - cpu


def _command_seconds(repeat: int = 7) -> dict[str, float]:
    """Medians of the whole `gpuplan plan` process on fv-ml1 and of its baseline, interleaved.

    Issue 17's target: the command within 2 x `python -c "import pydantic, yaml, tabulate"`
    (Python, the catalogue's and the table's libraries); the solver is imported only when run.
    """
    argv = [
        sys.executable,
        "-m",
        "placement",
        "plan",
        "--catalogue",
        str(ROOT / "seats/catalogue/fv-ml1.yaml"),
        "--snapshot",
        str(ROOT / "seats/catalogue/fv-ml1.snapshot.json"),
        "--json",
    ]
    imports = [sys.executable, "-c", "import pydantic, yaml, tabulate"]
    _timed_process(argv)  # warm-up: writes the bytecode
    runs = [(_timed_process(argv), _timed_process(imports)) for _ in range(repeat)]
    return {
        "wall": statistics.median(r[0][0] for r in runs),
        "cpu": statistics.median(r[0][1] for r in runs),
        "import_wall": statistics.median(r[1][0] for r in runs),
        "import_cpu": statistics.median(r[1][1] for r in runs),
    }


def model_timed(
    hosts: int, cards: int, running: int, new: int, *, solver: str, time_limit: float = 10.0
) -> tuple[Solution, int]:
    """The full integer program alone (no greedy shortcut), warm-started from greedy for CBC."""
    catalogue, snapshots, adds = synthetic_fleet(hosts, cards, running, new)
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds))
    initial = greedy_assignment(problem)
    solution = solve(problem, solver=solver, time_limit=time_limit, initial=initial)  # type: ignore[arg-type]
    return solution, len(problem.need)


def run() -> str:
    """The Markdown section: command wall time, plan() per fleet size, the model alone."""
    command = _command_seconds()
    load = os.getloadavg()[0]
    ratio = command["cpu"] / command["import_cpu"]
    lines = [
        "## plan",
        "",
        *fleets_section(),
        f"`gpuplan plan` on fv-ml1 as a whole process, median of 7 interleaved with its baseline: "
        f'**{command["cpu"]:.2f} s CPU**, {command["wall"]:.2f} s wall; `python -c "import '
        f'pydantic, yaml, tabulate"`: {command["import_cpu"]:.2f} s CPU, '
        f"{command['import_wall']:.2f} s wall. Ratio **{ratio:.2f}**, target ≤ 2.00: "
        f"{'met' if ratio <= 2 else '**not met**'}. The 1-minute load average was {load:.1f} on "
        f"{os.cpu_count()} cores: the CPU figures are the ones that do not depend on what else runs.",
        "",
        "`plan()` in process (problem, greedy, model build, solve, verify, explain; seconds). "
        "Seat gap: how far the verified placement is from placing every seat that has an "
        "eligible card (0 = seat count proven optimal).",
        "",
        "| hosts × cards | running | new | solver | placed | status | seat gap | problem | greedy "
        "| build | solve | verify | explain | total |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    shares: dict[str, float] = dict.fromkeys(
        ("problem", "greedy", "build", "solve", "verify", "explain"), 0.0
    )
    for hosts, cards, running, new in SIZES:
        for solver in ("cbc", "highs"):
            start = time.perf_counter()
            result = plan_fleet(hosts, cards, running, new, solver=solver)
            total = time.perf_counter() - start
            t = result.timings
            for key in shares:
                shares[key] += t.get(key, 0.0)
            placed = sum(1 for v in result.verdicts if v.passed)
            gap = "-" if result.gap is None else f"{result.gap:.1%}"
            cells = " | ".join(
                f"{t.get(key, 0.0):.2f}"
                for key in ("problem", "greedy", "build", "solve", "verify", "explain")
            )
            lines.append(
                f"| {hosts} × {cards} | {running} | {new} | {solver} | {placed}/{len(result.verdicts)} "
                f"| {result.status} | {gap} | {cells} | {total:.2f} |"
            )
    spent = sum(shares.values()) or 1.0
    lines += [
        "",
        "Share of in-process time over those rows: "
        + ", ".join(f"{key} {value / spent:.0%}" for key, value in shares.items())
        + f". Of the whole command's CPU time on fv-ml1, {command['import_cpu'] / command['cpu']:.0%} "
        "is starting Python and importing pydantic, yaml and tabulate.",
        "",
        "The full integer program alone (every eligible pair, exact gate and room rows), "
        "time limit 10 s, warm-started from greedy where the solver takes it (CBC):",
        "",
        "| hosts × cards | new | pairs | solver | variables | constraints | build s | solve s | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for hosts, cards, running, new in SIZES:
        for solver in ("cbc", "highs"):
            solution, pairs = model_timed(hosts, cards, running, new, solver=solver)
            lines.append(
                f"| {hosts} × {cards} | {new} | {pairs} | {solver} | {solution.variables} "
                f"| {solution.constraints} | {solution.build_s:.2f} | {solution.solve_s:.2f} "
                f"| {solution.status} |"
            )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
