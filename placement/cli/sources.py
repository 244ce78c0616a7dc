"""Where a command's inputs come from: the catalogue and the snapshot source options.

Shared by every command that reads cards (`plan`, `check`, `ledger`, `report` …), so the
options are spelled, resolved and labelled one way. This is the CLI's edge: it does file, NVML,
ledger and Prometheus I/O, and hands frozen data to the core.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
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


class _Once(argparse.Action):
    """An option that may be given once: a second one is a usage error, not a silent override."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(
                f"{option_string} given twice ({getattr(namespace, self.dest)}, {values}); "
                "this command reads one"
            )
        setattr(namespace, self.dest, values)


def add_source_arguments(parser: argparse.ArgumentParser, *, multiple: bool = False) -> None:
    """--snapshot FILE | --live | --prometheus URL, or --ledger DB alone; and --max-age.

    With another source, --ledger DB gives only the holds (and, for `check`, where decisions
    and holds are recorded); alone, it gives the cards too.
    """
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--snapshot",
        metavar="FILE",
        action="append" if multiple else _Once,
        help="read cards from a snapshot JSON file"
        + (" (repeatable, or a directory)" if multiple else ""),
    )
    group.add_argument("--live", action="store_true", help="read cards from NVML now")
    parser.add_argument(
        "--ledger",
        metavar="DB",
        nargs="?",
        const=DEFAULT_LEDGER,
        help="read the latest snapshot per host and the active holds from the ledger (default file "
        f"{DEFAULT_LEDGER}); with --snapshot, --live or --prometheus, only the holds",
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


@dataclass(frozen=True)
class SourceOptions:
    """Where the cards are read from, as the options name it (at most one of the four is set).

    `host`: the name NVML's snapshot is recorded under (`--live`), where the command has --host.
    """

    snapshots: tuple[str, ...] = ()
    live: bool = False
    ledger: str | None = None
    prometheus: str | None = None
    max_age: timedelta | None = None
    host: str | None = None


def source_options(args: argparse.Namespace) -> SourceOptions:
    """The source options of a parsed command line, read once (no writes into `args`)."""
    paths = getattr(args, "snapshot", None) or ()
    host = getattr(args, "host", None)
    return SourceOptions(
        snapshots=(paths,) if isinstance(paths, str) else tuple(paths),
        live=bool(getattr(args, "live", False)),
        ledger=getattr(args, "ledger", None) or None,
        prometheus=getattr(args, "prometheus", None) or None,
        max_age=getattr(args, "max_age", None),
        host=host if isinstance(host, str) and host else None,
    )


@dataclass(frozen=True)
class Cards:
    """The snapshots a source gave (one per host), each host's origin label, and the hosts left out.

    `origins`: host → where its snapshot came from (`NVML`, `ledger DB`, `Prometheus URL`, a file).
    `unusable`: host → why it was left out (Prometheus: stale or incomplete); nothing is planned there.
    """

    snapshots: tuple[Snapshot, ...]
    origins: Mapping[str, str] = field(default_factory=dict)
    unusable: Mapping[str, str] = field(default_factory=dict)

    def origin(self, host: str) -> str:
        """The origin label of `host`'s snapshot."""
        return self.origins.get(host, "snapshot file")


def resolve_snapshots(
    source: SourceOptions,
    catalogue: Catalogue | None,
    now: datetime,
    *,
    needed_host: str | None = None,
    every_host_needed: bool = False,
) -> Cards:
    """The snapshots the options name: one per host, with its origin label (no holds attached).

    --snapshot FILE: read the file (a stale one warns, exits 3 only with --max-age).
    --live: NVML now. --ledger DB: the latest snapshot per host (exit 3 past --max-age, default 15m).
    --prometheus URL: every usable host; a host left out is exit 3 when it is `needed_host`
    (or any host, with `every_host_needed`), else a warning.
    """
    if source.live:
        return _live(source, catalogue, now)
    if source.prometheus:
        return _prometheus(source, catalogue, now, needed_host, every_host_needed)
    if source.ledger and not source.snapshots:
        return _ledger(source.ledger, source.max_age, now)
    return _files(source.snapshots, source.max_age, now)


def _live(source: SourceOptions, catalogue: Catalogue | None, now: datetime) -> Cards:
    from inventory.poller import live_snapshot

    snapshot = live_snapshot(catalogue=catalogue, now=now, host=source.host)
    check_age(snapshot, now, source.max_age or DEFAULT_MAX_AGE, "NVML")
    return Cards((snapshot,), {snapshot.host: "NVML"})


def _ledger(path: str, max_age: timedelta | None, now: datetime) -> Cards:
    from inventory.ledger.store import open_ledger

    origin = f"ledger {path}"
    with open_ledger(path, readonly=True) as ledger:
        snapshots = ledger.latest_per_host()
    if not snapshots:
        raise CannotDecideError(f"ledger {path} holds no snapshot yet")
    for snapshot in snapshots:
        check_age(snapshot, now, max_age or DEFAULT_MAX_AGE, origin)
    return Cards(tuple(snapshots), {s.host: origin for s in snapshots})


def _files(paths: tuple[str, ...], max_age: timedelta | None, now: datetime) -> Cards:
    if not paths:
        raise BadInputError("no cards to read: pass --snapshot FILE, --live or --ledger DB")
    snapshots: list[Snapshot] = []
    origins: dict[str, str] = {}
    for path in _expand(list(paths)):
        snapshot = load_snapshot(path)
        if max_age is not None:
            check_age(snapshot, now, max_age, path)
        elif now - snapshot.taken_at > DEFAULT_MAX_AGE:
            print(
                f"warning: snapshot {path} is {_age_text(now - snapshot.taken_at)} old; deciding on it anyway "
                "(pass --max-age to refuse)",
                file=sys.stderr,
            )
        snapshots.append(snapshot)
        origins.setdefault(snapshot.host, path)
    hosts = [s.host for s in snapshots]
    duplicates = {h for h in hosts if hosts.count(h) > 1}
    if duplicates:
        raise BadInputError(
            f"one snapshot per host: {', '.join(sorted(duplicates))} given more than once"
        )
    return Cards(tuple(snapshots), origins)


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


def _prometheus(
    source: SourceOptions,
    catalogue: Catalogue | None,
    now: datetime,
    needed_host: str | None,
    every_host_needed: bool,
) -> Cards:
    """One snapshot per usable host (see inventory.prometheus.reader).

    A stale or incomplete host is left out, so nothing is planned on it, and warned about;
    it is exit 3 instead when its cards are needed (`needed_host`, or `every_host_needed`).
    """
    from inventory.prometheus.reader import read_fleet

    url = str(source.prometheus)
    expected = {name: host.cards for name, host in catalogue.hosts.items()} if catalogue else None
    fleet = read_fleet(
        url, now=now, max_age=source.max_age or DEFAULT_MAX_AGE, expected_cards=expected
    )
    for warning in fleet.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    blocking = [p for p in fleet.problems if every_host_needed or p.host == needed_host]
    if blocking:
        raise CannotDecideError(
            f"Prometheus at {url}: {blocking[0].text}; cannot check on that host"
        )
    for problem in fleet.problems:
        print(f"warning: {problem.text}; nothing is planned on {problem.host}", file=sys.stderr)
    if not fleet.snapshots:
        raise CannotDecideError(f"Prometheus at {url} gives no usable host")
    origin = f"Prometheus {url}"
    return Cards(
        tuple(fleet.snapshots),
        {s.host: origin for s in fleet.snapshots},
        {problem.host: problem.text for problem in fleet.problems},
    )
