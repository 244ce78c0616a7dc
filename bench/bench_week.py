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
from typing import Any, NamedTuple

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
# The commit before plan and ledger --window read the rollups first.
BEFORE = "e411f6d"

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


def before_tree(folder: Path, commit: str = BEFORE) -> Path | None:
    """The tree of `commit` (by default BEFORE: every `--window` of plan and ledger read every
    moment), extracted under `folder`; None where git cannot give it (then only this tree is
    measured)."""
    target = folder / f"before-{commit}"
    target.mkdir()
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", commit],
            capture_output=True,
            check=True,
            timeout=120,
        )
        subprocess.run(
            ["tar", "-x", "-C", str(target)], input=archive.stdout, check=True, timeout=120
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return target


def _command(tree: Path, argv: list[str], ledger: Path, copy: Path | None = None) -> Run:
    """Wall and CPU seconds, and the exit, of one `gpuplan` process run from `tree` on `ledger`
    (on a fresh copy of it at `copy` when given: `plan` records its decisions)."""
    if copy is not None:
        for stale in copy.parent.glob(copy.name + "*"):
            stale.unlink()
        shutil.copyfile(ledger, copy)
        ledger = copy
    cpu = children_cpu_s()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "placement", *argv, "--ledger", str(ledger), "--max-age", "1000d"],
        capture_output=True,
        cwd=tree,
        env={**_env(), "PYTHONPATH": str(tree)},
        timeout=900,
    )
    return Run(time.perf_counter() - start, children_cpu_s() - cpu, done.returncode)


class Run(NamedTuple):
    wall_s: float
    cpu_s: float
    exit: int


def _alternated(
    before: Path | None, argv: list[str], ledger: Path, runs: int, copy: Path | None = None
) -> tuple[list[Run], list[Run]]:
    """`runs` of `argv` from the tree before and from this one, alternated run by run (one
    warm-up each first: bytecode written, the ledger in the page cache)."""
    trees = [t for t in (before, ROOT) if t is not None]
    for tree in trees:
        _command(tree, argv, ledger, copy)
    found: dict[Path, list[Run]] = {tree: [] for tree in trees}
    for _ in range(runs):
        for tree in trees:
            found[tree].append(_command(tree, argv, ledger, copy))
    return (found[before] if before is not None else []), found[ROOT]


def _row(name: str, runs: list[Run], target: str = "") -> str:
    if not runs:
        return f"| {name} | (not measured) | | | {target} |"
    wall = statistics.median(r.wall_s for r in runs)
    cpu = statistics.median(r.cpu_s for r in runs)
    return f"| {name} | {wall:.2f} s | {cpu:.2f} s | {runs[0].exit} | {target} |"


