"""Where a command's inputs come from: the catalogue and the snapshot source options.

Shared by every command that reads cards (`plan`, `check`, `ledger`, `report` …), so the
options are spelled, resolved and labelled one way. This is the CLI's edge: it does file, NVML,
ledger and Prometheus I/O, and hands frozen data to the core.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from inventory.snapshot import Snapshot, age_text, check_consistency, load_snapshot
from seats.errors import BadInputError, CannotDecideError
from seats.loader import load_catalogue
from seats.model import Catalogue, Seat
from seats.names import shown_name
from seats.units import MiB

DEFAULT_LEDGER = "gpuplan-ledger.sqlite"
DEFAULT_MAX_AGE = timedelta(minutes=15)
DEFAULT_PROMETHEUS_TIMEOUT_S = 10.0
# `report` asks for a week of range series per query: a longer deadline by default.
DEFAULT_REPORT_TIMEOUT_S = 60.0


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
    catalogue = load_catalogue(args.catalogue)
    warn_small_residents(
        args.catalogue, ((f"seats[{i}]", seat) for i, seat in enumerate(catalogue.seats))
    )
    return catalogue


# No serving process holds less than this on a card (a CUDA context alone is hundreds of MiB):
# a smaller resident is a unit left out (`resident: 12` or `12 B` for 12 GiB), said once.
SMALLEST_RESIDENT_BYTES = MiB


def warn_small_residents(name: str, seats: Iterable[tuple[str, Seat]]) -> None:
    """A warning on stderr for each seat whose resident is implausibly small, naming the field."""
    for at, seat in seats:
        if seat.resident_bytes < SMALLEST_RESIDENT_BYTES:
            print(
                f"warning: {name}: {at + '.' if at else ''}resident ({seat.name}) is "
                f"{seat.resident_bytes:,} B, "
                "under 1 MiB: no serving process holds so little on a card; did you leave out "
                f"the unit (e.g. `resident: {seat.resident_bytes} GiB`)?",
                file=sys.stderr,
            )


def load_add_files(paths: Iterable[str]) -> list[tuple[str, Seat]]:
    """The seats of every --add file, each with its file (small residents warned about)."""
    from placement.plan.problem import load_add_file

    adds: list[tuple[str, Seat]] = []
    for path in paths:
        seats = load_add_file(path)
        warn_small_residents(
            path, ((f"[{i}]" if len(seats) > 1 else "", s) for i, s in enumerate(seats))
        )
        adds.extend((path, seat) for seat in seats)
    return adds


# A thousand years: now plus or minus it is still a date Python can hold (years 1 to 9999).
MAX_AGE = timedelta(days=365_000)


def parse_age(text: str) -> timedelta:
    """'15m', '90s', '2h', '7d' → timedelta (argparse type); negative or past MAX_AGE is exit 2."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip()
    number, unit = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1)
    try:
        seconds = float(number) * unit
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"cannot read {text!r} as an age; write e.g. 15m, 90s, 2h"
        ) from exc
    if math.isnan(seconds):
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as an age; write e.g. 15m, 90s, 2h")
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; an age is 0 or more, e.g. 15m")
    # Checked before timedelta() sees it: past ~2.7 million years it raises OverflowError, and
    # short of that `now + age` does (`--hold-for 100000000d`).
    if seconds > MAX_AGE.total_seconds():
        raise argparse.ArgumentTypeError(
            f"{text!r} is longer than {MAX_AGE.days}d (a thousand years), past the dates "
            "gpuplan can compute with"
        )
    return timedelta(seconds=seconds)


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


def add_host_label_argument(parser: argparse.ArgumentParser) -> None:
    """--host-label: which Prometheus label names a series' host (plan, check, ledger, report)."""
    parser.add_argument(
        "--host-label",
        metavar="NAME",
        default=None,
        help="with --prometheus: the label that names a series' host (default: exported_host, "
        "host, Hostname, hostname, else instance without its port)",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"cannot read {text!r} as seconds; write e.g. 10"
        ) from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{text}: between 0 and 3600 seconds")
    return value


