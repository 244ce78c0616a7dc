"""`gpuplan snapshot`: read NVML now (or re-read a snapshot JSON) and record it in the ledger.

With `--interval S [--count N]` it polls; Ctrl-C finishes or discards the snapshot in flight.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from types import FrameType
from typing import TYPE_CHECKING

from placement.cli.sources import DEFAULT_LEDGER, add_catalogue_argument, add_timeout_argument

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from datetime import datetime
    from typing import BinaryIO

    from inventory.ledger.store import Ledger
    from inventory.ledger.writes import SnapshotValues
    from inventory.nvml import NvmlSource
    from inventory.snapshot import Card, Process, Snapshot
    from seats.model import Catalogue, Seat

HELP = "read NVML now (or a snapshot JSON) and record it"
DESCRIPTION = (
    "Read every card of this host through NVML, or re-read a snapshot JSON taken elsewhere "
    "(--from FILE, or - for stdin), attribute processes to seats when a catalogue is given, "
    "and write it: to the ledger (--ledger), to a file (--out), as JSON (--json), else as a table. "
    "A snapshot already in the ledger (same host and second) is not stored twice."
)
MAX_STDIN_BYTES = 64 * 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--host, --catalogue, --live, --from, --out, --ledger, --json, --interval, --count."""
    parser.add_argument(
        "--host",
        metavar="H",
        help="host name to record (default: the catalogue's only host, else this machine's)",
    )
    add_catalogue_argument(parser)
    parser.add_argument(
        "--live",
        action="store_true",
        help="read this host's cards from NVML now: the default, accepted as every other "
        "command takes it",
    )
    parser.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="read a snapshot JSON instead of NVML (- for stdin)",
    )
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help="read every host's latest figures from a Prometheus server instead of NVML "
        "and record one snapshot per host (use with --ledger from a timer)",
    )
    add_timeout_argument(parser)
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="write the snapshot JSON to FILE (atomically; the latest when polling)",
    )
    parser.add_argument(
        "--ledger",
        metavar="DB",
        nargs="?",
        const=DEFAULT_LEDGER,
        help=f"append to this ledger (default file {DEFAULT_LEDGER})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the snapshot as JSON (one line per snapshot when polling)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="poll every SECONDS (at least 1) until --count or Ctrl-C",
    )
    parser.add_argument(
        "--count", type=int, metavar="N", help="with --interval: stop after N snapshots"
    )


class _Stop:
    """SIGINT/SIGTERM handler for the polling loop: ask to stop, let the snapshot in flight finish.

    A second signal raises KeyboardInterrupt, which rolls the ledger transaction back: the
    snapshot in flight is then discarded, still never half-stored.
    """

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True


def run(args: argparse.Namespace) -> int:
    """Take (or read) snapshots and write them where asked; exit 0, 2 bad input, 3 no NVML."""
    from seats.errors import BadInputError
    from seats.loader import load_catalogue

    if args.count is not None and args.interval is None:
        raise BadInputError("--count needs --interval SECONDS")
    if args.interval is not None:
        if args.interval < 1:
            raise BadInputError(
                f"--interval {args.interval:g}: at least 1 second (the ledger keeps one snapshot per host and second)"
            )
        if args.from_file is not None:
            raise BadInputError("--interval polls NVML; it cannot be used with --from")
        if args.count is not None and args.count < 1:
            raise BadInputError(f"--count {args.count}: at least 1")
    _one_source(args)
    catalogue = load_catalogue(args.catalogue) if args.catalogue else None
    if args.prometheus is not None:
        if args.from_file is not None or args.interval is not None or args.out is not None:
            raise BadInputError(
                "--prometheus reads a whole fleet once; it cannot be used with --from, --interval or --out"
            )
        return _from_prometheus(args, catalogue)
    if args.from_file is not None:
        return _from_file(args, catalogue)
    if args.interval is None:
        snapshot = _take(None, args.host, catalogue)
        _write(args, snapshot, polling=False, catalogue=catalogue, arrived_at=_arrival())
        return 0
    return _poll(args, catalogue)


