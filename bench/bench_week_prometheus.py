"""Benchmark of the week from Prometheus: `check tts --window 7d` of one 8-card host, 7 days of
one-minute moments (`bench/weekfile.py`'s week, ending a minute ago), read from a real Prometheus
that holds the exporter's scrapes of it (backfilled with promtool, tests/e2e/promweek.py), beside
the same check read from a ledger holding the same snapshots: whole processes, alternated run by
run, medians of 3 or more, wall and CPU (the check's own; Prometheus's CPU answering it apart).

`--quick` and a machine without prometheus/promtool skip it.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import ROOT, children_cpu_s, quick, weekfile
from bench.bench_week import CATALOGUE, HOST
from inventory.snapshot import Snapshot

RUNS = 5


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _week_to(end: datetime) -> list[Snapshot]:
    """weekfile's week moved by whole minutes so its last moment is the minute before `end`."""
    last = weekfile.START + timedelta(minutes=weekfile.WEEK_MINUTES - 1)
    shift = timedelta(minutes=int((end - timedelta(minutes=1) - last).total_seconds() // 60))
    out = []
    for line in weekfile.lines():
        snapshot = Snapshot.model_validate_json(line)
        out.append(snapshot.model_copy(update={"taken_at": snapshot.taken_at + shift}))
    return out


def _prometheus_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _check(catalogue: Path, *source: str) -> tuple[float, float, int, dict[str, object]]:
    """Wall and CPU seconds, exit and window block of one `gpuplan check tts --window 7d`."""
    cpu = children_cpu_s()
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable, "-m", "placement", "check", "tts", "--catalogue", str(catalogue),
            *source, "--max-age", "1000d", "--no-hold", "--window", "7d", "--json",
        ],
        capture_output=True,
        cwd=ROOT,
        env=_env(),
        timeout=300,
        text=True,
    )  # fmt: skip
    wall, used = time.perf_counter() - start, children_cpu_s() - cpu
    try:
        window = json.loads(done.stdout)["window"]
    except (ValueError, KeyError):
        raise RuntimeError(f"check failed ({done.returncode}): {done.stderr}") from None
    return wall, used, done.returncode, window


def run() -> str:
    if quick():
        return "## week from Prometheus\n\n(skipped under --quick)"
    from tests.e2e.harness import Processes, install_prometheus, start_prometheus_on
    from tests.e2e.promweek import backfill

    binary, promtool = install_prometheus(), shutil.which("promtool")
    if binary is None or promtool is None:
        return "## week from Prometheus\n\n(skipped: prometheus and promtool are not installed)"
    from seats.loader import load_catalogue

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        catalogue = folder / "catalogue.yaml"
        catalogue.write_text(CATALOGUE)
        week = _week_to(datetime.now(UTC))
        lines = folder / "week.jsonl"
        lines.write_text("".join(s.model_dump_json() + "\n" for s in week))
        ledger = folder / "week.sqlite"
        subprocess.run(
            [sys.executable, "-m", "placement", "snapshot", "--from", str(lines),
             "--ledger", str(ledger)],
            check=True, capture_output=True, cwd=ROOT, timeout=300,
        )  # fmt: skip
        began = time.perf_counter()
        data = backfill(week, load_catalogue(catalogue), folder, promtool)
        backfill_s = time.perf_counter() - began
        processes = Processes()
        try:
            url = start_prometheus_on(processes, binary, data, folder / "prometheus")
            pid = processes.started[-1].pid
            sources = {"ledger": ("--ledger", str(ledger)), "prometheus": ("--prometheus", url)}
            for source in sources.values():
                _check(catalogue, *source)  # bytecode written, caches warm
            runs: dict[str, list[tuple[float, float, int, dict[str, object]]]] = {
                name: [] for name in sources
            }
            served: list[float] = []
            for _ in range(RUNS):
                for name, source in sources.items():
                    before = _prometheus_cpu_s(pid)
                    runs[name].append(_check(catalogue, *source))
                    if name == "prometheus":
                        served.append(_prometheus_cpu_s(pid) - before)
        finally:
            processes.stop_all()
    from tests.e2e.test_prometheus_window import as_prometheus_keeps

    same = runs["prometheus"][0][3] == as_prometheus_keeps(runs["ledger"][0][3], host=HOST)
    load = os.getloadavg()[0]
    lines_out = [
        "## week from Prometheus",
        "",
        f"`check tts --window 7d` of one host, 8 cards, 7 days of one-minute moments "
        f"({weekfile.WEEK_MINUTES:,} snapshots: `bench/weekfile.py`'s week, moved to end a "
        "minute before the run), the whole process, from a ledger holding the snapshots "
        "(`snapshot --from`) and from a real Prometheus holding the exporter's scrapes of the same "
        f"snapshots (backfilled with promtool in {backfill_s:.0f} s, tests/e2e/promweek.py); "
        f"alternated run by run, median of {RUNS}, load {load:.1f}. The window blocks "
        f"{'are the same' if same else 'DIFFER'}, but for what Prometheus cannot know: the "
        "Ollama process's command line (it is named as a process of no seat) and so whether a "
        "seat was redeployed (a warning says so). Prometheus's hourly aggregates decide only the "
        "hours where each card's free bytes and each seat's bytes stayed level; this week's "
        "vLLM servers move every minute, so nearly every hour is read raw.",
        "",
        "| source | wall (median) | CPU of the check (median) | Prometheus CPU answering | exit |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, found in runs.items():
        wall = statistics.median(w for w, _, _, _ in found)
        cpu = statistics.median(c for _, c, _, _ in found)
        prom = f"{statistics.median(served):.2f} s" if name == "prometheus" else ""
        lines_out.append(f"| `--{name}` | {wall:.2f} s | {cpu:.2f} s | {prom} | {found[0][2]} |")
    return "\n".join(lines_out)
