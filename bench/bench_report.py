"""Benchmark of `gpuplan report`: a week of one-minute snapshots of an 8-card host, end to end, charts included.

`run()` returns a Markdown section for `make bench`: medians of 5 runs of the CLI (wall and CPU), the
same pinned to one core with `taskset -c 0`, peak memory.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench import children_cpu_s
from inventory.ledger.store import open_ledger
from inventory.snapshot import Snapshot, load_snapshot
from placement.report.demo import plan_story, write_demo
from seats.loader import load_catalogue, parse_catalogue
from seats.model import Catalogue

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "seats" / "catalogue"
CARDS = 8
TARGET_S = 3.0
TARGET_ONE_CORE_S = 2.0  # issue 17: the report on one core
TARGET_RSS_MB = 500.0
RUNS = 5


def eight_cards() -> tuple[Catalogue, Snapshot, dict[str, Any]]:
    """fv-ml1 twice over as one 8-card host: card c holds copies of fv-ml1 card c mod 4's seats.

    Each copy's command line gains `--instance g<c>` and its `match` names that instance, so
    attribution stays one process → one seat; cards 3 and 7 are held whole for flash-next.
    """
    base_catalogue = load_catalogue(EXAMPLE / "fv-ml1.yaml")
    base = load_snapshot(EXAMPLE / "fv-ml1.snapshot.json")
    host = "bench-8"
    by_card: dict[int, list[Any]] = {}
    for seat in base_catalogue.seats:
        if seat.state == "running" and seat.pinned_cards:
            by_card.setdefault(seat.pinned_cards[0], []).append(seat)
    seats: list[dict[str, Any]] = []
    cards = []
    for c in range(CARDS):
        source = base.card(c % 4)
        processes = []
        for process in source.processes:
            processes.append(
                process.model_copy(
                    update={
                        "pid": process.pid + 10000 * c,
                        "cmdline": f"{process.cmdline} --instance g{c}",
                    }
                )
            )
        cards.append(
            source.model_copy(
                update={"index": c, "uuid": f"GPU-bench-{c:04d}", "processes": tuple(processes)}
            )
        )
        for seat in by_card.get(c % 4, []):
            data = seat.model_dump(by_alias=True, exclude_none=True)
            data.update(
                name=f"{seat.name}-g{c}",
                host=host,
                gpus=[c],
                match=f"{seat.match}.*--instance g{c}$",
            )
            seats.append(data)
    seats.append(
        {"name": "flash-next", "host": host, "gpus": 1, "resident": 93 * 2**30, "exclusive": True}
    )
    hosts = base_catalogue.model_dump(by_alias=True, exclude_none=True)["hosts"]
    data = {
        "hosts": {host: {**hosts["fv-ml1"], "cards": CARDS}},
        "reserves": [
            {
                "name": f"flash-next-hold-{g}",
                "host": host,
                "gpu": g,
                "bytes": "card",
                "for": ["flash-next"],
            }
            for g in (3, 7)
        ],
        "seats": seats,
    }
    catalogue = parse_catalogue(data, "bench-8.yaml")
    snapshot = base.model_copy(update={"host": host, "cards": tuple(cards)})
    return catalogue, snapshot, data


# Runs a command and prints the largest resident set (KiB) of it and its descendants. The
# bench's own RUSAGE_CHILDREN would also count every earlier bench's children (a solver, a
# Prometheus server) when `make bench` runs them all in one process.
_PEAK = (
    "import resource, subprocess, sys; "
    "subprocess.run(sys.argv[1:], check=True, capture_output=True); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def _peak_mb(command: list[str]) -> float:
    """Peak resident memory of one run of `command` and the processes it waits for, in MB."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *command], check=True, capture_output=True, text=True
    )
    return int(done.stdout.strip()) / 1024


