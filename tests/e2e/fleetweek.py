"""A synthetic fleet's week of one-minute readings, as OpenMetrics for `promtool tsdb
create-blocks-from openmetrics` and as ledger rows: the same figures for both report paths.

Per host `fl-NN`, 8 H200s; every card runs seat `a`, even cards also seat `b`. The story:
fl-00 card 1's seat `a` leaks 3 GiB over the window; fl-00 card 7 is reserved whole for
flash-next and seat fl-00-g6-b spills 6 GiB onto it one afternoon; fl-03 card 2 hosts a
foreign notebook all week; fl-01 card 3 gains 1 GiB no seat explains on the last day; fl-05's
series stop at noon on day 5. Shared with bench/.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from inventory.ledger.writes import CardValues, ProcessValues, SnapshotValues
from tests.e2e.harness import openmetrics_blocks

MIB = 2**20
GIB = 2**30
TOTAL = 150_754_820_096  # an NVIDIA H200 (docs/facts.md §1)
RESERVED = 644_939_776
CUDA = TOTAL - RESERVED
DAY = 1440  # minutes
START = datetime(2026, 9, 7, tzinfo=UTC)  # Monday of ISO week 2026-W37
WEEK = "2026-W37"

SPILL = (2 * DAY + 13 * 60, 2 * DAY + 17 * 60)  # day 3, 13:00 to 17:00
SPILL_BYTES = 6 * GIB
FOREIGN_BYTES = 2 * GIB
UNEXPLAINED_FROM = 6 * DAY
STOPPED_HOST = 5
STOP_AT = 4 * DAY + 12 * 60


@dataclass(frozen=True)
class Process:
    pid: int
    seat: str | None  # None: foreign
    cmdline: str
    card: int
    base: int  # bytes before noise
    kind: str  # "a", "b", "spill", "foreign"


@dataclass(frozen=True)
class FleetWeek:
    """`hosts` hosts of `cards` cards over `minutes` one-minute readings from START."""

    hosts: int = 16
    cards: int = 8
    minutes: int = 7 * DAY
    # Hosts whose series a scrape job labelled `host` itself: gpuplan's label is `exported_host`.
    exported: frozenset[int] = frozenset()
    # The story's moments, in minutes from START (a shorter window moves them earlier).
    spill: tuple[int, int] = SPILL
    stop_at: int = STOP_AT
    unexplained_from: int = UNEXPLAINED_FROM

    @property
    def start_s(self) -> int:
        return int(START.timestamp())

    def host(self, h: int) -> str:
        return f"fl-{h:02d}"

    def host_labels(self, h: int) -> str:
        """The labels naming host `h` in its series, as Prometheus stored them."""
        if h in self.exported:
            return f'exported_host="{self.host(h)}",host="scrape-target-{h}"'
        return f'host="{self.host(h)}"'

    def minutes_of(self, h: int) -> int:
        """How many readings host `h` has (the stopped host fewer)."""
        return min(self.minutes, self.stop_at) if h == STOPPED_HOST else self.minutes

    def declared_a(self, h: int, c: int) -> int:
        return (30 + (h * 8 + c) % 20) * GIB

    def processes(self, h: int) -> list[Process]:
        host = self.host(h)
        out: list[Process] = []
        for c in range(self.cards):
            if h == 0 and c == 7:
                continue  # held whole for flash-next
            port = 10000 + h * 100 + c * 2
            out.append(
                Process(
                    1000 + c * 10, f"{host}-g{c}-a", f"vllm serve a --port {port}", c,
                    self.declared_a(h, c) - 512 * MIB, "a",
                )
            )  # fmt: skip
            if c % 2 == 0:
                out.append(
                    Process(
                        1001 + c * 10, f"{host}-g{c}-b", f"vllm serve b --port {port + 1}", c,
                        12 * GIB + 256 * MIB, "b",
                    )
                )  # fmt: skip
        if h == 0:
            out.append(
                Process(
                    99999, f"{host}-g6-b", f"vllm serve b --port {10000 + 6 * 2 + 1}", 7,
                    SPILL_BYTES, "spill",
                )
            )  # fmt: skip
        if h == 3:
            out.append(Process(4242, None, "python notebook.py", 2, FOREIGN_BYTES, "foreign"))
        return out

    def value(self, h: int, p: Process, t: int) -> int | None:
        """Bytes process `p` holds at minute `t`, None when it is not running then."""
        if p.kind == "spill":
            return p.base if self.spill[0] <= t < self.spill[1] else None
        noise = ((t * 7919 + h * 31 + p.card * 17 + p.pid) % 64) * 8 * MIB
        leak = 3 * GIB * t // self.minutes if (h == 0 and p.card == 1 and p.kind == "a") else 0
        return p.base + noise + leak

    def unexplained(self, h: int, c: int, t: int) -> int:
        return GIB if (h == 1 and c == 3 and t >= self.unexplained_from) else 0

    def catalogue(self) -> dict[str, Any]:
        """The catalogue of the fleet: its hosts, seats (running, matched by port) and the reserve."""
        seats: list[dict[str, Any]] = []
        for h in range(self.hosts):
            for p in self.processes(h):
                if p.kind not in ("a", "b"):
                    continue
                port = p.cmdline.rsplit(" ", 1)[1]
                seats.append(
                    {
                        "name": p.seat,
                        "host": self.host(h),
                        "gpus": [p.card],
                        "resident": self.declared_a(h, p.card) if p.kind == "a" else 12 * GIB,
                        "state": "running",
                        "match": f"--port {port}$",
                    }
                )
        seats.append(
            {
                "name": "flash-next",
                "host": "fl-00",
                "gpus": 1,
                "resident": 93 * GIB,
                "exclusive": True,
            }
        )
        return {
            "hosts": {
                self.host(h): {"cards": self.cards, "margin": "1 GiB"} for h in range(self.hosts)
            },
            "reserves": [
                {
                    "name": "flash-next-hold",
                    "host": "fl-00",
                    "gpu": 7,
                    "bytes": "card",
                    "for": ["flash-next"],
                }
            ],
            "seats": seats,
        }

    def card_minute(self, h: int, t: int, procs: list[Process]) -> list[tuple[int, int]]:
        """(used, free) per card at minute t."""
        used = [self.unexplained(h, c, t) for c in range(self.cards)]
        for p in procs:
            v = self.value(h, p, t)
            if v is not None:
                used[p.card] += v
        return [(u, CUDA - u) for u in used]

    # --- the ledger -----------------------------------------------------------------------

    def readings(self) -> Iterator[SnapshotValues]:
        """Every host's snapshot rows, minute by minute."""
        for h in range(self.hosts):
            host, procs = self.host(h), self.processes(h)
            for t in range(self.minutes_of(h)):
                moment = datetime.fromtimestamp(self.start_s + t * 60, UTC)
                cards = [
                    CardValues(c, f"GPU-{h}-{c}", "NVIDIA H200", TOTAL, RESERVED, u, f, None, None)
                    for c, (u, f) in enumerate(self.card_minute(h, t, procs))
                ]
                rows = []
                for p in procs:
                    v = self.value(h, p, t)
                    if v is not None:
                        rows.append(ProcessValues(p.card, p.pid, v, p.cmdline, p.seat))
                yield SnapshotValues(host, moment, "580.159.04", "12.580", cards, rows)

    # --- OpenMetrics ----------------------------------------------------------------------

    def write_openmetrics(
        self, out: TextIO, hosts: range | None = None, minutes: range | None = None
    ) -> int:
        """The exporter's series as OpenMetrics, family by family, each series in time order.

        Constant figures (total, reserve, error, NVML version) every 4 minutes: Prometheus's
        5-minute lookback still finds one at any moment. Returns the number of samples.
        """
        chosen = hosts if hosts is not None else range(self.hosts)
        span = minutes if minutes is not None else range(self.minutes)
        count = 0
        for family, every in (
            ("gpuplan_snapshot_timestamp_seconds", 1),
            ("gpuplan_poll_success", 1),
            ("gpuplan_card_used_bytes", 1),
            ("gpuplan_card_free_bytes", 1),
            ("gpuplan_card_total_bytes", 4),
            ("gpuplan_card_reserved_bytes", 4),
            ("gpuplan_card_error", 4),
            ("gpuplan_card_nvml_memory_version", 4),
            ("gpuplan_process_used_bytes", 1),
        ):
            out.write(f"# TYPE {family} gauge\n")
            for h in chosen:
                count += self._family(out, family, every, h, span)
        out.write("# EOF\n")
        return count

    def _family(self, out: TextIO, family: str, every: int, h: int, span: range) -> int:
        start = self.start_s
        n = range(span.start, min(span.stop, self.minutes_of(h)))
        lines: list[str] = []
        if family in ("gpuplan_snapshot_timestamp_seconds", "gpuplan_poll_success"):
            for t in n:
                value = start + t * 60 if family.endswith("seconds") else 1
                lines.append(f"{family}{{{self.host_labels(h)}}} {value} {start + t * 60}\n")
        elif family == "gpuplan_process_used_bytes":
            for p in self.processes(h):
                labels = f'{self.host_labels(h)},gpu="{p.card}",uuid="GPU-{h}-{p.card}",pid="{p.pid}",seat="{p.seat or "foreign"}"'
                for t in n:
                    v = self.value(h, p, t)
                    if v is not None:
                        lines.append(f"{family}{{{labels}}} {v} {start + t * 60}\n")
        else:
            lines = self._card_lines(family, every, h, n)
        out.writelines(lines)
        return len(lines)

    def _card_lines(self, family: str, every: int, h: int, n: range) -> list[str]:
        if not n:
            return []
        start = self.start_s
        procs = self.processes(h)
        fixed = {
            "gpuplan_card_total_bytes": TOTAL,
            "gpuplan_card_reserved_bytes": RESERVED,
            "gpuplan_card_error": 0,
            "gpuplan_card_nvml_memory_version": 2,
        }
        lines: list[str] = []
        table = {t: self.card_minute(h, t, procs) for t in n} if family not in fixed else None
        # Constant figures every `every` minutes from the window's start, and the host's last minute.
        times = [t for t in n if t % every == 0 or t == self.minutes_of(h) - 1]
        for c in range(self.cards):
            extra = ',error=""' if family == "gpuplan_card_error" else ""
            labels = f'{self.host_labels(h)},gpu="{c}",uuid="GPU-{h}-{c}"{extra}'
            for t in n if table is not None else times:
                if table is None:
                    v = fixed[family]
                else:
                    used, free = table[t][c]
                    v = used if family == "gpuplan_card_used_bytes" else free
                lines.append(f"{family}{{{labels}}} {v} {start + t * 60}\n")
        return lines


BLOCK = 120  # minutes: promtool's block length, aligned to the epoch as START is


def backfill(week: FleetWeek, workdir: Path, promtool: str, *, parallel: int = 6) -> Path:
    """Write the week as OpenMetrics and turn it into TSDB blocks, one 2-hour file at a time.

    promtool reads its whole input once per 2-hour block it makes, so a file per block reads each
    sample once (a week in one file took minutes); each run also idles about a second, so
    several run at once while the next file is written.
    """
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        runs = [
            pool.submit(openmetrics_blocks, promtool, text, data)
            for t0 in range(0, week.minutes, BLOCK)
            if (text := _block_file(week, workdir, range(t0, t0 + BLOCK))) is not None
        ]
        for run in runs:
            run.result()
    return data


def _block_file(week: FleetWeek, workdir: Path, minutes: range) -> Path | None:
    text = workdir / f"fleet-{minutes.start:05d}.om"
    with text.open("w") as out:
        written = week.write_openmetrics(out, None, minutes)
    if not written:
        text.unlink()
        return None
    return text
