"""Benchmark of `gpuplan alerts` for a fleet: 128 hosts × 8 cards × 3 seats per card.

Times building the rule file and `promtool check rules` on it (target: under 2 s), and counts the
series each rule's selectors touch in what the fleet's exporters publish.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench import quick
from inventory.attribution import attribute
from inventory.prometheus.metrics import Reading, render
from inventory.snapshot import Snapshot
from placement.report.alerts import ALERTS, Alerts, build_alerts, render_rules
from seats.model import Catalogue

HOSTS = 128
CARDS = 8
SEATS_PER_CARD = 3
MIB = 2**20
TOTAL = 97871 * MIB
DRIVER = 622 * MIB
CHECK_TARGET_S = 2.0


def fleet() -> tuple[Catalogue, list[Snapshot]]:
    """Every card holds three running seats at their residents; card 7 of each host is reserved."""
    hosts: dict[str, Any] = {}
    seats: list[dict[str, Any]] = []
    reserves: list[dict[str, Any]] = []
    snapshots: list[Snapshot] = []
    for h in range(HOSTS):
        host = f"gpu{h:03d}"
        hosts[host] = {"cards": CARDS, "card_total": TOTAL, "margin": 256 * MIB}
        cards = []
        for c in range(CARDS):
            processes = []
            for k in range(SEATS_PER_CARD):
                name = f"{host}-c{c}-s{k}"
                resident = (8 + 4 * k) * 1024 * MIB
                port = 8000 + 10 * c + k
                seats.append(
                    {
                        "name": name,
                        "host": host,
                        "gpus": [c],
                        "resident": resident,
                        "state": "running",
                        "match": f"--port {port}$",
                    }
                )
                processes.append(
                    {"pid": 1000 + port, "used_bytes": resident, "cmdline": f"srv --port {port}"}
                )
            used = sum(p["used_bytes"] for p in processes)
            cards.append(
                {
                    "index": c,
                    "uuid": f"GPU-{h:03d}-{c}",
                    "total_bytes": TOTAL,
                    "reserved_bytes": DRIVER,
                    "used_bytes": used,
                    "free_bytes": TOTAL - DRIVER - used,
                    "processes": processes,
                }
            )
        reserves.append(
            {"name": f"{host}-hold", "host": host, "gpu": CARDS - 1, "bytes": "30 GiB",
             "for": [f"{host}-c{CARDS - 1}-s0"]}
        )  # fmt: skip
        snapshots.append(
            Snapshot.model_validate(
                {"host": host, "taken_at": "2026-09-16T14:02:11Z", "cards": cards}
            )
        )
    catalogue = Catalogue.model_validate({"hosts": hosts, "reserves": reserves, "seats": seats})
    return catalogue, [attribute(s, catalogue) for s in snapshots]


def exported_series(snapshots: list[Snapshot]) -> list[dict[str, str]]:
    """Every series the fleet's exporters publish, as label dicts with `__name__`."""
    series = []
    for snapshot in snapshots:
        text = render(Reading(snapshot.host, snapshot, 0.001)).decode()
        for family in text_string_to_metric_families(text):
            series += [{**s.labels, "__name__": s.name} for s in family.samples]
    return series


def touched(alerts: Alerts, series: list[dict[str, str]]) -> dict[str, list[int]]:
    """Per alert: how many exported series each of its rules' selectors select."""
    by_metric: dict[str, list[dict[str, str]]] = defaultdict(list)
    for labels in series:
        by_metric[labels["__name__"]].append(labels)
    counts: dict[str, list[int]] = defaultdict(list)
    for rule in alerts.rules:
        counts[rule.alert].append(
            sum(
                1
                for selector in rule.selectors
                for labels in by_metric[selector.metric]
                if selector.selects(labels)
            )
        )
    return counts


def _median_s(fn: Callable[[], object], repeat: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def run() -> str:
    """The Markdown section for docs/bench.md."""
    catalogue, snapshots = fleet()
    repeat = 3 if quick() else 7
    build_s, _ = _median_s(lambda: render_rules(build_alerts(catalogue), source="fleet"), repeat)
    alerts = build_alerts(catalogue)
    text = render_rules(alerts, source="fleet")
    lines = [
        "## alerts",
        "",
        f"`gpuplan alerts` for {HOSTS} hosts × {CARDS} cards × {SEATS_PER_CARD} running seats per "
        f"card ({len(catalogue.seats)} seats, one reserve per host): {len(alerts.rules)} rules, "
        f"{len(text) / 2**20:.1f} MiB of YAML, built and rendered in {build_s:.2f} s (median of "
        f"{repeat}).",
        "",
    ]
    promtool = shutil.which("promtool")
    if promtool is None:
        lines += ["`promtool` not found: `promtool check rules` not timed.", ""]
    else:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "gpuplan-alerts.yml"
            path.write_text(text)

            def check() -> None:
                done = subprocess.run(
                    [promtool, "check", "rules", str(path)], capture_output=True, check=False
                )
                if done.returncode != 0:
                    raise RuntimeError(done.stdout.decode() + done.stderr.decode())

            check_s, times = _median_s(check, repeat)
        verdict = "under" if check_s < CHECK_TARGET_S else "OVER"
        lines += [
            f"`promtool check rules` accepts it in **{check_s:.2f} s** (median of {repeat}: "
            f"{', '.join(f'{t:.2f}' for t in times)}), {verdict} the {CHECK_TARGET_S:g} s target.",
            "",
        ]
    series = exported_series(snapshots)
    counts = touched(alerts, series)
    lines += [
        f"Series each rule touches (its selectors, matched against the {len(series):,} series "
        "the fleet's exporters publish in this state):",
        "",
        "| alert | rules | series per rule (min / median / max) | series, all its rules |",
        "|---|---:|---:|---:|",
    ]
    for name in ALERTS:
        per_rule = counts.get(name, [])
        if not per_rule:
            lines.append(f"| `{name}` | 0 | - | 0 |")
            continue
        lines.append(
            f"| `{name}` | {len(per_rule)} | {min(per_rule)} / {statistics.median(per_rule):g} / "
            f"{max(per_rule)} | {sum(per_rule):,} |"
        )
    lines += [
        "",
        "Each rule reads one host's series (a series two selectors read counts twice), so a rule's "
        "cost does not grow with the fleet; the group's cost grows with the catalogue.",
    ]
    return "\n".join(lines) + "\n"