def measure(workdir: Path) -> dict[str, Any]:
    """Build the 8-card week, then time `gpuplan report --format html` RUNS times."""
    catalogue, base, data = eight_cards()
    catalogue_path = workdir / "bench-8.yaml"
    catalogue_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    ledger_path = workdir / "bench-8.sqlite"
    story = plan_story(catalogue, base, end=base.taken_at, days=7)
    start = time.perf_counter()
    with open_ledger(ledger_path) as ledger:
        write_demo(ledger, catalogue, base, story, seed=1)
        counts = {
            table: int(ledger.connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            for table in ("snapshots", "cards", "processes")
        }
    build_s = time.perf_counter() - start
    gpuplan = str(Path(sys.executable).with_name("gpuplan"))
    command = [
        gpuplan,
        "report",
        "--ledger",
        str(ledger_path),
        "--catalogue",
        str(catalogue_path),
        "--format",
        "html",
        "--out",
        str(workdir / "out"),
    ]
    # The Markdown report with its chart files: the same charts, written as SVG files beside it.
    markdown = [*command[:-4], "--format", "md", "--out", str(workdir / "md")]
    free = _Runs()
    pinned = _Runs() if shutil.which("taskset") else None
    pinned_md = _Runs() if pinned is not None else None
    loads = []
    for _ in range(RUNS):
        loads.append(os.getloadavg()[0])
        free.time(command, required=True)
        if pinned is not None and pinned_md is not None:  # run for run: the same load for all
            pinned.time(["taskset", "-c", "0", *command])
            pinned_md.time(["taskset", "-c", "0", *markdown])
    load = statistics.median(loads)
    page = (workdir / "out" / "report.html").read_text(encoding="utf-8")
    return {
        "counts": counts,
        "build_s": build_s,
        "times": free.walls,
        "median_s": statistics.median(free.walls),
        "cpu_s": statistics.median(free.cpus),
        "cpus": free.cpus,
        "one_core": pinned.summary() if pinned is not None else "taskset is not installed",
        "one_core_md": (
            pinned_md.summary() if pinned_md is not None else "taskset is not installed"
        ),
        "load": load,
        "cores": os.cpu_count(),
        "peak_mb": _peak_mb(command),
        "charts": len(re.findall(r"<svg ", page)),
        "html_kb": len(page.encode()) / 1024,
    }


class _Runs:
    """Wall and CPU seconds of runs of one command (CPU: the report's and its children's)."""

    def __init__(self) -> None:
        self.walls: list[float] = []
        self.cpus: list[float] = []
        self.failed: str | None = None

    def time(self, command: list[str], *, required: bool = False) -> None:
        """One run; a failure of a `required` one raises, of another is said in its row."""
        start, start_cpu = time.perf_counter(), children_cpu_s()
        done = subprocess.run(command, check=required, capture_output=True, text=True)
        if done.returncode != 0:
            # taskset refuses where core 0 is not this process's to use (a container's cpuset).
            self.failed = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return
        self.walls.append(time.perf_counter() - start)
        self.cpus.append(children_cpu_s() - start_cpu)

    def summary(self) -> dict[str, float] | str:
        if self.failed is not None or not self.walls:
            return f"`taskset -c 0` failed: {self.failed}"
        return {"median_s": statistics.median(self.walls), "cpu_s": statistics.median(self.cpus)}


def run() -> str:
    """The Markdown section for `make bench`."""
    with tempfile.TemporaryDirectory(prefix="gpuplan-bench-report-") as tmp:
        m = measure(Path(tmp))
    c = m["counts"]
    ok_time = "yes" if m["median_s"] < TARGET_S else "**no**"
    ok_rss = "yes" if m["peak_mb"] < TARGET_RSS_MB else "**no**"
    lines = [
        "## Weekly report: a week of one-minute snapshots of 8 cards",
        "",
        f"Ledger: {c['snapshots']:,} snapshots, {c['cards']:,} card rows, {c['processes']:,} process rows "
        f"(demo data, built in {m['build_s']:.2f} s). Measured: `gpuplan report --format html` as a "
        f"separate process, end to end (start-up, SQL aggregation, verifier headline, {m['charts']} SVG charts, "
        f"a {m['html_kb']:,.0f} KiB page), {RUNS} runs.",
        "",
        "| measure | value | target | met |",
        "|---|---:|---:|:---:|",
        f"| report, median of {RUNS} | {m['median_s']:.2f} s | < {TARGET_S:g} s | {ok_time} |",
        f"| runs, wall | {', '.join(f'{t:.2f}' for t in m['times'])} s | | |",
        f"| CPU time (user + sys, children included), median | {m['cpu_s']:.2f} s | | |",
        f"| runs, CPU | {', '.join(f'{t:.2f}' for t in m['cpus'])} s | | |",
        _one_core_row(m["one_core"]),
        _one_core_row(m["one_core_md"], "`--format md` with its SVG files"),
        f"| peak resident memory (ru_maxrss of the report and any child, one more run) | {m['peak_mb']:.0f} MB | < {TARGET_RSS_MB:g} MB | {ok_rss} |",
        "",
        f"Wall time depends on what else the machine runs: the 1-minute load average was {m['load']:.1f} "
        f"(median before each run) on {m['cores']} cores. The page's charts are SVG drawn in the "
        "report's own process, so it uses one core either way: pinned with `taskset -c 0`, it shares "
        "that core with whatever else the machine puts there. CPU time varies less, though "
        "contention for caches inflates it too.",
        "",
    ]
    return "\n".join(lines)


def _one_core_row(one_core: dict[str, float] | str, what: str = "") -> str:
    """`taskset -c 0`: median wall and CPU, the 2 s target, met or not, wall / target."""
    label = f"report{' ' + what if what else ''} on one core (`taskset -c 0`), median of {RUNS}"
    if isinstance(one_core, str):
        return f"| {label} | not measured: {one_core} | ≤ {TARGET_ONE_CORE_S:g} s | - |"
    wall = one_core["median_s"]
    met = "yes" if wall <= TARGET_ONE_CORE_S else "**no**"
    return (
        f"| {label} | {wall:.2f} s (CPU {one_core['cpu_s']:.2f} s; "
        f"{wall / TARGET_ONE_CORE_S:.2f} × the target) | ≤ {TARGET_ONE_CORE_S:g} s | {met} |"
    )


if __name__ == "__main__":
    print(run())