def add_timeout_argument(
    parser: argparse.ArgumentParser, default_s: float = DEFAULT_PROMETHEUS_TIMEOUT_S
) -> None:
    """--timeout S: with --prometheus, the deadline of each query's whole answer."""
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=default_s,
        metavar="S",
        help="with --prometheus: seconds each query's whole answer may take, connecting included "
        f"(default {default_s:g})",
    )


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
    add_host_label_argument(parser)
    add_timeout_argument(parser)
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
            f"snapshot of {snapshot.host} from {origin} is {age_text(age)} old "
            f"(taken {snapshot.taken_at:%Y-%m-%dT%H:%M:%SZ}), older than --max-age {age_text(max_age)}"
        )


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
    host_label: str | None = None
    timeout: float = DEFAULT_PROMETHEUS_TIMEOUT_S


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
        host_label=getattr(args, "host_label", None) or None,
        timeout=getattr(args, "timeout", None) or DEFAULT_PROMETHEUS_TIMEOUT_S,
    )


@dataclass(frozen=True)
class Unusable:
    """A catalogue host nothing is decided on, and why.

    `kind`: absent, stale, incomplete, collision, mig (MIG or time-sliced cards), units or poll.
    """

    host: str
    kind: str
    reason: str

    @property
    def text(self) -> str:
        """`host: reason`, as warnings print it."""
        return f"{self.host}: {self.reason}"


@dataclass(frozen=True)
class Cards:
    """The snapshots a source gave (one per host), each host's origin label, and the hosts left out.

    `origins`: host → where its snapshot came from (`NVML`, `ledger DB`, `Prometheus URL`, a file).
    `unusable`: catalogue host → why nothing is decided there (absent, stale, incomplete …).
    `ignored`: hosts the source names that the catalogue does not describe (DESIGN.md "Fleets").
    """

    snapshots: tuple[Snapshot, ...]
    origins: Mapping[str, str] = field(default_factory=dict)
    unusable: Mapping[str, Unusable] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()

    def origin(self, host: str) -> str:
        """The origin label of `host`'s snapshot."""
        return self.origins.get(host, "snapshot file")

    def hosts_json(self) -> dict[str, Any]:
        """`ignored_hosts` and `unusable_hosts`, the keys every command's --json carries."""
        return {
            "ignored_hosts": list(self.ignored),
            "unusable_hosts": [
                {"host": u.host, "kind": u.kind, "reason": u.reason} for u in self.unusable.values()
            ],
        }

    def hosts_lines(self) -> list[str]:
        """The same for people: one line per unusable host, one for the ignored ones."""
        lines = [
            f"unusable host {shown_name(u.host)} ({u.kind}): {u.reason}"
            for u in self.unusable.values()
        ]
        if self.ignored:
            # A snapshot's host is outside text: escaped, it cannot print a line of its own.
            lines.append(
                f"ignored (not in the catalogue): {', '.join(map(shown_name, self.ignored))}"
            )
        return lines


def resolve_snapshots(
    source: SourceOptions,
    catalogue: Catalogue | None,
    now: datetime,
    *,
    needed_host: str | None = None,
    every_host_needed: bool = False,
) -> Cards:
    """The snapshots the options name: one per host, with its origin label and --ledger's holds.

    --snapshot FILE: read the file (a stale one warns, exits 3 only with --max-age).
    --live: NVML now. --ledger DB: the latest snapshot per host (past --max-age, default 15m, a
    host is unusable; without a catalogue, exit 3). --prometheus URL: every usable host.
    With a catalogue only its hosts are used (DESIGN.md "Fleets"): any other is ignored, and a
    catalogue host with no usable snapshot is unusable. A host the source itself could not read
    is exit 3 when it is `needed_host` (or any host, with `every_host_needed`); every ignored
    or unusable host is warned of on stderr.
    """
    read = _read(source, catalogue, now)
    cards = read if catalogue is None else _bind(read, catalogue, _absent_reason(source))
    blocking = [
        u
        for host, u in read.unusable.items()
        if (every_host_needed or host == needed_host)
        and (catalogue is None or host in catalogue.hosts)
    ]
    if blocking:
        where = (
            f"Prometheus at {_shown(source.prometheus)}" if source.prometheus else _label(source)
        )
        raise CannotDecideError(f"{where}: {blocking[0].text}; cannot check on that host")
    for host in cards.ignored:
        print(
            f"warning: {shown_name(host)} is not in the catalogue: its cards are ignored "
            "(nothing is planned, checked or reported on a host the catalogue does not describe)",
            file=sys.stderr,
        )
    for unusable in cards.unusable.values():
        print(f"warning: {unusable.text}; nothing is planned on {unusable.host}", file=sys.stderr)
    return cards


