"""Benchmark of the week: `check --window 7d` on one host, 8 cards, 7 days of one-minute moments
in a ledger (`bench/weekfile.py`, imported with `snapshot --from`), the whole process, beside the
same check without the window; the window's replay in process, every moment read (before) and
from the rollups first (after); the ledger's size per host-week; a fleet of 1,024 × 8 from
rollups.

Targets (issue 34): `check --window 7d` under 1 s whole; the fleet from rollups under 20 s.
Medians of 3 runs or more.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench import ROOT, children_cpu_s, quick, weekfile
from inventory.attribution import attribute
from inventory.history.ledger import LedgerHistory
from inventory.ledger.rollups import HourRollups
from inventory.ledger.store import open_ledger
from inventory.snapshot import Card, Process, Snapshot
from placement.fit.week import NewSeat, WindowRules, replay
from placement.fit.week.prune import Pruned, replay_history
from seats.loader import load_catalogue

TARGET_S = 1.0
FLEET_TARGET_S = 20.0
HOST = "bench-h1"
GIB = 2**30
MIB = 2**20
FLEET_HOSTS = 1024

# The week's host as a catalogue: each card's vLLM server a running seat, and a new seat of
# 80 GiB for card 1, where Ollama loads 20 GiB every afternoon (14:00–15:59 UTC).
CATALOGUE = (
    "hosts:\n"
    f"  {HOST}: {{cards: 8, card_total: 150754820096, cuda_context: 1276 MiB, margin: 256 MiB}}\n"
    "seats:\n"
    + "".join(
        f"  - {{name: seat-{i}, host: {HOST}, gpus: [{i}], resident: 41 GiB, state: running, "
        f"match: 'vllm.*--port[ =]{8000 + i}'}}\n"
        for i in range(8)
    )
    + f"  - {{name: tts, host: {HOST}, gpus: [1], resident: 80 GiB}}\n"
)


def _env() -> dict[str, str]:
    """This environment, writing bytecode: a command runs from its compiled modules after the
    first run, as it does once installed."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _check(catalogue: Path, ledger: Path, *window: str) -> tuple[float, float, int]:
    """Wall and CPU seconds, and the exit, of one `gpuplan check tts` process."""
    cpu = children_cpu_s()
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable, "-m", "placement", "check", "tts", "--catalogue", str(catalogue),
            "--ledger", str(ledger), "--max-age", "1000d", "--no-hold", *window,
        ],
        capture_output=True,
        cwd=ROOT,
        env=_env(),
        timeout=300,
    )  # fmt: skip
    return time.perf_counter() - start, children_cpu_s() - cpu, done.returncode


def _timed(call: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """The median seconds of `runs` calls, and the last call's answer."""
    seconds: list[float] = []
    found = None
    for _ in range(runs):
        began = time.perf_counter()
        found = call()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds), found


def _replays(catalogue_path: Path, ledger: Path, runs: int) -> tuple[float, float, Pruned]:
    """The window's replay in process, every moment read vs the rollups first (the same
    window block asserted): median seconds of each, and what the pruned one read."""
    catalogue = load_catalogue(str(catalogue_path))
    with open_ledger(ledger, readonly=True) as opened:
        newest = opened.latest(HOST)
        assert newest is not None
        end = newest.taken_at
        rules = WindowRules(start=end - timedelta(days=7), end=end)
        history = LedgerHistory(opened.connection)
        snapshot = attribute(newest, catalogue)
        seats = [NewSeat("tts", (1,), 80 * GIB, resident_bytes=80 * GIB)]
        stop = end + timedelta(seconds=1)

        def every() -> Any:
            return replay(
                catalogue, snapshot, history.moments(HOST, rules.start, stop), seats, rules
            )

        stats = Pruned()
        full_s, full = _timed(every, runs)
        pruned_s, pruned = _timed(
            lambda: replay_history(catalogue, snapshot, history, seats, rules, stats), runs
        )
    if [w.to_json() for w in full] != [w.to_json() for w in pruned]:
        raise AssertionError("the replay from rollups differs from the replay of every moment")
    return full_s, pruned_s, stats