def _one_source(args: argparse.Namespace) -> None:
    """--live (NVML now, the default) with --from or --prometheus is bad input: one source."""
    from seats.errors import BadInputError

    if args.live and (args.from_file is not None or args.prometheus is not None):
        other = "--from" if args.from_file is not None else "--prometheus"
        raise BadInputError(f"--live reads NVML now; it cannot be used with {other}")


def _from_prometheus(args: argparse.Namespace, catalogue: Catalogue | None) -> int:
    """Record one snapshot per host that Prometheus knows; problems are warned about, not stored.

    A stale host's snapshot is still a true reading of its time, so it is recorded too (the
    ledger keeps one per host and second); an incomplete host is never recorded.
    """
    from inventory.attribution import attribute
    from inventory.prometheus.reader import public_url, read_fleet
    from placement.cli.sources import DEFAULT_MAX_AGE, utc_now

    expected = {name: host.cards for name, host in catalogue.hosts.items()} if catalogue else None
    fleet = read_fleet(
        args.prometheus,
        now=utc_now(),
        max_age=DEFAULT_MAX_AGE,
        expected_cards=expected,
        timeout=args.timeout,
    )
    for warning in fleet.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for problem in fleet.problems:
        print(f"warning: {problem.text}", file=sys.stderr)
    snapshots = [*fleet.snapshots, *fleet.stale]
    known = [s.host for s in snapshots]
    if args.host is not None:
        snapshots = [s for s in snapshots if s.host == args.host]
    if not snapshots:
        from placement.cli.names import did_you_mean
        from seats.errors import CannotDecideError

        which = f" named {args.host}{did_you_mean(args.host, known)}" if args.host else ""
        raise CannotDecideError(
            f"Prometheus at {public_url(args.prometheus)} gives no host{which} to record"
        )
    for snapshot in sorted(snapshots, key=lambda s: s.host):
        if catalogue is not None:
            snapshot = attribute(snapshot, catalogue)
        _write(
            args, snapshot, polling=len(snapshots) > 1, catalogue=catalogue, arrived_at=_arrival()
        )
    return 0


# An imported file is stored this many snapshots per transaction (a poller writing meanwhile
# waits for one batch, not for the whole file).
IMPORT_BATCH = 1000
# Progress on a terminal every this many snapshots read or stored.
PROGRESS_EVERY = 1000


def _from_file(args: argparse.Namespace, catalogue: Catalogue | None) -> int:
    """--from FILE: one snapshot (JSON, pretty or not) or JSON Lines of snapshots, one a line.

    Every line is read and checked before any is stored: a bad one is exit 2 naming its line,
    and nothing of the file is stored. One snapshot from stdin is a live reading (its arrival
    time is recorded); a file, or several snapshots on stdin, is an import (none is).
    """
    from placement.cli.sources import utc_now

    name = args.from_file
    stream = sys.stdin.buffer if name == "-" else _open(name)
    try:
        first = _first_line(stream, name)
        if _is_json_line(first):
            second = _first_line(stream, name)
            if second.strip():  # two snapshots or more: JSON Lines
                return _import(args, catalogue, _json_lines(stream, first, second))
            rest = second
        else:
            rest = stream.read(MAX_STDIN_BYTES + 1 - len(first))
        arrived = utc_now() if name == "-" else None
        snapshot = _checked(_whole(first + rest, name), _shown(name), args.host, catalogue)
        _write(args, snapshot, polling=False, catalogue=catalogue, arrived_at=arrived)
        return 0
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _open(name: str) -> BinaryIO:
    from inventory.snapshot import SnapshotError

    try:
        return open(name, "rb")
    except FileNotFoundError as exc:
        raise SnapshotError(name, "", "no such file") from exc
    except OSError as exc:
        raise SnapshotError(name, "", f"cannot read: {exc.strerror}") from exc


