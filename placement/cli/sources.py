"""Where a command's inputs come from: the catalogue and the snapshot source options.

Shared by every command that reads cards (`plan`, `check`, `ledger`, `report` …), so the
options are spelled and resolved one way. This is the CLI's edge: it does file, NVML and
ledger I/O, and hands frozen data to the core.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime, timedelta

from inventory.snapshot import Snapshot, load_snapshot
from seats.errors import BadInputError, CannotDecideError
from seats.loader import load_catalogue
from seats.model import Catalogue

DEFAULT_LEDGER = "gpuplan-ledger.sqlite"
DEFAULT_MAX_AGE = timedelta(minutes=15)


def add_catalogue_argument(parser: argparse.ArgumentParser) -> None:
    """--catalogue F (default $GPUPLAN_CATALOGUE)."""
    parser.add_argument(
        "--catalogue",
        metavar="FILE",
        default=os.environ.get("GPUPLAN_CATALOGUE"),
        help="catalogue YAML (default: $GPUPLAN_CATALOGUE)",
    )


def load_catalogue_argument(args: argparse.Namespace) -> Catalogue:
    """The catalogue named by --catalogue or $GPUPLAN_CATALOGUE; exit 2 when neither is set."""
    if not args.catalogue:
        raise BadInputError("no catalogue: pass --catalogue FILE or set GPUPLAN_CATALOGUE")
    return load_catalogue(args.catalogue)


def parse_age(text: str) -> timedelta:
    """'15m', '90s', '2h', '7d' → timedelta (argparse type)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip()
    try:
        if text and text[-1] in units:
            return timedelta(seconds=float(text[:-1]) * units[text[-1]])
        return timedelta(seconds=float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"cannot read {text!r} as an age; write e.g. 15m, 90s, 2h"
        ) from exc


def add_source_arguments(parser: argparse.ArgumentParser, *, multiple: bool = False) -> None:
    """--snapshot FILE | --live | --ledger DB | --prometheus URL, and --max-age."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--snapshot",
        metavar="FILE",
        action="append" if multiple else "store",
        help="read cards from a snapshot JSON file"
        + (" (repeatable, or a directory)" if multiple else ""),
    )
    group.add_argument("--live", action="store_true", help="read cards from NVML now")
    group.add_argument(
        "--ledger",
        metavar="DB",
        nargs="?",
        const=DEFAULT_LEDGER,
        help=f"read the latest snapshot from the ledger (default file {DEFAULT_LEDGER})",
    )
    group.add_argument(
        "--prometheus",
        metavar="URL",
        help="read every host's cards from a Prometheus server (gpuplan exporter or DCGM metrics)",
    )
    parser.add_argument(
        "--max-age",
        type=parse_age,
        default=None,
        metavar="AGE",
        help="refuse to decide on a snapshot older than AGE (default 15m for --live/--ledger)",
    )


def check_age(snapshot: Snapshot, now: datetime, max_age: timedelta | None, origin: str) -> None:
    """Exit 3 when the snapshot is older than `max_age`."""
    if max_age is None:
        return
    age = now - snapshot.taken_at
    if age > max_age:
        raise CannotDecideError(
            f"snapshot of {snapshot.host} from {origin} is {_age_text(age)} old "
            f"(taken {snapshot.taken_at:%Y-%m-%dT%H:%M:%SZ}), older than --max-age {_age_text(max_age)}"
        )


def _age_text(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds} s"


def utc_now() -> datetime:
    """The clock, read once at the CLI's edge and passed in."""
    return datetime.now(UTC)


