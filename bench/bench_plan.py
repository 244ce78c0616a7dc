"""Benchmarks of `plan`: the whole command on fv-ml1, and model build + solve on fleets up to 64 × 8 cards.

`run()` returns a Markdown section for `make bench`; `synthetic_fleet` and `planner.plan` serve the fleet bench.
"""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inventory.snapshot import Snapshot
from placement.planner import PlanResult, plan
from seats.model import Catalogue, Seat

ROOT = Path(__file__).resolve().parent.parent
MIB = 2**20
GIB = 2**30
CARD_TOTAL = 81_559 * MIB  # an 80 GB-class card as NVML reports it
DRIVER_RESERVE = 530 * MIB
TAKEN = datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)
SIZES = [(1, 8, 6, 10), (8, 8, 50, 40), (16, 8, 100, 80), (32, 8, 200, 120), (64, 8, 300, 200)]


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
    free = {(h, c): cuda_total for h in names for c in range(cards)}
    seats: list[dict[str, Any]] = []
    processes: dict[tuple[str, int], list[dict[str, Any]]] = {key: [] for key in free}
    keys = list(free)
    for i in range(running):
        key = keys[i % len(keys)] if i < len(keys) else rng.choice(keys)
        size = rng.randint(4, 40) * GIB
        if free[key] - size < 0.05 * cuda_total:
            continue
        free[key] -= size
        seats.append(
            {
                "name": f"run{i}",
                "host": key[0],
                "gpus": [key[1]],
                "resident": size,
                "state": "running",
                "match": f"--port {10000 + i}$",
            }
        )
        processes[key].append(
            {"pid": 10000 + i, "used_bytes": size, "cmdline": f"srv --port {10000 + i}"}
        )
    catalogue = Catalogue.model_validate(
        {
            "hosts": {
                h: {
                    "cards": cards,
                    "card_total": CARD_TOTAL,
                    "cuda_context": 1183 * MIB,
                    "margin": 256 * MIB,
                }
                for h in names
            },
            "seats": seats,
        }
    )
    snapshots = [
        Snapshot.model_validate(
            {
                "host": h,
                "taken_at": TAKEN,
                "cards": [
                    {
                        "index": c,
                        "total_bytes": CARD_TOTAL,
                        "reserved_bytes": DRIVER_RESERVE,
                        "used_bytes": cuda_total - free[(h, c)],
                        "free_bytes": free[(h, c)],
                        "processes": processes[(h, c)],
                    }
                    for c in range(cards)
                ],
            }
        )
        for h in names
    ]
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


def _command_seconds(repeat: int = 5) -> tuple[float, float]:
    """Median wall seconds of the whole `gpuplan plan` process on fv-ml1, and of `import pulp` alone."""
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
    whole = []
    imports = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=False, cwd=ROOT)
        whole.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "import pulp, pydantic, yaml, tabulate, placement.planner"],
            capture_output=True,
            check=False,
        )
        imports.append(time.perf_counter() - start)
    return statistics.median(whole), statistics.median(imports)


def run() -> str:
    """The Markdown section: command wall time, then fleet sizes vs seconds per solver."""
    whole, imports = _command_seconds()
    lines = [
        "## plan",
        "",
        f"`gpuplan plan` on fv-ml1 as a whole process (median of 5): **{whole:.2f} s** "
        f"(target < 1 s); Python start + imports alone: {imports:.2f} s.",
        "",
        "| hosts × cards | running | new | solver | placed | status | problem s | build s | solve s "
        "| verify s | explain s | total s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    shares: dict[str, float] = {
        "problem": 0.0,
        "build": 0.0,
        "solve": 0.0,
        "verify": 0.0,
        "explain": 0.0,
    }
    for hosts, cards, running, new in SIZES:
        for solver in ("cbc", "highs"):
            start = time.perf_counter()
            result = plan_fleet(hosts, cards, running, new, solver=solver)
            total = time.perf_counter() - start
            t = result.timings
            for key in shares:
                shares[key] += t.get(key, 0.0)
            placed = sum(1 for v in result.verdicts if v.passed)
            status = result.status + (f" (gap {result.gap:.2%})" if result.gap else "")
            lines.append(
                f"| {hosts} × {cards} | {running} | {new} | {solver} | {placed}/{len(result.verdicts)} "
                f"| {status} | {t.get('problem', 0):.2f} | {t.get('build', 0):.2f} | {t.get('solve', 0):.2f} "
                f"| {t.get('verify', 0):.2f} | {t.get('explain', 0):.2f} | {total:.2f} |"
            )
    spent = sum(shares.values()) or 1.0
    lines += [
        "",
        "Share of in-process time over all rows: "
        + ", ".join(f"{key} {value / spent:.0%}" for key, value in shares.items())
        + f"; the whole command on fv-ml1 spends ~{imports / whole:.0%} of its wall time starting "
        "Python and importing.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
