"""The poller: one `NvmlSource` reading plus /proc cmdlines becomes a frozen `Snapshot`.

NVML lists PIDs of the host's PID namespace, so the poller must run in it: a container
needs `--pid=host`, or its /proc shows other processes (or none) under those numbers.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from inventory.attribution import attribute
from inventory.fake import FakeNvml
from inventory.nvml import NvmlSource, PynvmlSource, RawCard
from inventory.proc import read_proc_cmdline, read_proc_parents
from inventory.snapshot import Card, Process, Snapshot, SnapshotError, load_snapshot
from seats.model import Catalogue

FAKE_ENV = "GPUPLAN_FAKE_NVML"


def default_host(catalogue: Catalogue | None) -> str:
    """The catalogue's only host when it has exactly one, else this machine's host name."""
    if catalogue is not None and len(catalogue.hosts) == 1:
        return next(iter(catalogue.hosts))
    return socket.gethostname()


def card_from_raw(
    raw: RawCard,
    read_cmdline: Callable[[int], str | None],
    read_parents: Callable[[int], tuple[str, ...]] | None = None,
) -> Card:
    """A snapshot card from one NVML reading; a failed card keeps only index and error."""
    if raw.error is not None:
        return Card(index=raw.index, uuid=raw.uuid, name=raw.name, error=raw.error)
    processes = tuple(
        Process(
            pid=p.pid,
            used_bytes=p.used_bytes,
            cmdline=read_cmdline(p.pid),
            parents=read_parents(p.pid) if read_parents is not None else (),
        )
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
    read_cmdline: Callable[[int], str | None] | None = None,
    read_parents: Callable[[int], tuple[str, ...]] | None = None,
) -> Snapshot:
    """Read every card of `source` now and return the snapshot of DESIGN.md.

    `taken_at` is `now` cut to whole seconds (the ledger keys snapshots by host and second).
    With a catalogue, each process's `seat` is filled by the seats' `match` regexes.
    Cmdlines come from `read_cmdline`, else the source's own `read_cmdline` (a replay), else /proc;
    each process's ancestors' lines (`parents`) from `read_parents`, else none when `read_cmdline`
    is given, else the source's own `read_parents`, else /proc.
    """
    reader = read_cmdline or getattr(source, "read_cmdline", None) or read_proc_cmdline
    ancestors = read_parents or (
        # A caller that gives its own command lines gives their ancestry too, or none.
        _no_parents
        if read_cmdline is not None
        else getattr(source, "read_parents", None) or read_proc_parents
    )
    driver = source.driver_version()
    nvml_version = source.nvml_version()
    cards = tuple(card_from_raw(raw, reader, ancestors) for raw in source.read_cards())
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


def _no_parents(pid: int) -> tuple[str, ...]:
    return ()


@contextmanager
def open_source() -> Iterator[NvmlSource]:
    """The NVML of this machine; or, when $GPUPLAN_FAKE_NVML names a snapshot JSON, its replay.

    The replay lets the CLI's polling loop and demos run on machines without a GPU; every
    command that reads it still goes through the same poller and ledger code.
    """
    fake = os.environ.get(FAKE_ENV)
    if fake:
        try:
            replay = load_snapshot(fake)
        except SnapshotError as exc:
            raise SnapshotError(f"{FAKE_ENV}={fake}", exc.loc, exc.msg) from exc
        yield FakeNvml.from_snapshot(replay)
        return
    with PynvmlSource() as source:
        yield source


def live_snapshot(
    *, catalogue: Catalogue | None, now: datetime, host: str | None = None
) -> Snapshot:
    """A snapshot of this machine's cards through NVML (exit 3 via NvmlUnavailableError without it)."""
    with open_source() as source:
        return take_snapshot(source, now, host or default_host(catalogue), catalogue=catalogue)
