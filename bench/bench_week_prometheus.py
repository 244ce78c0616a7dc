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
from bench.bench_week import (
    CATALOGUE,
    FLEET_HOSTS,
    FLEET_TARGET_S,
    HOST,
    MIB,
    _newest,
    _serve,
    before_tree,
    fleet_catalogue,
    write_fleet,
)
from inventory.prometheus import metrics as m
from inventory.prometheus.tiles import HEARTBEAT, RULE_DELAY_S, recorded_name
from inventory.snapshot import Snapshot
from seats.model import Catalogue
from tests.e2e import promweek
from tests.e2e.harness import openmetrics_blocks

GIB = 2**30

RUNS = 5
# The tree before the hourly aggregates were read as undated bounds (every moved hour raw).
BEFORE = "f9ebeca"


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


def _check(
    catalogue: Path, *source: str, tree: Path = ROOT
) -> tuple[float, float, int, dict[str, object]]:
    """Wall and CPU seconds, exit and window block of one `gpuplan check tts --window 7d` run
    from `tree`."""
    cpu = children_cpu_s()
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable, "-m", "placement", "check", "tts", "--catalogue", str(catalogue),
            *source, "--max-age", "1000d", "--no-hold", "--window", "7d", "--json",
        ],
        capture_output=True,
        cwd=tree,
        env={**_env(), "PYTHONPATH": str(tree)},
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
    host = _one_host()
    if host.startswith("## week from Prometheus\n\n(skipped"):
        return host
    return host + "\n\n" + _fleet()