def _size(path: Path) -> int:
    """The ledger's bytes once its write-ahead log is folded in."""
    with open_ledger(path) as ledger:
        ledger.fold_wal()
    return path.stat().st_size


def _compacted_size(ledger: Path, folder: Path) -> int:
    """The size of a copy of the ledger after `compact` of its whole week (rollups only)."""
    copy = folder / "compacted.sqlite"
    shutil.copyfile(ledger, copy)
    with open_ledger(copy) as opened:
        opened.compact(weekfile.START + timedelta(days=8))
    return _size(copy)


def write_fleet(path: Path, hosts: int, cards: int = 8, hours: int = 7 * 24) -> None:
    """A ledger of `hosts` hosts' hourly rollups over `hours` (each card a vLLM server wandering
    by the hour, card 1 an Ollama load 14:00–15:59 UTC), as `compact` leaves a fleet's week: the
    last hour's raw moment of each host kept (its newest snapshot), the hours before as rollups."""
    start_s = int(weekfile.START.timestamp())
    total = weekfile.TOTAL - weekfile.RESERVED
    last_s = start_s + (hours - 1) * 3600
    with open_ledger(path) as ledger:
        for first in range(0, hosts, 64):
            rollups = HourRollups.empty()
            for h in range(first, min(hosts, first + 64)):
                host = f"fleet-{h:04d}"
                for hour in range(hours - 1):
                    hour_s = start_s + hour * 3600
                    load = 20 * GIB if hour_s // 3600 % 24 in (14, 15) else 0
                    for card in range(cards):
                        serve = _serve(hour, card, h)
                        used = serve + 500 * MIB + (load if card == 1 else 0)
                        at = hour_s + (hour + card) % 60 * 60
                        rollups.cards[(host, hour_s, card)] = [60, 0, total - used, at, used]
                        rollups.commands[(host, hour_s, card, _seat(h, card), _line(card))] = [
                            60, serve - 3 * MIB, hour_s, serve, at,
                        ]  # fmt: skip
                        if card == 1 and load:
                            rollups.commands[(host, hour_s, card, "", "ollama serve")] = [
                                60, load, hour_s, load, hour_s,
                            ]  # fmt: skip
            cursor = ledger.connection.cursor()
            cursor.execute("BEGIN")
            rollups.write(cursor)
            cursor.execute(
                "INSERT INTO raw_kept(host, since_s) VALUES " + ", ".join(
                    f"('fleet-{h:04d}', {last_s})" for h in range(first, min(hosts, first + 64))
                )
            )  # fmt: skip
            cursor.execute("COMMIT")
        at = weekfile.START + timedelta(hours=hours - 1, minutes=59)
        ledger.append_many(_newest(f"fleet-{h:04d}", h, at, cards, hours - 1) for h in range(hosts))


def _serve(hour: int, card: int, h: int) -> int:
    return 40 * GIB + ((hour * 7 + card * 13 + h) % 97) * MIB


def _seat(h: int, card: int) -> str:
    return f"s{h:04d}-{card}"


def _line(card: int) -> str:
    return f"python3 -m vllm.entrypoints.openai.api_server --port {8000 + card}"


def _newest(host: str, h: int, at: datetime, cards: int, hour: int) -> Snapshot:
    """The host's newest snapshot, at the last minute of the week."""
    built = []
    for card in range(cards):
        serve = _serve(hour, card, h)
        used = serve + 500 * MIB
        built.append(
            Card(
                index=card,
                uuid=f"GPU-{host}-{card}",
                name="NVIDIA H200",
                total_bytes=weekfile.TOTAL,
                reserved_bytes=weekfile.RESERVED,
                used_bytes=used,
                free_bytes=weekfile.TOTAL - weekfile.RESERVED - used,
                processes=(
                    Process(
                        pid=4000 + card, used_bytes=serve, cmdline=_line(card), seat=_seat(h, card)
                    ),
                ),
            )
        )
    return Snapshot(host=host, taken_at=at, driver="580.95.05", cards=tuple(built))