def resolve_snapshots(
    args: argparse.Namespace, catalogue: Catalogue | None, now: datetime
) -> list[Snapshot]:
    """The snapshots the options name: one per host.

    --snapshot FILE: read the file (a stale one warns, exits 3 only with --max-age).
    --live: NVML now. --ledger DB: the latest snapshot per host (exit 3 past --max-age, default 15m).
    """
    if getattr(args, "live", False):
        from inventory.poller import live_snapshot

        snapshot = live_snapshot(catalogue=catalogue, now=now, host=getattr(args, "host", None))
        check_age(snapshot, now, args.max_age or DEFAULT_MAX_AGE, "NVML")
        return [snapshot]
    if getattr(args, "ledger", None):
        from inventory.ledger.store import open_ledger

        with open_ledger(args.ledger, readonly=True) as ledger:
            snapshots = ledger.latest_per_host()
        if not snapshots:
            raise CannotDecideError(f"ledger {args.ledger} holds no snapshot yet")
        for snapshot in snapshots:
            check_age(snapshot, now, args.max_age or DEFAULT_MAX_AGE, f"ledger {args.ledger}")
        return snapshots
    if getattr(args, "prometheus", None):
        return _prometheus_snapshots(args, catalogue, now)
    paths = args.snapshot
    if not paths:
        raise BadInputError("no cards to read: pass --snapshot FILE, --live or --ledger DB")
    if isinstance(paths, str):
        paths = [paths]
    snapshots = []
    for path in _expand(paths):
        snapshot = load_snapshot(path)
        if args.max_age is not None:
            check_age(snapshot, now, args.max_age, path)
        elif now - snapshot.taken_at > DEFAULT_MAX_AGE:
            print(
                f"warning: snapshot {path} is {_age_text(now - snapshot.taken_at)} old; deciding on it anyway "
                "(pass --max-age to refuse)",
                file=sys.stderr,
            )
        snapshots.append(snapshot)
    hosts = [s.host for s in snapshots]
    duplicates = {h for h in hosts if hosts.count(h) > 1}
    if duplicates:
        raise BadInputError(
            f"one snapshot per host: {', '.join(sorted(duplicates))} given more than once"
        )
    return snapshots


def _expand(paths: list[str]) -> list[str]:
    out: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(
                os.path.join(path, name) for name in os.listdir(path) if name.endswith(".json")
            )
            if not found:
                raise BadInputError(f"{path}: directory holds no *.json snapshot")
            out.extend(found)
        else:
            out.append(path)
    return out


def _prometheus_snapshots(
    args: argparse.Namespace, catalogue: Catalogue | None, now: datetime
) -> list[Snapshot]:
    """--prometheus URL: one snapshot per usable host (see inventory.prometheus.reader).

    A stale or incomplete host is warned about and left out, so nothing is planned on it;
    `args.unusable_hosts` maps each such host to the reason, for commands that show it.
    `check` exits 3 when its seat's host (or, when that cannot be told, any host) is unusable.
    """
    from inventory.prometheus.reader import read_fleet

    expected = {name: host.cards for name, host in catalogue.hosts.items()} if catalogue else None
    fleet = read_fleet(
        args.prometheus, now=now, max_age=args.max_age or DEFAULT_MAX_AGE, expected_cards=expected
    )
    for warning in fleet.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    args.unusable_hosts = {problem.host: problem.text for problem in fleet.problems}
    if getattr(args, "command", None) == "check" and fleet.problems:
        host = _checked_host(args, catalogue)
        blocking = [p for p in fleet.problems if host is None or p.host == host]
        if blocking:
            raise CannotDecideError(
                f"Prometheus at {args.prometheus}: {blocking[0].text}; cannot check on that host"
            )
    for problem in fleet.problems:
        print(f"warning: {problem.text}; nothing is planned on {problem.host}", file=sys.stderr)
    if not fleet.snapshots:
        raise CannotDecideError(f"Prometheus at {args.prometheus} gives no usable host")
    return list(fleet.snapshots)


def _checked_host(args: argparse.Namespace, catalogue: Catalogue | None) -> str | None:
    host = getattr(args, "host", None)
    if isinstance(host, str) and host:
        return host
    name = getattr(args, "seat", None)
    if isinstance(name, str) and catalogue is not None:
        seat = next((s for s in catalogue.seats if s.name == name), None)
        if seat is not None and seat.host is not None:
            return seat.host
    return None