def _one_host() -> str:
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
        old = before_tree(folder, BEFORE)
        processes = Processes()
        try:
            url = start_prometheus_on(processes, binary, data, folder / "prometheus")
            pid = processes.started[-1].pid
            sources: dict[str, tuple[Path, tuple[str, ...]]] = {
                "`--ledger`": (ROOT, ("--ledger", str(ledger))),
                "`--prometheus`": (ROOT, ("--prometheus", url)),
            }
            if old is not None:
                sources[f"`--prometheus`, before ({BEFORE})"] = (old, ("--prometheus", url))
            for tree, source in sources.values():
                _check(catalogue, *source, tree=tree)  # bytecode written, caches warm
            runs: dict[str, list[tuple[float, float, int, dict[str, object]]]] = {
                name: [] for name in sources
            }
            served: dict[str, list[float]] = {name: [] for name in sources}
            loads = [os.getloadavg()[0]]
            for _ in range(RUNS):
                for name, (tree, source) in sources.items():
                    before = _prometheus_cpu_s(pid)
                    runs[name].append(_check(catalogue, *source, tree=tree))
                    served[name].append(_prometheus_cpu_s(pid) - before)
                loads.append(os.getloadavg()[0])
        finally:
            processes.stop_all()
    from tests.e2e.test_prometheus_window import as_prometheus_keeps

    blocks = [found[0][3] for name, found in runs.items() if "prometheus" in name]
    expected = as_prometheus_keeps(runs["`--ledger`"][0][3], host=HOST)
    same = all(block == expected for block in blocks)
    load = statistics.median(loads)
    lines_out = [
        "## week from Prometheus",
        "",
        f"`check tts --window 7d` of one host, 8 cards, 7 days of one-minute moments "
        f"({weekfile.WEEK_MINUTES:,} snapshots: `bench/weekfile.py`'s week, moved to end a "
        "minute before the run), the whole process, from a ledger holding the snapshots "
        "(`snapshot --from`) and from a real Prometheus holding the exporter's scrapes of the same "
        f"snapshots (backfilled with promtool in {backfill_s:.0f} s, tests/e2e/promweek.py); "
        f"alternated run by run, median of {RUNS}, median load {load:.1f} on 2 cores. The "
        f"window blocks {'are the same' if same else 'DIFFER'}, but for what Prometheus cannot "
        "know: the Ollama process's command line (it is named as a process of no seat) and so "
        "whether a seat was redeployed (a warning says so). Before, Prometheus's hourly "
        "aggregates (`step=1h`) decided only the hours where each card's free bytes and each "
        "seat's bytes stayed level, and every other hour of every card was read raw; after, they "
        "bound every such hour without dating its extremes (`PrometheusHistory.bounds`), and the "
        "replay reads raw, of the seat's card, only the hours those bounds cannot decide.",
        "",
        "| source | wall (median) | CPU of the check (median) | Prometheus CPU answering | exit |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, found in runs.items():
        wall = statistics.median(w for w, _, _, _ in found)
        cpu = statistics.median(c for _, c, _, _ in found)
        prom = f"{statistics.median(served[name]):.2f} s" if "prometheus" in name else ""
        lines_out.append(f"| {name} | {wall:.2f} s | {cpu:.2f} s | {prom} | {found[0][2]} |")
    return "\n".join(lines_out)


# --- a fleet of 1,024 × 8 from the recorded rollups ----------------------------------------------

FLEET_RUNS = 3
FLEET_CARDS = 8
FLEET_HOURS = 7 * 24
# Where the hours the rules' group records end, past each clock hour (Prometheus derives the
# group's offset from the group and its file).
RULE_OFFSET_S = 37.5
# The newest snapshot is scraped every minute for this long after it was taken, so that the
# runs, minutes later, still read it as Prometheus's instant queries do (within 5 minutes).
RESCRAPED_MIN = 30
# A range query over every card of the fleet may take Prometheus longer than the default 10 s
# on a loaded machine.
WAIT = ("--timeout", "60")


def fleet_openmetrics(
    folder: Path, hosts: int, end: datetime, catalogue: Catalogue
) -> tuple[list[Path], int]:
    """OpenMetrics files (one per 2-hour block) of what Prometheus keeps of the fleet's week, and
    their sample count: the rules' hourly rollups (`_recorded`) and each host's newest snapshot,
    scraped every minute from 15 s after it was taken (`_rescraped`)."""
    blocks = _recorded(hosts, end)
    newest = [_newest(f"fleet-{h:04d}", h, end, FLEET_CARDS, FLEET_HOURS - 1) for h in range(hosts)]
    for start, lines in _rescraped(newest, catalogue, end).items():
        blocks.setdefault(start, []).extend(lines)
    files = []
    for start, lines in sorted(blocks.items()):
        typed: list[str] = []
        current = None
        for line in lines:  # each family's lines together, each series' in time order
            family = line.split("{", 1)[0]
            if family != current:
                typed.append(f"# TYPE {family} gauge")
                current = family
            typed.append(line)
        path = folder / f"fleet-{start}.om"
        path.write_text("\n".join([*typed, "# EOF", ""]))
        files.append(path)
    return files, sum(len(lines) for lines in blocks.values())


def _recorded(hosts: int, end: datetime) -> dict[int, list[str]]:
    """The samples the rules of `gpuplan rules` recorded of the week, one an hour at the rule's
    evaluation RULE_DELAY_S after the hour it covers ends (RULE_OFFSET_S past a clock hour), by
    2-hour block: each card's least free
    (`min_1h`) and each host's snapshots (`count_1h`: 60 moments an hour). The figures are
    bench_week.write_fleet's: each card's vLLM server wandering by the hour, an Ollama load of
    20 GiB on card 1 14:00–15:59 UTC."""
    total = weekfile.TOTAL - weekfile.RESERVED
    last = int(end.timestamp()) // 3600 * 3600 + RULE_OFFSET_S
    if last > end.timestamp():
        last -= 3600
    ends = [last - j * 3600 for j in range(FLEET_HOURS - 1, -1, -1)]  # oldest first
    blocks: dict[int, list[str]] = {}

    def add(name: str, labels: str, values: list[float]) -> None:
        for hour_end, value in zip(ends, values, strict=True):
            t = hour_end + RULE_DELAY_S
            start = int(t) - int(t) % promweek.BLOCK_S
            blocks.setdefault(start, []).append(f"{name}{{{labels}}} {value:.0f} {t:.3f}")

    free_min = recorded_name(m.CARD_FREE, "min")
    cards = [(h, card) for h in range(hosts) for card in range(FLEET_CARDS)]
    for h, card in cards:  # each family's series together
        add(free_min, _card_labels(h, card), _free(total, ends, card, h))
    for h in range(hosts):
        add(HEARTBEAT, f'host="fleet-{h:04d}"', [60] * len(ends))
    return blocks


def _card_labels(h: int, card: int) -> str:
    host = f"fleet-{h:04d}"
    return f'gpu="{card}",host="{host}",uuid="GPU-{host}-{card}"'


def _free(total: int, ends: list[float], card: int, h: int) -> list[float]:
    """A card's least free of each hour ending at `ends` (bench_week.write_fleet's figures)."""
    values: list[float] = []
    for hour, t in enumerate(ends):
        afternoon = card == 1 and int(t - 3600) // 3600 % 24 in (14, 15)
        values.append(total - _serve(hour, card, h) - 500 * MIB - afternoon * 20 * GIB)
    return values


def _rescraped(newest: list[Snapshot], catalogue: Catalogue, end: datetime) -> dict[int, list[str]]:
    """The exporter's series of each host's newest snapshot, scraped every minute for
    RESCRAPED_MIN minutes from 15 s after `end`, by 2-hour block, each series' samples in time
    order."""
    series: dict[int, dict[str, list[str]]] = {}
    for k in range(RESCRAPED_MIN):
        at = end.timestamp() + 15 + 60 * k
        documents = promweek.openmetrics(newest, catalogue, scraped_s=lambda _s, at=at: at)
        for start, document in documents.items():
            for line in document.splitlines():
                if line and not line.startswith("#"):
                    key = line.rsplit(" ", 2)[0]
                    series.setdefault(start, {}).setdefault(key, []).append(line)
    return {
        start: [line for key in sorted(found) for line in found[key]]
        for start, found in series.items()
    }


def _ledger_fleet(argv: list[str]) -> tuple[float, float, int, bytes]:
    """Wall and CPU seconds, exit and output of one `gpuplan` process."""
    cpu = children_cpu_s()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "placement", *argv, "--max-age", "1000d"],
        capture_output=True,
        cwd=ROOT,
        env=_env(),
        timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr[-400:]!r}")
    return time.perf_counter() - start, children_cpu_s() - cpu, done.returncode, done.stdout