def fleet_catalogue(hosts: int, cards: int = 8) -> str:
    """The fleet's catalogue: each card's vLLM server a running seat."""
    lines = ["hosts:"]
    lines += [
        f"  fleet-{h:04d}: {{cards: {cards}, card_total: {weekfile.TOTAL}, cuda_context: 1276 MiB, "
        "margin: 256 MiB}"
        for h in range(hosts)
    ]
    lines.append("seats:")
    lines += [
        f"  - {{name: {_seat(h, c)}, host: fleet-{h:04d}, gpus: [{c}], resident: 41 GiB, "
        f"state: running, match: 'vllm.*--port[ =]{8000 + c}'}}"
        for h in range(hosts)
        for c in range(cards)
    ]
    return "\n".join(lines) + "\n"


def fleet_rooms(path: Path, hosts: int) -> dict[tuple[str, int], tuple[int, int]]:
    """Each card's least free over the week and when, read from every host's rollups through
    the history interface (`LedgerHistory.rollups`): the figures a fleet's `--window` question
    starts from, hour by hour."""
    start = weekfile.START
    end = start + timedelta(days=7)
    out: dict[tuple[str, int], tuple[int, int]] = {}
    with open_ledger(path, readonly=True) as ledger:
        history = LedgerHistory(ledger.connection)
        for h in range(hosts):
            host = f"fleet-{h:04d}"
            for row in history.rollups(host, start, end).cards:
                if row.min_free_bytes is None or row.min_free_at is None:
                    continue
                at = int(row.min_free_at.timestamp())
                key = (host, row.card)
                found = out.get(key)
                if found is None or (row.min_free_bytes, at) < found:
                    out[key] = (row.min_free_bytes, at)
    return out


def fleet_least(path: Path) -> dict[tuple[str, int], tuple[int, int]]:
    """The same from one query over every host (`LedgerHistory.daily_least`: each card's least
    free per day of the window, whose least is the week's)."""
    start = weekfile.START
    out: dict[tuple[str, int], tuple[int, int]] = {}
    with open_ledger(path, readonly=True) as ledger:
        for row in LedgerHistory(ledger.connection).daily_least(start, start + timedelta(days=7)):
            key, found = (row.host, row.card), (row.min_free_bytes, row.min_free_at_s)
            if key not in out or found < out[key]:
                out[key] = found
    return out