def _first_line(stream: BinaryIO, name: str) -> bytes:
    """The first line that is not blank (with the blank ones before it), at most 64 MiB."""
    from inventory.snapshot import SnapshotError

    head = b""
    while True:
        line = stream.readline(MAX_STDIN_BYTES + 1)
        head += line
        if len(head) > MAX_STDIN_BYTES:
            raise SnapshotError(_shown(name), "", "over 64 MiB; a snapshot is far smaller")
        if not line or line.strip():
            return head


def _is_json_line(line: bytes) -> bool:
    """True when the first line is a whole JSON object: the file is JSON Lines."""
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _json_lines(stream: BinaryIO, first: bytes, second: bytes) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line that is not blank, the first two (each with the blank
    lines before it) included."""
    from inventory.snapshot import SnapshotError

    number = 0
    for chunk in (first, second):
        number += chunk.count(b"\n") + (not chunk.endswith(b"\n"))
        yield number, chunk.decode("utf-8", errors="replace")
    while line := stream.readline(MAX_STDIN_BYTES + 1):
        number += 1
        if len(line) > MAX_STDIN_BYTES:
            raise SnapshotError(f"line {number:,}", "", "over 64 MiB; a snapshot is far smaller")
        if line.strip():
            yield number, line.decode("utf-8", errors="replace")


def _shown(name: str) -> str:
    return "<stdin>" if name == "-" else name


def _whole(raw: bytes, name: str) -> Snapshot:
    from inventory.snapshot import SnapshotError, loads_snapshot

    if len(raw) > MAX_STDIN_BYTES:
        raise SnapshotError(_shown(name), "", "over 64 MiB; a snapshot is far smaller")
    return loads_snapshot(raw.decode("utf-8", errors="replace"), _shown(name))


def _import(
    args: argparse.Namespace, catalogue: Catalogue | None, lines: Iterator[tuple[int, str]]
) -> int:
    """Check every line, then store them in order, a thousand per transaction, with progress."""
    from inventory.ledger.writes import values_of
    from inventory.snapshot import SnapshotError, loads_snapshot

    name = _shown(args.from_file)
    progress = sys.stderr.isatty()
    rows: list[SnapshotValues] = []
    last: Snapshot | None = None
    identities = _Identities()
    try:
        for number, text in lines:
            where = f"{name} line {number:,}"
            snapshot = _checked(loads_snapshot(text, where), where, args.host, catalogue)
            identities.add(snapshot)
            rows.append(values_of(snapshot))
            if args.json:
                print(json.dumps(snapshot.to_json_dict()), flush=True)
            last = snapshot
            if progress and len(rows) % PROGRESS_EVERY == 0:
                print(f"read {len(rows):,} snapshots of {name}", file=sys.stderr, flush=True)
    except SnapshotError as exc:
        if exc.source.startswith(name) or exc.source.startswith("line "):
            raise
        raise SnapshotError(f"{name} {exc.source}", exc.loc, exc.msg) from exc
    if last is None:  # pragma: no cover - the first line is a snapshot or refused
        return 0
    if args.out:
        from inventory.snapshot import save_snapshot

        save_snapshot(last, args.out)
    hosts = sorted({row.host for row in rows})
    span = (
        f"{_utc_text(min(r.taken_at for r in rows))} → {_utc_text(max(r.taken_at for r in rows))}"
    )
    if not args.ledger:
        print(
            f"read {len(rows):,} snapshot(s) of {', '.join(hosts)} ({span}); no --ledger: none stored"
        )
        return 0
    new = _store_batches(args.ledger, rows, progress, identities)
    said = f"stored {new:,} snapshot(s) of {', '.join(hosts)} ({span}) in ledger {args.ledger}" + (
        f"; {len(rows) - new:,} already there" if new < len(rows) else ""
    )
    print(said, file=sys.stderr if args.json else sys.stdout, flush=True)
    return 0


class _Identities:
    """Card UUIDs that change between a host's snapshots of one file, or from the ledger's
    snapshot before the file's first one (said as a warning; each is stored anyway)."""

    SHOWN = 5

    def __init__(self) -> None:
        self.firsts: dict[str, Snapshot] = {}
        self.previous: dict[str, tuple[datetime, frozenset[str], int]] = {}
        self.changes: list[str] = []

    def add(self, snapshot: Snapshot) -> None:
        from inventory.snapshot import identity_change

        before = self.previous.get(snapshot.host)
        if before is None:
            self.firsts[snapshot.host] = snapshot
        elif before[0] < snapshot.taken_at and (changed := identity_change(snapshot, *before)):
            self.changes.append(changed)
        uuids = frozenset(card.uuid for card in snapshot.cards if card.uuid)
        unread = sum(1 for card in snapshot.cards if not card.uuid)
        self.previous[snapshot.host] = (snapshot.taken_at, uuids, unread)

    def warn(self, ledger: Ledger) -> None:
        """Say every change, the first snapshot of each host against the ledger first."""
        from inventory.snapshot import identity_change

        found = []
        for host, first in sorted(self.firsts.items()):
            before = ledger.card_uuids_before(host, first.taken_at)
            if before is not None and (changed := identity_change(first, *before)):
                found.append(changed)
        found += self.changes
        for change in found[: self.SHOWN]:
            print(f"warning: {change}", file=sys.stderr)
        if len(found) > self.SHOWN:
            print(
                f"warning: and {len(found) - self.SHOWN:,} more card UUID change(s) in the file",
                file=sys.stderr,
            )