def _read(source: SourceOptions, catalogue: Catalogue | None, now: datetime) -> Cards:
    if source.live:
        cards = _live(source, catalogue, now)
    elif source.prometheus:
        cards = _prometheus(source, catalogue, now)
    elif source.ledger and not source.snapshots:
        cards = _ledger(source.ledger, source.max_age, now, strict=catalogue is None)
    else:
        cards = _files(source.snapshots, source.max_age, now)
    return _with_holds(cards, source.ledger, now)


def _with_holds(cards: Cards, ledger: str | None, now: datetime) -> Cards:
    """`cards` with the active holds of `ledger` on them (none without a ledger file)."""
    if not ledger or not Path(ledger).exists():
        return cards
    from inventory.ledger.store import open_ledger
    from inventory.snapshot import with_holds

    with open_ledger(ledger, readonly=True) as opened:
        holds = opened.holds(now)
    return replace(cards, snapshots=tuple(with_holds(cards.snapshots, holds)))


def consistent(snapshot: Snapshot, source: str, now: datetime) -> Snapshot:
    """`snapshot` once its figures are possible (exit 2 naming `source` otherwise); warns of the rest."""
    for warning in check_consistency(snapshot, source, now):
        print(f"warning: {warning}", file=sys.stderr)
    return snapshot


def _shown(url: str) -> str:
    """A --prometheus URL as output may show it: no credentials, no query string."""
    from inventory.prometheus.reader import public_url

    return public_url(url)


def _label(source: SourceOptions) -> str:
    if source.live:
        return "NVML"
    if source.ledger and not source.snapshots:
        return f"ledger {source.ledger}"
    return "snapshot files"


def _absent_reason(source: SourceOptions) -> str:
    if source.live:
        return "absent: --live reads this machine's cards only"
    if source.prometheus:
        return f"absent: Prometheus at {_shown(source.prometheus)} has no series of it"
    if source.ledger and not source.snapshots:
        return f"absent: ledger {source.ledger} holds no snapshot of it"
    return "absent: no --snapshot of it was given"


def _bind(cards: Cards, catalogue: Catalogue, absent: str) -> Cards:
    """Only the catalogue's hosts: others ignored, catalogue hosts without a snapshot unusable."""
    hosts = catalogue.hosts
    named = {s.host for s in cards.snapshots} | set(cards.unusable)
    snapshots = tuple(s for s in cards.snapshots if s.host in hosts)
    unusable = {h: u for h, u in cards.unusable.items() if h in hosts}
    have = {s.host for s in snapshots}
    for host in hosts:
        if host not in have and host not in unusable:
            unusable[host] = Unusable(host, "absent", absent)
    return Cards(
        snapshots,
        {h: o for h, o in cards.origins.items() if h in hosts},
        dict(sorted(unusable.items())),
        tuple(sorted(named - set(hosts))),
    )


def _live(source: SourceOptions, catalogue: Catalogue | None, now: datetime) -> Cards:
    from inventory.poller import live_snapshot

    snapshot = live_snapshot(catalogue=catalogue, now=now, host=source.host)
    consistent(snapshot, f"NVML of {snapshot.host}", now)
    check_age(snapshot, now, source.max_age or DEFAULT_MAX_AGE, "NVML")
    return Cards((snapshot,), {snapshot.host: "NVML"})