def run() -> str:
    """The Markdown section: `check --window 7d` and `check` alone, wall and CPU; the replay
    before and after; sizes; the fleet."""
    runs = 3 if quick() else 5
    hosts = 128 if quick() else FLEET_HOSTS
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        source = weekfile.write(folder / "week.jsonl")
        ledger = folder / "week.sqlite"
        subprocess.run(
            [sys.executable, "-m", "placement", "snapshot", "--from", str(source),
             "--ledger", str(ledger)],
            check=True,
            capture_output=True,
            cwd=ROOT,
            timeout=300,
        )  # fmt: skip
        catalogue = folder / "catalogue.yaml"
        catalogue.write_text(CATALOGUE)
        _check(catalogue, ledger, "--window", "7d")  # bytecode written, files in the page cache
        windowed = [_check(catalogue, ledger, "--window", "7d") for _ in range(runs)]
        alone = [_check(catalogue, ledger) for _ in range(runs)]
        full_s, pruned_s, stats = _replays(catalogue, ledger, max(3, runs - 2))
        raw_size = _size(ledger)
        compact_size = _compacted_size(ledger, folder)
        fleet = folder / "fleet.sqlite"
        began = time.perf_counter()
        write_fleet(fleet, hosts)
        built_s = time.perf_counter() - began
        fleet_size = _size(fleet)
        fleet_s, rooms = _timed(lambda: fleet_rooms(fleet, hosts), 3)
        if len(rooms) != hosts * 8:
            raise AssertionError(f"the fleet read {len(rooms)} cards, not {hosts * 8}")
        daily_s, least = _timed(lambda: fleet_least(fleet), 3)
        if least != rooms:
            raise AssertionError("the daily least free differs from the rollups read host by host")
    wall = statistics.median(w for w, _, _ in windowed)
    cpu = statistics.median(c for _, c, _ in windowed)
    lines = [
        "## week",
        "",
        f"One host, 8 cards, 7 days of one-minute moments ({weekfile.WEEK_MINUTES:,} snapshots, "
        "`bench/weekfile.py`, imported with `snapshot --from`): the whole `gpuplan check` process "
        f"on that ledger, median of {runs} runs after one warm-up (bytecode written). The seat "
        "needs 80 GiB of card 1, where Ollama loads 20 GiB every afternoon: the window refuses "
        "it by `peak` (exit 1), the newest snapshot alone passes it (exit 0).",
        "",
        "| command | wall (median) | CPU (median) | exit | target |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, found in (
        ("`check tts --window 7d`", windowed),
        ("`check tts` (the newest snapshot alone)", alone),
    ):
        target = f"< {TARGET_S:.0f} s" if "window" in name else ""
        lines.append(
            f"| {name} | {statistics.median(w for w, _, _ in found):.2f} s | "
            f"{statistics.median(c for _, c, _ in found):.2f} s | {found[0][2]} | {target} |"
        )
    lines += [
        "",
        f"`check --window 7d` {'meets' if wall < TARGET_S and cpu < TARGET_S else 'MISSES'} "
        "its target (wall and CPU).",
        "",
        "The window's replay in process (the same `window` block from both, asserted), median of "
        f"{max(3, runs - 2)}:",
        "",
        "| replay | seconds (median) | moments read raw |",
        "|---|---:|---:|",
        f"| every moment (`replay` of `History.moments`), before | {full_s:.3f} | "
        f"{weekfile.WEEK_MINUTES:,} × 8 cards |",
        f"| rollups first (`prune.replay_history`), after | {pruned_s:.3f} | "
        f"{stats.raw_moments:,} × 1 card ({stats.raw_hours} of {stats.hours} hours) |",
        "",
        "| ledger per host-week | size |",
        "|---|---:|",
        f"| raw moments + hourly rollups | {raw_size / MIB:.1f} MiB |",
        f"| after `compact` of the whole week (rollups only) | {compact_size / MIB:.2f} MiB |",
        "",
        f"A fleet of {hosts:,} hosts × 8 cards, a week of hourly rollups in one ledger "
        f"({fleet_size / MIB:.0f} MiB, written in {built_s:.0f} s, as `compact` leaves it): every "
        "host's rollups read through `LedgerHistory.rollups` and each card's least free of the "
        "week and when (the figures a fleet's `ledger --window` starts from), median of 3; then "
        "the same from one query over every host, each card's least free per day of the window "
        "(`LedgerHistory.daily_least`, the trend's daily minima too; the same answer, asserted). "
        "`ledger --window` itself still reads each host's moments (`open_windows`); "
        "`prune.open_windows_history` gives the same windows from the rollups first. Before: "
        f"the replay of every moment, {full_s:.2f} s a host here, is about "
        f"{full_s * FLEET_HOSTS / 60:.0f} min for {FLEET_HOSTS:,} hosts (not run).",
        "",
        "| fleet question | hosts × cards | seconds (median) | target |",
        "|---|---:|---:|---:|",
        f"| every card's least free of the week, host by host (`LedgerHistory.rollups`) | "
        f"{hosts:,} × 8 | {fleet_s:.1f} | < {FLEET_TARGET_S:.0f} s |",
        f"| every card's least free per day, one query (`LedgerHistory.daily_least`) | "
        f"{hosts:,} × 8 | {daily_s:.1f} | < {FLEET_TARGET_S:.0f} s |",
        "",
        f"From rollups host by host the fleet {'meets' if fleet_s < FLEET_TARGET_S else 'MISSES'} "
        f"its target; in one query it {'meets' if daily_s < FLEET_TARGET_S else 'MISSES'} it.",
    ]
    if quick():
        lines += ["", f"(--quick: {hosts} hosts, not {FLEET_HOSTS:,}.)"]
    return "\n".join(lines)
