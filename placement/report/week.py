"""The report's week: room per card by UTC hour, restart safety, co-tenant patterns and coverage.

Read only through `inventory.history` (DESIGN.md "The week"): each host's hourly rollups bound
every hour; the raw moments of an hour are read only where the bounds cannot decide whether a
request-gated seat could restart then, so its counts are exact. Today's catalogue judges the
past: today's reserves, margins and down seats hold their bytes at every hour.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from inventory.attribution import host_seats, match_lines
from inventory.history import CardHour, CommandHour, History, Moment
from inventory.snapshot import Card, Snapshot, format_utc
from placement.fit.capacity import held_parts, margin_bytes
from placement.fit.card import cuda_total
from placement.fit.engines import gate_rule, requested_bytes
from seats.model import Catalogue, Seat

HOURS = 24
DAY_S = 86400
# The strip's levels: room as a share of the CUDA total, lowest first (`strip_cell`).
LEVELS = " ▁▂▃▄▅▆▇█"
SHORT = "!"  # an hour of the day whose lowest room over the week was none at all
UNSEEN = "·"  # an hour of the day with no readable moment all week


@dataclass(frozen=True)
class RoomStrip:
    """One card's room over the week: the lowest room (free − held − margin, today's catalogue)
    in each UTC hour of the day across the week's days, and the week's lowest."""

    host: str
    card: int
    cuda_total_bytes: int
    room_now_bytes: int | None
    min_room_bytes: int | None
    min_room_at: str | None
    by_hour_bytes: tuple[int | None, ...]  # 24 cells, None where the hour was never seen
    short_hours: tuple[int, ...]  # UTC hours whose lowest room was 0 or less
    strip: str


@dataclass(frozen=True)
class RestartRow:
    """Whether a request-gated running seat could have restarted at each moment of the week:
    free + its own bytes − cuda_context ≥ ceil(util × cuda_total) (rule `restart`)."""

    seat: str
    host: str
    card: int
    requested_bytes: int
    moments: int
    unsafe_moments: int
    worst_short_bytes: int  # 0 when every moment passed
    worst_at: str | None
    unsafe_hours: tuple[int, ...]  # UTC hours holding an unsafe moment
    unsafe_days: int
    raw_hours: int  # hours whose raw moments were read (the bounds could not decide)


@dataclass(frozen=True)
class TenantRow:
    """One seat's or foreign command's bytes on a card over the week."""

    host: str
    card: int
    seat: str | None  # None: a foreign command line
    cmdline: str | None
    peak_bytes: int
    peak_at: str
    present_hours: tuple[int, ...]  # UTC hours of the day it was seen in
    present_days: int
    days: int  # days of the week the host was seen on
    growth_bytes_per_day: int | None  # OLS slope of its daily highs; None under 3 days

    @property
    def recurrence(self) -> str:
        """'present 14:00–15:59 UTC on 7 of 7 days'."""
        return (
            f"present {hour_ranges(self.present_hours)} on {self.present_days} of {self.days} days"
        )


@dataclass(frozen=True)
class CoverageRow:
    """How much of the week a host was seen in, by hour."""

    host: str
    moments: int
    hours: int  # from the host's first seen hour to its last
    seen_hours: int
    error_hours: int  # hours where a card of it was in error at some moment
    largest_gap_hours: int
    largest_gap_from: str | None

    @property
    def coverage(self) -> float:
        return self.seen_hours / self.hours if self.hours else 0.0


@dataclass(frozen=True)
class Week:
    """The week's sections of the report."""

    room: tuple[RoomStrip, ...]
    restarts: tuple[RestartRow, ...]
    tenants: tuple[TenantRow, ...]
    coverage: tuple[CoverageRow, ...]


def hour_ranges(hours: Sequence[int]) -> str:
    """UTC hours of the day as ranges: (14, 15) → '14:00–15:59 UTC'; all 24 → 'all day'."""
    if len(hours) == HOURS:
        return "all day"
    if not hours:
        return "never"
    runs: list[tuple[int, int]] = []
    for hour in sorted(hours):
        if runs and runs[-1][1] == hour - 1:
            runs[-1] = (runs[-1][0], hour)
        else:
            runs.append((hour, hour))
    return ", ".join(f"{a:02d}:00–{b:02d}:59" for a, b in runs) + " UTC"


def strip_cell(room_bytes: int | None, least_bytes: int, most_bytes: int) -> str:
    """One cell: unseen, short (no room), or a level of room between the card's tightest and
    roomiest hours of the week: a card that runs nearly full still shows when it is fullest."""
    if room_bytes is None:
        return UNSEEN
    if room_bytes <= 0:
        return SHORT
    top = len(LEVELS) - 1
    floor = max(0, least_bytes)
    level = 1 + ((room_bytes - floor) * (top - 1)) // max(1, most_bytes - floor)
    return LEVELS[min(top, level)]


def slope_per_day(points: Sequence[tuple[int, int]]) -> int | None:
    """Ordinary least squares slope of (day, bytes) in bytes per day; None under 3 points."""
    if len(points) < 3:
        return None
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    return round(sxy / sxx)


