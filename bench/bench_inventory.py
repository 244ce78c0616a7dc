"""Benchmarks of the inventory: snapshot overhead over NVML, snapshot + ledger write, a year-long ledger.

`run()` returns a Markdown section for `make bench`; figures are medians on this machine.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from inventory.fake import FakeNvml, h200_idle_card
from inventory.ledger.store import open_ledger
from inventory.nvml import RawProcess
from inventory.poller import take_snapshot

MIB = 2**20
GIB = 2**30
# Measured on an NVIDIA H200 (docs/gpu-check-h200.md): one full card reading through NVML.
H200_RAW_CARD_US = 47.5
YEAR_MINUTES = 365 * 24 * 60
CARDS = 8
START = datetime(2025, 1, 1, tzinfo=UTC)


def _median_s(
    fn: Callable[[], object], repeat: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def _cmdlines(pid: int) -> str:
    return f"python3 -m vllm.entrypoints.openai.api_server --port {pid}"


def _fake(cards: int, processes: int) -> FakeNvml:
    return FakeNvml(
        h200_idle_card(
            i,
            tuple(
                RawProcess(pid=9000 + i * 10 + n, used_bytes=(n + 1) * GIB)
                for n in range(processes)
            ),
        )
        for i in range(cards)
    )


def snapshot_overhead() -> list[str]:
    """take_snapshot over FakeNvml vs the fake's own calls: what the poller adds per card."""
    fake = _fake(1, 4)
    now = datetime.now(UTC)
    raw = _median_s(fake.read_cards, 2000) * 1e6
    snap = _median_s(lambda: take_snapshot(fake, now, "bench", read_cmdline=_cmdlines), 2000) * 1e6
    added = snap - raw
    return [
        "| one card, 4 processes | µs |",
        "|---|---:|",
        f"| FakeNvml `read_cards` (the raw calls, faked) | {raw:.1f} |",
        f"| `take_snapshot` over it (cmdlines, frozen Snapshot) | {snap:.1f} |",
        f"| added by the poller | {added:.1f} |",
        f"| ratio vs the fake alone | {snap / raw:.1f}× |",
        f"| projected ratio on an H200 (raw {H200_RAW_CARD_US} µs, measured) | "
        f"{(H200_RAW_CARD_US + added) / H200_RAW_CARD_US:.2f}× |",
    ]


def snapshot_and_write() -> tuple[list[str], float]:
    """Median ms of a snapshot of 8 cards (2 processes each) plus its ledger write."""
    fake = _fake(CARDS, 2)
    with (
        tempfile.TemporaryDirectory() as scratch,
        open_ledger(Path(scratch) / "l.sqlite") as ledger,
    ):
        minute = [0]

        def once() -> None:
            minute[0] += 1
            now = START + timedelta(minutes=minute[0])
            ledger.append(take_snapshot(fake, now, "bench", read_cmdline=_cmdlines))

        total = _median_s(once, 300) * 1e3
        write_only = []
        for _ in range(300):
            minute[0] += 1
            snapshot = take_snapshot(
                fake, START + timedelta(minutes=minute[0]), "bench", read_cmdline=_cmdlines
            )
            start = time.perf_counter()
            ledger.append(snapshot)
            write_only.append(time.perf_counter() - start)
    write = statistics.median(write_only) * 1e3
    return [
        "| 8 cards, 2 processes each | ms |",
        "|---|---:|",
        f"| snapshot + ledger write (one transaction, WAL) | {total:.2f} |",
        f"| of which the ledger write | {write:.2f} |",
    ], total


