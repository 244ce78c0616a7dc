"""The poller: one `NvmlSource` reading plus /proc cmdlines becomes a frozen `Snapshot`.

NVML lists PIDs of the host's PID namespace, so the poller must run in it: a container
needs `--pid=host`, or its /proc shows other processes (or none) under those numbers.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import UTC, datetime

from inventory.attribution import attribute
from inventory.nvml import NvmlSource, PynvmlSource, RawCard
from inventory.snapshot import Card, Process, Snapshot
from seats.model import Catalogue

CMDLINE_LIMIT = 64 * 1024


def read_proc_cmdline(pid: int) -> str | None:
    """`/proc/PID/cmdline` with NULs as spaces; None when the PID has vanished or is unreadable."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(CMDLINE_LIMIT)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    except OSError:
        return None  # ESRCH and friends: the process went away while we read
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", errors="replace")


def default_host(catalogue: Catalogue | None) -> str:
    """The catalogue's only host when it has exactly one, else this machine's host name."""
    if catalogue is not None and len(catalogue.hosts) == 1:
        return next(iter(catalogue.hosts))
    return socket.gethostname()


def card_from_raw(raw: RawCard, read_cmdline: Callable[[int], str | None]) -> Card:
    """A snapshot card from one NVML reading; a failed card keeps only index and error."""
    if raw.error is not None:
        return Card(index=raw.index, uuid=raw.uuid, name=raw.name, error=raw.error)
    processes = tuple(
        Process(pid=p.pid, used_bytes=p.used_bytes, cmdline=read_cmdline(p.pid))
        for p in raw.processes
    )
    return Card(
        index=raw.index,
        uuid=raw.uuid,
        name=raw.name,
        total_bytes=raw.total_bytes,
        reserved_bytes=raw.reserved_bytes,
        used_bytes=raw.used_bytes,
        free_bytes=raw.free_bytes,
        utilization_percent=raw.utilization_percent,
        processes=processes,
    )


def take_snapshot(
    source: NvmlSource,
    now: datetime,
    host: str,
    *,
    catalogue: Catalogue | None = None,
    read_cmdline: Callable[[int], str | None] = read_proc_cmdline,
) -> Snapshot:
    """Read every card of `source` now and return the snapshot of DESIGN.md.

    `taken_at` is `now` cut to whole seconds (the ledger keys snapshots by host and second).
    With a catalogue, each process's `seat` is filled by the seats' `match` regexes.
    """
    driver = source.driver_version()
    nvml_version = source.nvml_version()
    cards = tuple(card_from_raw(raw, read_cmdline) for raw in source.read_cards())
    snapshot = Snapshot(
        host=host,
        taken_at=now.astimezone(UTC).replace(microsecond=0),
        driver=driver,
        nvml_version=nvml_version,
        cards=cards,
    )
    if catalogue is not None:
        snapshot = attribute(snapshot, catalogue)
    return snapshot


def live_snapshot(
    *, catalogue: Catalogue | None, now: datetime, host: str | None = None
) -> Snapshot:
    """A snapshot of this machine's cards through NVML (exit 3 via NvmlUnavailableError without it)."""
    with PynvmlSource() as source:
        return take_snapshot(source, now, host or default_host(catalogue), catalogue=catalogue)