def build_week(
    history: History,
    catalogue: Catalogue,
    latest: Sequence[Snapshot],
    start: datetime,
    end: datetime,
) -> Week:
    """The week's sections for the catalogue's hosts with a snapshot now (`latest`, attributed)."""
    room: list[RoomStrip] = []
    restarts: list[RestartRow] = []
    tenants: list[TenantRow] = []
    coverage: list[CoverageRow] = []
    for snapshot in sorted(latest, key=lambda s: s.host):
        host = snapshot.host
        rollups = history.rollups(host, start, end)
        seats = host_seats(catalogue, host)
        day_of = _days(start)
        days = len({day_of(h.hour) for h in rollups.cards if h.samples})
        groups = _attributed(rollups.commands, seats)
        for card in snapshot.cards:
            hours = [h for h in rollups.cards if h.card == card.index]
            if not card.ok:
                continue
            room.append(_strip(catalogue, host, card, hours))
            restarts += _restarts(history, catalogue, seats, host, card, hours, groups)
        tenants += _tenants(host, groups, day_of, days)
        coverage.append(_coverage(host, rollups.cards))
    return Week(tuple(room), tuple(restarts), tuple(tenants), tuple(coverage))


def _days(start: datetime) -> _DayOf:
    return _DayOf(int(start.timestamp()))