def _fleet() -> str:
    from tests.e2e.harness import Processes, install_prometheus, start_prometheus_on

    binary, promtool = install_prometheus(), shutil.which("promtool")
    if binary is None or promtool is None:
        return "(the fleet skipped: prometheus and promtool are not installed)"
    from seats.loader import load_catalogue

    hosts = FLEET_HOSTS
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        catalogue = folder / "fleet.yaml"
        catalogue.write_text(fleet_catalogue(hosts))
        loaded = load_catalogue(catalogue)
        end = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
        began = time.perf_counter()
        files, samples = fleet_openmetrics(folder, hosts, end, loaded)
        data = folder / "data"

        for path in files:
            openmetrics_blocks(promtool, path, data)
        backfill_s = time.perf_counter() - began
        ledger = folder / "fleet.sqlite"
        began = time.perf_counter()
        write_fleet(ledger, hosts)
        ledger_built_s = time.perf_counter() - began
        processes = Processes()
        try:
            url = start_prometheus_on(processes, binary, data, folder / "prometheus")
            pid = processes.started[-1].pid
            window = ["ledger", "--catalogue", str(catalogue), "--window", "7d"]
            argvs = {
                "`--prometheus`, `--json`": [*window, "--prometheus", url, *WAIT, "--json"],
                "`--prometheus` (text)": [*window, "--prometheus", url, *WAIT],
                "`--ledger`, `--json`": [*window, "--ledger", str(ledger), "--json"],
            }
            warm = {name: _ledger_fleet(argv)[3] for name, argv in argvs.items()}
            runs: dict[str, list[tuple[float, float, float, int]]] = {n: [] for n in argvs}
            loads = [os.getloadavg()[0]]
            for _ in range(FLEET_RUNS):
                for name, argv in argvs.items():
                    before = _prometheus_cpu_s(pid)
                    wall, cpu, code, _ = _ledger_fleet(argv)
                    runs[name].append((wall, cpu, _prometheus_cpu_s(pid) - before, code))
                loads.append(os.getloadavg()[0])
        finally:
            processes.stop_all()
    load = statistics.median(loads)
    judged = json.loads(warm["`--prometheus`, `--json`"])["hosts"]
    recorded = [h for h in judged if "recorded" in h.get("window", {}).get("judged_on", "")]
    cards = sum(len(h["window"]["cards"]) for h in recorded)
    lines = [
        f"A fleet of {hosts:,} hosts × {FLEET_CARDS} cards: `ledger --window 7d` judged on hourly "
        "rollups, every host at once. From Prometheus: it holds what the recording rules of "
        "`gpuplan rules` kept of the week that it reads (each card's "
        "`gpuplan:card_free_bytes:min_1h`, each host's `gpuplan:snapshot_timestamp_seconds:count_1h`, one sample an "
        "hour at the rule's evaluation) and each host's newest snapshot, scraped every minute "
        f"({samples:,} samples, written as OpenMetrics and backfilled with promtool in "
        f"{backfill_s:.0f} s); its raw samples start after the window's start, so each host is "
        "judged on the rules' hours (`PrometheusHistory.raw_kept_in`, `daily_rooms`: one range "
        "query at `step=1h` over every card, one over every host). From a ledger: bench_week's compacted fleet (the "
        f"same hours, written in {ledger_built_s:.0f} s). Whole processes, alternated run by run, "
        f"median of {FLEET_RUNS} after one warm-up each, median load {load:.1f} on 2 cores; "
        "from Prometheus with `--timeout 60` (a range query over every card may take it over the "
        "default 10 s on a loaded machine); the CPU of Prometheus answering apart. "
        f"{len(recorded):,} hosts and {cards:,} cards were "
        "judged on the recorded rollups.",
        "",
        "| `ledger --window 7d`, 1,024 × 8 | wall (median) | CPU of gpuplan (median) "
        "| CPU of Prometheus (median) | exit | target |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, found in runs.items():
        wall = statistics.median(r[0] for r in found)
        cpu = statistics.median(r[1] for r in found)
        prom = f"{statistics.median(r[2] for r in found):.2f} s" if "prometheus" in name else ""
        lines.append(
            f"| {name} | {wall:.2f} s | {cpu:.2f} s | {prom} | {found[0][3]} | "
            f"< {FLEET_TARGET_S:.0f} s |"
        )
    return "\n".join(lines)
