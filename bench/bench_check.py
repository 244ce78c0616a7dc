"""Benchmark of `gpuplan check` as a deploy pipeline runs it: a whole process per check.

Issue 12's targets: `check --compose` on a 10-service file against a 4-card host within
1.5 x `python -c "import pydantic, yaml"` + 0.1 s; a check on a 64-host fleet read from a
snapshot folder within 1 s. Both are timed side by side with the baseline in one run.
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
from pathlib import Path

import yaml

from bench import quick
from bench.fleetgen import running_fleet
from inventory.snapshot import save_snapshot

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30
MIB = 2**20
CARD_TOTAL = 97_871 * MIB
DRIVER_RESERVE = 622 * MIB


def compose_text(services: int = 10) -> str:
    """`services` vLLM services spread over cards 0-3, each at a small util (what a stack looks like)."""
    body: dict[str, object] = {}
    for i in range(services):
        body[f"llm{i}"] = {
            "image": "vllm/vllm-openai:v0.11.0",
            "command": [
                "--model",
                f"org/model-{i}",
                "--port",
                str(8100 + i),
                "--gpu-memory-utilization",
                "0.04",
            ],
            "environment": {"HF_TOKEN": "${HF_TOKEN}"},
            "deploy": {
                "resources": {
                    "reservations": {
                        "devices": [
                            {
                                "driver": "nvidia",
                                "device_ids": [str(i % 4)],
                                "capabilities": ["gpu"],
                            }
                        ]
                    }
                }
            },
        }
    return yaml.safe_dump({"services": body}, sort_keys=False)


def write_fleet(folder: Path, hosts: int = 64, cards: int = 8) -> tuple[Path, Path]:
    """A catalogue of `hosts` x `cards` with running seats, and one snapshot file per host."""
    rng = random.Random(0)
    shape = {f"h{h:02d}": (cards, CARD_TOTAL, DRIVER_RESERVE) for h in range(hosts)}
    catalogue, snapshots = running_fleet(
        rng, shape, hosts * cards * 2, lambda _key, _total: rng.randint(10, 40) * GIB, 0.05
    )
    data = catalogue.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["seats"].append({"name": "big-new", "host": "h00", "gpus": [0], "resident": 60 * GIB})
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    shots = folder / "snapshots"
    shots.mkdir()
    for snapshot in snapshots:
        save_snapshot(snapshot, shots / f"{snapshot.host}.json")
    return path, shots


def timed(argv: list[str], runs: int) -> tuple[float, list[float], int]:
    """Median wall seconds of `runs` whole processes (after one warm-up), each time, last exit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times: list[float] = []
    code = 0
    for i in range(runs + 1):
        began = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, env=env, cwd=ROOT, check=False)
        took = time.perf_counter() - began
        code = done.returncode
        if code not in (0, 1):
            raise RuntimeError(f"{' '.join(argv)} exited {code}: {done.stderr.decode()[-2000:]}")
        if i:
            times.append(took)
    return statistics.median(times), times, code


def measure(runs: int) -> dict[str, tuple[float, list[float], int]]:
    """The baseline and both checks, interleaved so a busy moment hits all three alike."""
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        compose = folder / "compose.yaml"
        compose.write_text(compose_text(), encoding="utf-8")
        catalogue, shots = write_fleet(folder)
        cases = {
            "baseline": [py, "-c", "import pydantic, yaml"],
            "compose": [
                py, "-m", "placement", "check", "--compose", str(compose),
                "--catalogue", "seats/catalogue/fv-ml1.yaml",
                "--snapshot", "seats/catalogue/fv-ml1.snapshot.json",
            ],
            "fleet": [
                py, "-m", "placement", "check", "big-new", "--gpu", "0",
                "--catalogue", str(catalogue), "--snapshot", str(shots),
            ],
        }  # fmt: skip
        samples: dict[str, list[float]] = {name: [] for name in cases}
        codes: dict[str, int] = {}
        for _ in range(runs):
            for name, argv in cases.items():
                _, times, codes[name] = timed(argv, 1)
                samples[name] += times
    return {name: (statistics.median(t), t, codes[name]) for name, t in samples.items()}


def run() -> str:
    """Markdown section: the three medians, the targets and the ratio."""
    runs = 5 if quick() else 11
    got = measure(runs)
    base = got["baseline"][0]
    compose_target = 1.5 * base + 0.1
    rows = [
        ("`python -c \"import pydantic, yaml\"`", got["baseline"], None),
        ("`check --compose` 10 services, 4-card host", got["compose"], compose_target),
        ("`check SEAT` on 64 hosts x 8 cards (snapshot folder), refused: nearest scans all", got["fleet"], 1.0),
    ]  # fmt: skip
    lines = [
        "## check",
        "",
        f"Whole processes, median of {runs} (interleaved; each after a warm-up run).",
        "",
        "| what | median | target | within | exit | runs (s) |",
        "|---|---:|---:|---|---:|---|",
    ]
    for label, (median, times, code), target in rows:
        lines.append(
            f"| {label} | {median:.3f} s | "
            + (f"{target:.3f} s | {'yes' if median <= target else '**no**'}" if target else "- | -")
            + f" | {code} | {', '.join(f'{t:.2f}' for t in times)} |"
        )
    ratio = (got["compose"][0] - 0.1) / base
    lines += [
        "",
        f"`check --compose` is {got['compose'][0] / base:.2f} x the baseline; "
        f"(check − 0.1 s) / baseline = {ratio:.2f} (target ≤ 1.5).",
    ]
    print(json.dumps({k: v[0] for k, v in got.items()}), file=sys.stderr)
    return "\n".join(lines)