def _store_batches(
    ledger_path: str, rows: Sequence[SnapshotValues], progress: bool, identities: _Identities
) -> int:
    from inventory.ledger.store import open_ledger

    new = 0
    with open_ledger(ledger_path) as ledger:
        identities.warn(ledger)
        for start in range(0, len(rows), IMPORT_BATCH):
            new += ledger.import_rows(rows[start : start + IMPORT_BATCH])
            done = min(start + IMPORT_BATCH, len(rows))
            if progress and done < len(rows):
                print(f"stored {done:,} of {len(rows):,} snapshots", file=sys.stderr, flush=True)
    return new


def _utc_text(moment: datetime) -> str:
    from inventory.snapshot import format_utc

    return format_utc(moment)


def _checked(
    snapshot: Snapshot, source: str, host: str | None, catalogue: Catalogue | None
) -> Snapshot:
    """`snapshot` once consistent and of --host where one is given; with a catalogue, of its
    host's card count and attributed."""
    from inventory.attribution import attribute
    from inventory.snapshot import SnapshotError
    from placement.cli.sources import consistent, utc_now

    # Checked before it is stored: a future-dated one would hide every newer real one.
    consistent(snapshot, source, utc_now())
    if host is not None and host != snapshot.host:
        raise SnapshotError(
            source, "host", f"the snapshot is of {snapshot.host!r}, not --host {host!r}"
        )
    if catalogue is not None:
        expected = catalogue.hosts.get(snapshot.host)
        if expected is not None and expected.cards != len(snapshot.cards):
            raise SnapshotError(
                source,
                "cards",
                f"{len(snapshot.cards)} card(s), but the catalogue gives {snapshot.host} {expected.cards}",
            )
        snapshot = attribute(snapshot, catalogue)
    return snapshot


def read_from(name: str, host: str | None, catalogue: Catalogue | None) -> Snapshot:
    """The snapshot of --from FILE (`-`: stdin), consistent and of --host where one is given;
    with a catalogue, of its host's card count and attributed (snapshot and init read it)."""
    from inventory.snapshot import SnapshotError, load_snapshot, loads_snapshot

    if name == "-":
        raw = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
        if len(raw) > MAX_STDIN_BYTES:
            raise SnapshotError("<stdin>", "", "over 64 MiB; a snapshot is far smaller")
        snapshot = loads_snapshot(raw.decode("utf-8", errors="replace"), "<stdin>")
    else:
        snapshot = load_snapshot(name)
    return _checked(snapshot, _shown(name), host, catalogue)