@dataclass(frozen=True)
class _DayOf:
    """The day of the window an hour falls in (0 = the window's first 24 hours)."""

    start_s: int

    def __call__(self, moment: datetime) -> int:
        # The window's first hour may begin before its start: it belongs to its first day.
        return max(0, (int(moment.timestamp()) - self.start_s) // DAY_S)


def _attributed(
    commands: Iterable[CommandHour], seats: Sequence[Seat]
) -> list[tuple[str | None, CommandHour]]:
    """Each command hour with its seat: recorded at capture, else by today's `match`."""
    out = []
    for group in commands:
        seat = group.seat
        if seat is None and group.cmdline is not None:
            found = match_lines((group.cmdline,), seats)
            seat = None if found is None else found[0]
        out.append((seat, group))
    return out


def _held_and_margin(catalogue: Catalogue, host: str, card: Card) -> int:
    return sum(p.bytes for p in held_parts(catalogue, host, card)) + margin_bytes(catalogue, host)


def _strip(catalogue: Catalogue, host: str, card: Card, hours: Sequence[CardHour]) -> RoomStrip:
    total = cuda_total(card)
    off = _held_and_margin(catalogue, host, card)
    assert card.free_bytes is not None  # a card read now
    by_hour: list[int | None] = [None] * HOURS
    lowest: tuple[int, datetime] | None = None
    for hour in hours:
        if hour.min_free_bytes is None or hour.min_free_at is None:
            continue
        value = hour.min_free_bytes - off
        cell = hour.hour.hour
        current = by_hour[cell]
        by_hour[cell] = value if current is None else min(current, value)
        if lowest is None or value < lowest[0]:
            lowest = (value, hour.min_free_at)
    seen = [v for v in by_hour if v is not None]
    least, most = min(seen, default=0), max(seen, default=0)
    return RoomStrip(
        host=host,
        card=card.index,
        cuda_total_bytes=total,
        room_now_bytes=card.free_bytes - off,
        min_room_bytes=None if lowest is None else lowest[0],
        min_room_at=None if lowest is None else format_utc(lowest[1]),
        by_hour_bytes=tuple(by_hour),
        short_hours=tuple(h for h, v in enumerate(by_hour) if v is not None and v <= 0),
        strip="".join(strip_cell(v, least, most) for v in by_hour),
    )


def _gated(seats: Sequence[Seat], card: int) -> list[Seat]:
    """Running seats on `card` whose engine checks a util request at start."""
    out: list[Seat] = []
    for seat in seats:
        if seat.state != "running" or card not in (seat.pinned_cards or ()):
            continue
        rule = gate_rule(seat.engine, propose=False)
        if rule.gating == "gated" and rule.checks_gate and rule.util is not None:
            out.append(seat)
    return out


def _restarts(
    history: History,
    catalogue: Catalogue,
    seats: Sequence[Seat],
    host: str,
    card: Card,
    hours: Sequence[CardHour],
    groups: Sequence[tuple[str | None, CommandHour]],
) -> list[RestartRow]:
    context = catalogue.hosts[host].cuda_context_bytes if host in catalogue.hosts else 0
    total = cuda_total(card)
    rows = []
    for seat in _gated(seats, card.index):
        rule = gate_rule(seat.engine, propose=False)
        assert rule.util is not None
        own: dict[datetime, list[CommandHour]] = defaultdict(list)
        for name, group in groups:
            if name == seat.name and group.card == card.index:
                own[group.hour].append(group)
        check = _Restart(seat, seats, card.index, requested_bytes(rule.util, total), context)
        for hour in hours:
            check.hour(history, host, hour, own.get(hour.hour, []))
        rows.append(check.row(host))
    return rows


@dataclass
class _Restart:
    """One seat's restart safety on one card, counted hour by hour."""

    seat: Seat
    seats: Sequence[Seat]
    card: int
    request: int
    context: int
    moments: int = 0
    unsafe: int = 0
    worst: int = 0
    worst_at: datetime | None = None
    raw: int = 0

    def __post_init__(self) -> None:
        self.unsafe_hours: set[int] = set()
        self.unsafe_days: set[str] = set()

    def hour(self, history: History, host: str, hour: CardHour, mine: list[CommandHour]) -> None:
        """Count one hour: from its bounds where they decide it, else from its raw moments."""
        if hour.min_free_bytes is None:
            return
        # One process group all hour: free + own never dips below min free + its min bytes.
        floor = hour.min_free_bytes + (mine[0].min_bytes if len(mine) == 1 else 0)
        if floor - self.context >= self.request:
            self.moments += hour.samples
            return
        self.raw += 1
        for moment in history.moments(host, hour.hour, hour.hour + timedelta(hours=1)):
            left = _left(moment, self.card, self.seat, self.seats)
            if left is None:
                continue
            self.moments += 1
            short = self.request - (left - self.context)
            if short <= 0:
                continue
            self.unsafe += 1
            self.unsafe_hours.add(moment.taken_at.hour)
            self.unsafe_days.add(moment.taken_at.date().isoformat())
            if short > self.worst:
                self.worst, self.worst_at = short, moment.taken_at

    def row(self, host: str) -> RestartRow:
        return RestartRow(
            seat=self.seat.name,
            host=host,
            card=self.card,
            requested_bytes=self.request,
            moments=self.moments,
            unsafe_moments=self.unsafe,
            worst_short_bytes=self.worst,
            worst_at=None if self.worst_at is None else format_utc(self.worst_at),
            unsafe_hours=tuple(sorted(self.unsafe_hours)),
            unsafe_days=len(self.unsafe_days),
            raw_hours=self.raw,
        )


def _left(moment: Moment, index: int, seat: Seat, seats: Sequence[Seat]) -> int | None:
    """free + the seat's own bytes on card `index` at a moment; None where the card was unread."""
    for card in moment.cards:
        if card.card != index:
            continue
        if not card.ok or card.free_bytes is None:
            return None
        own = 0
        for process in card.processes:
            name = process.seat
            if name is None and process.cmdline is not None:
                found = match_lines((process.cmdline,), seats)
                name = None if found is None else found[0]
            if name == seat.name:
                own += process.used_bytes or 0
        return card.free_bytes + own
    return None


def _tenants(
    host: str, groups: Sequence[tuple[str | None, CommandHour]], day_of: _DayOf, days: int
) -> list[TenantRow]:
    """Per card, each seat (its command lines together) and each foreign command line."""
    by_who: dict[tuple[int, str | None, str | None], list[CommandHour]] = defaultdict(list)
    for seat, group in groups:
        by_who[(group.card, seat, None if seat is not None else group.cmdline)].append(group)
    rows = []
    for (card, seat, cmdline), hours in by_who.items():
        peak = max(hours, key=lambda g: (g.max_bytes, -g.max_at.timestamp()))
        daily: dict[int, int] = {}
        for group in hours:
            day = day_of(group.hour)
            daily[day] = max(daily.get(day, 0), group.max_bytes)
        rows.append(
            TenantRow(
                host=host,
                card=card,
                seat=seat,
                cmdline=cmdline,
                peak_bytes=peak.max_bytes,
                peak_at=format_utc(peak.max_at),
                present_hours=tuple(sorted({g.hour.hour for g in hours})),
                present_days=len(daily),
                days=days,
                growth_bytes_per_day=slope_per_day(sorted(daily.items())) if seat else None,
            )
        )
    rows.sort(key=lambda r: (r.card, r.seat is None, -r.peak_bytes, r.seat or r.cmdline or ""))
    return rows


def _coverage(host: str, hours: Sequence[CardHour]) -> CoverageRow:
    seen = sorted({h.hour for h in hours if h.samples > h.error_samples})
    errors = {h.hour for h in hours if h.error_samples}
    moments_by_hour: dict[datetime, int] = {}
    for h in hours:
        moments_by_hour[h.hour] = max(moments_by_hour.get(h.hour, 0), h.samples + h.error_samples)
    if not seen:
        return CoverageRow(host, 0, 0, 0, len(errors), 0, None)
    # From the first hour seen to the last: a host that stopped reporting is the report's
    # "missing" and "unusable" business, not a gap in its history.
    first = seen[0]
    span = int((seen[-1] - first).total_seconds()) // 3600 + 1
    seen_set = set(seen)
    gap = best = 0
    best_from: datetime | None = None
    run_from: datetime | None = None
    for i in range(span):
        hour = first + timedelta(hours=i)
        if hour in seen_set:
            gap, run_from = 0, None
            continue
        if run_from is None:
            run_from = hour
        gap += 1
        if gap > best:
            best, best_from = gap, run_from
    return CoverageRow(
        host=host,
        moments=sum(moments_by_hour.values()),
        hours=span,
        seen_hours=len(seen),
        error_hours=len(errors),
        largest_gap_hours=best,
        largest_gap_from=None if best_from is None else format_utc(best_from),
    )