def run() -> str:
    """The Markdown section: `check --window 7d` and `check` alone; `plan --window` and `ledger
    --window` before and after; the replay in process; sizes; the fleet's `ledger --window`."""
    runs = 3 if quick() else 5
    hosts = 128 if quick() else FLEET_HOSTS
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        before = before_tree(folder)
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
        three = max(3, runs - 2)
        common = ["--catalogue", str(catalogue), "--window", "7d", "--json"]
        plans = _alternated(before, ["plan", *common], ledger, three, folder / "plan.sqlite")
        ledgers = _alternated(before, ["ledger", *common], ledger, three)
        full_s, pruned_s, stats = _replays(catalogue, ledger, three)
        raw_size = _size(ledger)
        compact_size = _compacted_size(ledger, folder)
        fleet = folder / "fleet.sqlite"
        began = time.perf_counter()
        write_fleet(fleet, hosts)
        built_s = time.perf_counter() - began
        fleet_size = _size(fleet)
        fleet_catalogue_path = folder / "fleet.yaml"
        fleet_catalogue_path.write_text(fleet_catalogue(hosts))
        fleet_argv = ["ledger", "--catalogue", str(fleet_catalogue_path), "--window", "7d"]
        # Before, each host was replayed on its raw moments alone: one run, it takes minutes.
        fleet_before = [_command(before, [*fleet_argv, "--json"], fleet)] if before else []
        _, fleet_json = _alternated(None, [*fleet_argv, "--json"], fleet, 3)
        _, fleet_text = _alternated(None, fleet_argv, fleet, 3)
        _, fleet_plain = _alternated(None, [*fleet_argv[:3], "--json"], fleet, 3)
    wall = statistics.median(w for w, _, _ in windowed)
    cpu = statistics.median(c for _, c, _ in windowed)
    lines = [
        "## week",
        "",
        f"One host, 8 cards, 7 days of one-minute moments ({weekfile.WEEK_MINUTES:,} snapshots, "
        "`bench/weekfile.py`, imported with `snapshot --from`): the whole `gpuplan` process "
        f"on that ledger, median of {runs} runs after one warm-up (bytecode written); 1-minute "
        f"load average {load:.1f} on {os.cpu_count()} cores when it started. The seat "
        "needs 80 GiB of card 1, where Ollama loads 20 GiB every afternoon: the window refuses "
        "it by `peak` (exit 1), the newest snapshot alone passes it (exit 0).",
        "",
        "| command | wall (median) | CPU (median) | exit | target |",
        "|---|---:|---:|---:|---:|",
        _row("`check tts --window 7d`", [Run(*r) for r in windowed], f"< {TARGET_S:.0f} s"),
        _row("`check tts` (the newest snapshot alone)", [Run(*r) for r in alone]),
        "",
        _check_verdict(wall, cpu),
        "",
        f"`plan --window 7d --json` and `ledger --window 7d --json` on the same ledger, before "
        f"(commit {BEFORE}: every moment read and replayed) and after (the rollups first, raw "
        f"moments only for the hours they cannot decide), alternated run by run, median of {three} "
        "(`plan` on a fresh copy of the ledger each run: it records its decisions):",
        "",
        "| command | wall (median) | CPU (median) | exit | |",
        "|---|---:|---:|---:|---:|",
        _row("`plan --window 7d`, before", plans[0]),
        _row("`plan --window 7d`, after", plans[1]),
        _row("`ledger --window 7d`, before", ledgers[0]),
        _row("`ledger --window 7d`, after", ledgers[1]),
        "",
        "`ledger --window` asks of each card how many moments had less room than now: with every "
        "card's vLLM server wandering by the minute, nearly every hour may hold one, so it reads "
        "nearly every moment either way.",
        "",
        f"The window's replay in process (the same `window` block from both, asserted), median of "
        f"{three}:",
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
        f"A fleet of {hosts:,} hosts × 8 cards, {hosts * 8:,} running seats: a week of hourly "
        f"rollups in one ledger ({fleet_size / MIB:.0f} MiB, written in {built_s:.0f} s), as "
        "`compact` leaves it: each host's newest snapshot raw, the hours before as rollups. "
        "`gpuplan ledger --window 7d` as a whole process: before, each host replayed on the "
        "raw moments it kept (one run); after, every host judged on its hourly rollups in one "
        "query (`LedgerHistory.daily_rooms`): per card room now, window room and when, days to "
        "full. Beside it, the same `ledger` without `--window`.",
        "",
        "| command | wall (median) | CPU (median) | exit | target |",
        "|---|---:|---:|---:|---:|",
        _row(f"`ledger --window 7d --json`, before (one run), {hosts:,} × 8", fleet_before),
        _row(
            f"`ledger --window 7d --json`, after, {hosts:,} × 8",
            fleet_json,
            f"< {FLEET_TARGET_S:.0f} s",
        ),
        _row(
            f"`ledger --window 7d` (text), after, {hosts:,} × 8",
            fleet_text,
            f"< {FLEET_TARGET_S:.0f} s",
        ),
        _row(f"`ledger --json` (no window), {hosts:,} × 8", fleet_plain),
        "",
        _verdict(fleet_json, fleet_text),
    ]
    if before is None:
        lines += ["", f"(git could not give commit {BEFORE}: the before rows were not measured.)"]
    if quick():
        lines += ["", f"(--quick: {hosts} hosts, not {FLEET_HOSTS:,}.)"]
    return "\n".join(lines)


def _check_verdict(wall: float, cpu: float) -> str:
    if wall < TARGET_S and cpu < TARGET_S:
        return "`check --window 7d` meets its target (wall and CPU)."
    if cpu < TARGET_S:
        return (
            "`check --window 7d` meets its target in CPU seconds; the wall time on this shared "
            "machine runs above it."
        )
    return "`check --window 7d` MISSES its target."


def _verdict(*found: list[Run]) -> str:
    walls = [statistics.median(r.wall_s for r in runs) for runs in found]
    cpus = [statistics.median(r.cpu_s for r in runs) for runs in found]
    if max(walls) < FLEET_TARGET_S:
        return "The fleet's `ledger --window` meets its target (wall and CPU)."
    if max(cpus) < FLEET_TARGET_S:
        return (
            "The fleet's `ledger --window` meets its target in CPU seconds; the wall time on this "
            "shared machine runs above it."
        )
    return "The fleet's `ledger --window` MISSES its target."