def _arrival() -> datetime:
    """When a live reading reaches the ledger (recorded beside its taken_at)."""
    from placement.cli.sources import utc_now

    return utc_now()


def _take(source: NvmlSource | None, host: str | None, catalogue: Catalogue | None) -> Snapshot:
    from inventory.poller import default_host, open_source, take_snapshot
    from placement.cli.sources import consistent, utc_now

    name = host or default_host(catalogue)
    _warn_unknown_host(name, catalogue)
    if source is not None:
        snapshot = take_snapshot(source, utc_now(), name, catalogue=catalogue)
    else:
        with open_source() as fresh:
            snapshot = take_snapshot(fresh, utc_now(), name, catalogue=catalogue)
    _warn_pid_namespace(snapshot)
    consistent(snapshot, f"NVML of {name}", snapshot.taken_at)
    if catalogue is not None and name in catalogue.hosts:
        expected = catalogue.hosts[name].cards
        if expected != len(snapshot.cards):
            # NVML is the truth about the cards; the catalogue (or --host) is what is off.
            print(
                f"warning: NVML sees {len(snapshot.cards)} card(s) on this host, the catalogue gives "
                f"{name} {expected}: plan and check will refuse this snapshot until they agree",
                file=sys.stderr,
            )
    return snapshot


def _write(
    args: argparse.Namespace,
    snapshot: Snapshot,
    *,
    polling: bool,
    catalogue: Catalogue | None = None,
    arrived_at: datetime | None = None,
) -> None:
    """Store the snapshot in the ledger (--ledger), save it (--out) and print it (JSON or a table);
    the table names each process's engine, as its seat in `catalogue` declares it or as its
    command line shows it."""
    from inventory.ledger.store import open_ledger
    from inventory.snapshot import identity_change, save_snapshot

    stored: str | None = None
    if args.ledger:
        with open_ledger(args.ledger) as ledger:
            previous = ledger.card_uuids_before(snapshot.host, snapshot.taken_at)
            snapshot_id, new = ledger.store(snapshot, arrived_at)
        changed = identity_change(snapshot, *previous) if new and previous else None
        if changed is not None:
            print(f"warning: {changed}", file=sys.stderr)
        stored = (
            f"{'stored in' if new else 'already in'} ledger {args.ledger} as snapshot {snapshot_id}"
        )
    if args.out:
        save_snapshot(snapshot, args.out)
    if args.json:
        data = snapshot.to_json_dict()
        print(json.dumps(data) if polling else json.dumps(data, indent=2), flush=True)
        if stored:
            print(stored, file=sys.stderr)
    else:
        if not polling:
            print(_table(snapshot, catalogue))
        else:
            print(_line(snapshot), flush=True)
        if stored:
            print(stored, flush=True)


def _warn_unknown_host(name: str, catalogue: Catalogue | None) -> None:
    """A --host the catalogue does not know is recorded as given, but said (plan ignores it)."""
    from placement.cli.names import did_you_mean

    if catalogue is not None and name not in catalogue.hosts:
        print(
            f"warning: {name} is not a host of the catalogue"
            f"{did_you_mean(name, list(catalogue.hosts))}; recorded under {name}, "
            "which plan and check ignore",
            file=sys.stderr,
        )


def _warn_pid_namespace(snapshot: Snapshot) -> None:
    processes = [p for c in snapshot.cards for p in c.processes]
    if processes and all(p.cmdline is None for p in processes):
        print(
            "warning: no NVML process was found in /proc: if this runs in a container, "
            "start it with --pid=host so processes can be attributed to seats",
            file=sys.stderr,
        )


def _line(snapshot: Snapshot) -> str:
    """One line per snapshot while polling: the host, the time and each card's free bytes."""
    from inventory.snapshot import format_utc
    from placement.cli.render import b
    from seats.names import escaped

    parts = [
        f"card {c.index} {escaped(c.error)}"
        if c.error
        else f"card {c.index} free {b(c.free_bytes)}"
        for c in snapshot.cards
    ]
    return f"{snapshot.host} {format_utc(snapshot.taken_at)}  " + " · ".join(parts)


