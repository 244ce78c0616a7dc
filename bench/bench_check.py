"""Benchmark of `gpuplan check` (and `plan`) as a deploy pipeline runs them: a whole process each.

Issue 12's targets: `check --compose` on a 10-service file against a 4-card host within
1.5 x `python -c "import pydantic, yaml"` + 0.1 s (issue 26: with an override file and an
include, within 1.6 x the floor row); a check on a 64-host fleet read from a
snapshot folder within 1 s. Issue 17's: `check SEAT --gpu N` within 1.6 x that baseline, `plan`
on fv-ml1 within 2 x `python -c "import pydantic, yaml, tabulate"`. Every command is timed side
by side with its baseline in one run, in CPU seconds (user + system of the child) as well as
wall: on a shared machine only the CPU figure does not depend on the load. Bytecode is written on
the warm-up run, as an installed package has it. The `floor` row is what any pydantic validation
costs before gpuplan's own work: importing BaseModel and building and running one model.
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

from bench import children_cpu_s, quick
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


def write_project(folder: Path, services: int = 10) -> Path:
    """Issue 26's project: `services` services, two of them in an included file, and a
    compose.override.yaml beside the main file that raises two utils; returns the main file."""
    data = yaml.safe_load(compose_text(services))["services"]
    names = list(data)
    (folder / "project").mkdir()
    (folder / "project" / "gpu").mkdir()
    included = {name: data.pop(name) for name in names[-2:]}
    main = folder / "project" / "compose.yaml"
    main.write_text(
        yaml.safe_dump({"include": ["gpu/more.yaml"], "services": data}, sort_keys=False),
        encoding="utf-8",
    )
    (folder / "project" / "gpu" / "more.yaml").write_text(
        yaml.safe_dump({"services": included}, sort_keys=False), encoding="utf-8"
    )
    override = {
        name: {"command": ["--model", name, "--gpu-memory-utilization", "0.05"]}
        for name in names[:2]
    }
    (folder / "project" / "compose.override.yaml").write_text(
        yaml.safe_dump({"services": override}, sort_keys=False), encoding="utf-8"
    )
    return main


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


def timed(argv: list[str], runs: int) -> tuple[list[float], list[float], int]:
    """CPU and wall seconds of `runs` whole processes (after one warm-up), and the last exit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    cpus: list[float] = []
    walls: list[float] = []
    code = 0
    for i in range(runs + 1):
        cpu = children_cpu_s()
        began = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, env=env, cwd=ROOT, check=False)
        took = time.perf_counter() - began
        code = done.returncode
        if code not in (0, 1):
            raise RuntimeError(f"{' '.join(argv)} exited {code}: {done.stderr.decode()[-2000:]}")
        if i:
            cpus.append(children_cpu_s() - cpu)
            walls.append(took)
    return cpus, walls, code


FLOOR = """import pydantic, yaml
from pydantic import BaseModel, Field
class One(BaseModel):
    x: int = Field(ge=0)
One.model_validate({"x": 1})
"""
Measured = tuple[float, list[float], float, int]  # CPU median, CPU runs, wall median, exit


def measure(runs: int) -> dict[str, Measured]:
    """The baselines and the commands, interleaved so a busy moment hits all alike."""
    py = sys.executable
    fv = [
        "--catalogue",
        "seats/catalogue/fv-ml1.yaml",
        "--snapshot",
        "seats/catalogue/fv-ml1.snapshot.json",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        compose = folder / "compose.yaml"
        compose.write_text(compose_text(), encoding="utf-8")
        catalogue, shots = write_fleet(folder)
        project = write_project(folder)
        cases = {
            "baseline": [py, "-c", "import pydantic, yaml"],
            "baseline_tabulate": [py, "-c", "import pydantic, yaml, tabulate"],
            "floor": [py, "-c", FLOOR],
            "compose": [py, "-m", "placement", "check", "--compose", str(compose), *fv],
            "project": [py, "-m", "placement", "check", "--compose", str(project), *fv],
            "seat": [py, "-m", "placement", "check", "vllm-voices", "--gpu", "0", *fv],
            "fleet": [
                py, "-m", "placement", "check", "big-new", "--gpu", "0",
                "--catalogue", str(catalogue), "--snapshot", str(shots),
            ],
            "plan": [py, "-m", "placement", "plan", *fv, "--json"],
        }  # fmt: skip
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        walls: dict[str, list[float]] = {name: [] for name in cases}
        codes: dict[str, int] = {}
        for _ in range(runs):
            for name, argv in cases.items():
                cpu, wall, codes[name] = timed(argv, 1)
                cpus[name] += cpu
                walls[name] += wall
    return {
        name: (
            statistics.median(cpus[name]),
            cpus[name],
            statistics.median(walls[name]),
            codes[name],
        )
        for name in cases
    }


Row = tuple[str, Measured, float | None, float | None]  # label, measured, its baseline, target


def rows(got: dict[str, Measured]) -> list[Row]:
    """Each row with the baseline its ratio is taken to and its target (None: not a target)."""
    base = got["baseline"][0]
    base3 = got["baseline_tabulate"][0]
    return [
        ("`python -c \"import pydantic, yaml\"` (base)", got["baseline"], None, None),
        ("`python -c \"import pydantic, yaml, tabulate\"` (base+tabulate)", got["baseline_tabulate"], None, None),
        ("floor: base + import BaseModel, build and validate one model", got["floor"], base, None),
        ("`check --compose` 10 services, 4-card host (≤ 1.5 x base + 0.1 s)", got["compose"], base, 1.5 * base + 0.1),
        ("`check --compose` 10 services with an override and an include (≤ 1.6 x floor)", got["project"], got["floor"][0], 1.6 * got["floor"][0]),
        ("`check vllm-voices --gpu 0` on fv-ml1 (≤ 1.6 x base)", got["seat"], base, 1.6 * base),
        ("`check SEAT` on 64 hosts x 8 cards (snapshot folder), refused: nearest scans all (≤ 1 s)", got["fleet"], base, 1.0),
        ("`plan` on fv-ml1 (≤ 2 x base+tabulate)", got["plan"], base3, 2 * base3),
    ]  # fmt: skip


def run() -> str:
    """Markdown section: the CPU medians beside their baselines, the targets and the ratios."""
    runs = 5 if quick() else 11
    got = measure(runs)
    lines = [
        "## check",
        "",
        f"Whole processes, CPU seconds (user + system), median of {runs} (interleaved; each "
        f"after a warm-up run); the 1-minute load average was {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores. Ratio: to the row's baseline; of target: median / target "
        "(at most 1.00 is met).",
        "",
        "| what | CPU median | ratio | target | of target | met | wall median | exit | CPU runs (s) |",
        "|---|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for label, (median, times, wall, code), base, target in rows(got):
        ratio = f"{median / base:.2f}" if base else "-"
        aim = (
            f"{target:.3f} s | {median / target:.2f} | {'yes' if median <= target else '**no**'}"
            if target
            else "- | - | -"
        )
        lines.append(
            f"| {label} | {median:.3f} s | {ratio} | {aim} | {wall:.3f} s | {code} "
            f"| {', '.join(f'{t:.2f}' for t in times)} |"
        )
    print(json.dumps({k: v[0] for k, v in got.items()}), file=sys.stderr)
    return "\n".join(lines)