def _ledger(path: str, max_age: timedelta | None, now: datetime, *, strict: bool) -> Cards:
    from inventory.ledger.store import open_ledger

    origin = f"ledger {path}"
    with open_ledger(path, readonly=True) as ledger:
        snapshots = ledger.latest_per_host()
    if not snapshots:
        raise CannotDecideError(f"ledger {path} holds no snapshot yet")
    fresh: list[Snapshot] = []
    unusable: dict[str, Unusable] = {}
    for snapshot in snapshots:
        consistent(snapshot, f"{origin}: host {snapshot.host}", now)
        try:
            check_age(snapshot, now, max_age or DEFAULT_MAX_AGE, origin)
        except CannotDecideError as exc:
            if strict:
                raise
            unusable[snapshot.host] = Unusable(snapshot.host, "stale", f"stale: {exc}")
            continue
        fresh.append(snapshot)
    return Cards(tuple(fresh), {s.host: origin for s in fresh}, unusable)


def _warn_old(old: list[tuple[str, Snapshot]], now: datetime) -> None:
    """One warning for the snapshots older than the default age: by file alone, by host when many.

    A fleet read from a directory of old snapshots would otherwise say it once per host.
    """
    if len(old) == 1:
        path, snapshot = old[0]
        print(
            f"warning: snapshot {path} is {age_text(now - snapshot.taken_at)} old; deciding on it anyway "
            "(pass --max-age to refuse)",
            file=sys.stderr,
        )
    elif old:
        hosts = ", ".join(f"{s.host} ({age_text(now - s.taken_at)})" for _, s in old)
        print(
            f"warning: {len(old)} snapshots older than {age_text(DEFAULT_MAX_AGE)}: {hosts}; "
            "deciding on them anyway (pass --max-age to refuse)",
            file=sys.stderr,
        )


def _files(paths: tuple[str, ...], max_age: timedelta | None, now: datetime) -> Cards:
    if not paths:
        raise BadInputError("no cards to read: pass --snapshot FILE, --live or --ledger DB")
    snapshots: list[Snapshot] = []
    origins: dict[str, str] = {}
    old: list[tuple[str, Snapshot]] = []
    for path in _expand(list(paths)):
        snapshot = consistent(load_snapshot(path), path, now)
        if max_age is not None:
            check_age(snapshot, now, max_age, path)
        elif now - snapshot.taken_at > DEFAULT_MAX_AGE:
            old.append((path, snapshot))
        snapshots.append(snapshot)
        origins.setdefault(snapshot.host, path)
    _warn_old(old, now)
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


def _prometheus(source: SourceOptions, catalogue: Catalogue | None, now: datetime) -> Cards:
    """One snapshot per usable host (see inventory.prometheus.reader); the others unusable."""
    from inventory.prometheus.reader import read_fleet

    url = str(source.prometheus)
    expected = {name: host.cards for name, host in catalogue.hosts.items()} if catalogue else None
    totals = (
        {n: h.card_total_bytes for n, h in catalogue.hosts.items() if h.card_total_bytes}
        if catalogue
        else None
    )
    fleet = read_fleet(
        url,
        now=now,
        max_age=source.max_age or DEFAULT_MAX_AGE,
        expected_cards=expected,
        card_totals=totals,
        host_label=source.host_label,
        timeout=source.timeout,
    )
    seen = {s.host for s in (*fleet.snapshots, *fleet.stale)} | {p.host for p in fleet.problems}
    outside = seen - set(catalogue.hosts) if catalogue else set()
    for warning in fleet.warnings:
        # A warning about a host outside the catalogue goes with that host: it is ignored.
        if warning.split(": ", 1)[0] not in outside:
            print(f"warning: {warning}", file=sys.stderr)
    origin = f"Prometheus {_shown(url)}"
    unusable = {
        p.host: Unusable(p.host, p.kind, p.text.removeprefix(f"{p.host}: ")) for p in fleet.problems
    }
    return Cards(tuple(fleet.snapshots), {s.host: origin for s in fleet.snapshots}, unusable)