_TABLE_HEADERS = ("card", "name", "total", "reserved", "used", "free", "util", "processes")


def _table(snapshot: Snapshot, catalogue: Catalogue | None = None) -> str:
    """The snapshot for people: one row per card, NVML's figures, the processes' seats and engines."""
    from inventory.snapshot import format_utc
    from placement.cli.render import table

    seats = {seat.name: seat for seat in catalogue.seats} if catalogue is not None else None
    rows = [_card_cells(card, seats) for card in snapshot.cards]
    head = (
        f"{snapshot.host} · {format_utc(snapshot.taken_at)} · driver {snapshot.driver or 'unknown'}"
    )
    text = table(
        rows,
        _TABLE_HEADERS,
        ["right", "left", "right", "right", "right", "right", "right", "left"],
        style="ruled",
    )
    v1_only = any(card.ok and card.reserved_bytes is None for card in snapshot.cards)
    note = "\nNVML v1 only: used includes the driver's reserve" if v1_only else ""
    return f"{head}\n{text}{note}"


def _card_cells(card: Card, seats: Mapping[str, Seat] | None) -> list[object]:
    from placement.cli.render import b
    from seats.names import escaped

    # A snapshot read with --from was written elsewhere: its card name, error and seat fields
    # are outside text, escaped so that none prints a line of its own (DESIGN.md).
    name = escaped(card.name or "")
    if card.error:
        return [card.index, name, "", "", "", "", "", f"error: {escaped(card.error)}"]
    named = sorted({_process_text(p, seats) for p in card.processes if p.seat is not None})
    unseated = sorted((p for p in card.processes if p.seat is None), key=lambda p: p.pid)
    shown = [*named, *(_process_text(p, seats) for p in unseated)]
    return [
        card.index,
        name,
        b(card.total_bytes),
        b(card.reserved_bytes) if card.reserved_bytes is not None else "v1: in used",
        b(card.used_bytes),
        b(card.free_bytes),
        "" if card.utilization_percent is None else f"{card.utilization_percent}%",
        f"{len(card.processes)} proc" + (f": {' '.join(shown)}" if shown else ""),
    ]


def _process_text(process: Process, seats: Mapping[str, Seat] | None) -> str:
    """`vllm-voices (vLLM)` for a seat's process; one without a seat by pid, engine and bytes,
    `pid 4242 (SGLang, 20.00 GiB, no seat's match)`: what squeezed the card. `seats` is the
    catalogue's (None without one: nothing was matched, so nothing is said of a match)."""
    from placement.cli.render import b
    from placement.fit.engines.registry import process_engine
    from seats.names import escaped

    seat = seats.get(process.seat) if seats is not None and process.seat is not None else None
    found = process_engine(process.cmdline, seat.engine if seat is not None else None)
    if process.seat is not None:
        name = escaped(process.seat)
        return f"{name} ({found.title})" if found is not None else name
    parts = [found.title] if found is not None else []
    if process.used_bytes is not None:
        parts.append(b(process.used_bytes))
    if seats is not None:
        parts.append("no seat's match")
    return f"pid {process.pid}" + (f" ({', '.join(parts)})" if parts else "")


def _poll(args: argparse.Namespace, catalogue: Catalogue | None) -> int:
    from inventory.poller import open_source

    stop = _Stop()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    taken = 0
    try:
        with open_source() as source:
            next_at = time.monotonic()
            while not stop.requested and (args.count is None or taken < args.count):
                _write(
                    args, _take(source, args.host, catalogue), polling=True, arrived_at=_arrival()
                )
                taken += 1
                if args.count is not None and taken >= args.count:
                    break
                next_at += args.interval
                # Sleep in short steps so a Ctrl-C between snapshots ends the loop at once.
                while not stop.requested and time.monotonic() < next_at:
                    time.sleep(min(0.1, max(0.0, next_at - time.monotonic())))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop.requested:
        print(f"stopped after {taken} snapshot(s)", file=sys.stderr)
    return 0