def build_year(path: Path) -> tuple[int, float]:
    """A year of one-minute snapshots of 8 cards, generated inside SQLite (two INSERT … SELECT)."""
    start = time.perf_counter()
    with open_ledger(path):
        pass  # creates the schema
    # Bulk set-up only: no journal and no fsync (the measured reads then open it as a ledger).
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = OFF")
    connection.execute("PRAGMA synchronous = OFF")
    try:
        base = int(START.timestamp())
        connection.execute("BEGIN")
        connection.execute(
            "WITH RECURSIVE m(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM m WHERE x + 1 < ?)"
            " INSERT INTO snapshots(id, host, taken_at_s, taken_at, driver)"
            " SELECT x + 1, 'bench', ? + 60 * x, strftime('%Y-%m-%dT%H:%M:%SZ', ? + 60 * x, 'unixepoch'),"
            " '580.159.04' FROM m",
            (YEAR_MINUTES, base, base),
        )
        cards = " UNION ALL ".join(f"SELECT {i} AS i" for i in range(CARDS))
        total = 97_871 * MIB
        reserved = 622 * MIB
        used = "(s.id * 7919 + c.i * 104729) % ?"
        connection.execute(
            "INSERT INTO cards(snapshot_id, idx, uuid, name, total_bytes, reserved_bytes, used_bytes,"
            " free_bytes, utilization_percent)"
            f" SELECT s.id, c.i, 'GPU-' || c.i, 'NVIDIA H200', ?, ?, {used}, ? - {used}, s.id % 101"
            f" FROM snapshots s CROSS JOIN ({cards}) c ORDER BY s.id, c.i",
            (total, reserved, 90 * GIB, total - reserved, 90 * GIB),
        )
        connection.execute("COMMIT")
        rows = int(connection.execute("SELECT COUNT(*) FROM cards").fetchone()[0])
    finally:
        connection.close()
    return rows, time.perf_counter() - start


def year_ledger() -> tuple[list[str], float]:
    """Build the year, then time a one-week range read for one host."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "year.sqlite"
        rows, built = build_year(path)
        size = path.stat().st_size
        since = START + timedelta(days=180)
        until = since + timedelta(days=7)
        with open_ledger(path, readonly=True) as ledger:
            week: list[object] = []

            def read_week() -> None:
                week[:] = list(ledger.snapshots("bench", since, until))

            objects = _median_s(read_week, 5)
            objects_cpu = _median_s(read_week, 5, time.process_time)
            count = len(week)

            def sql_week() -> None:
                ledger.connection.execute(
                    "SELECT c.idx, MIN(c.free_bytes), AVG(c.used_bytes) FROM snapshots s JOIN cards c"
                    " ON c.snapshot_id = s.id WHERE s.host = ? AND s.taken_at_s >= ? AND s.taken_at_s < ?"
                    " GROUP BY c.idx",
                    ("bench", int(since.timestamp()), int(until.timestamp())),
                ).fetchall()

            aggregate = _median_s(sql_week, 5)
            latest = _median_s(ledger.latest_per_host, 20)
    return [
        f"A year of one-minute snapshots of {CARDS} cards: {YEAR_MINUTES:,} snapshots, {rows:,} card rows "
        f"(no process rows), {size / GIB:.2f} GiB on disk, built in {built:.1f} s.",
        "",
        "| query | median s (wall) |",
        "|---|---:|",
        f"| one week of one host as Snapshot objects ({count:,} snapshots) | {objects:.3f} |",
        f"| the same, CPU time of this process | {objects_cpu:.3f} |",
        f"| one week, per-card min free / mean used in SQL | {aggregate:.3f} |",
        f"| latest snapshot per host | {latest:.4f} |",
    ], objects


def run() -> str:
    """The Markdown section for `make bench`."""
    load = os.getloadavg()[0]
    lines = ["## Inventory: poller and ledger", ""]
    lines += [f"{os.cpu_count()} cores, load average {load:.1f} when it started.", ""]
    lines += ["### Snapshot cost over the raw NVML calls", ""]
    lines += snapshot_overhead()
    lines += ["", "### Snapshot plus ledger write", ""]
    write_lines, _ = snapshot_and_write()
    lines += write_lines
    lines += ["", "### A year-long ledger", ""]
    year_lines, _ = year_ledger()
    lines += year_lines
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run())
