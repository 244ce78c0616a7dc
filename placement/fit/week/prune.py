"""The replay read from the hourly rollups first (DESIGN.md "The week", "Scale and retention").

A card's rollup of an hour bounds it: every moment's free ≥ its least free (at `min_free_at`),
each group's bytes within [min, max] (and 0 at the moments it was absent, when its samples are
fewer than the hour's moments). From those bounds and the card model at the end (the replay's
offsets, module `replay`), the room of a new seat, its gate read and a neighbour's restart read
have a lower bound in the hour. An hour of a judged card is read raw when

1. *its structure* is not in the rollups: the window's first or last hour; a moment where the
   card was in error or missing (samples ≠ the host's moments then); a group (seat or command
   line) with more than one rollup there; a seat's first sighting, its first hour with bytes, or
   its command line differing from its previous sighting; a 24 h trend bucket boundary inside it;
2. *the bounds cannot decide* it: a new seat's room may be under its need (short), its gate read
   under its request (or under 0 where it has a request on another card), or a running
   request-gated neighbour's restart read under its request;
3. *it may hold a minimum*: some adjustment or absent place varies in it (the bounds are not
   exact) and its lower bound of room is at or under the least room of an exactly known hour of
   the window or of its trend bucket.

Which seats are cold or rebased, and since when, is read from the columns once the structural
hours are in (step 1); steps 2 and 3 use it. Every other hour is set in the columns from its
rollup: each moment seen, free at its least at `min_free_at` and one byte more at the others,
each group at its least bytes with its most at `max_at`. `replay_series` then judges those
columns as it judges every moment read: no short moment, restart or gate failure is in a hour
left unread; each minimum (the window's, a bucket's) is an exact hour's least at its moment, or in
a raw hour; each group's most of an hour is where it was. So every count and figure equals the
full replay's (tests/placement/week/test_prune.py holds it on random weeks).

A source that bounds its hours without dating their extremes (Prometheus's hourly aggregates:
`bounds`, rollups with `dated` False) is read the same way: an undated hour's least free stands
at its first moment, a group's most there and its least after; the when of an extreme matters
only where it is the window's least (`min_room_at`), so the first exact hour at that least is
read raw when undated (step 3), and the test holds the same equality with such bounds.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from inventory.history.model import CardHour, CommandHour, Moment, Rollups
from inventory.snapshot import Snapshot, utc
from placement.fit.card import CardModel, card_model
from placement.fit.week.model import DAY_S, HOUR_S, NewSeat, SeatWindow, WindowRules
from placement.fit.week.replay import (
    AdjustedCard,
    adjusted_cards,
    end_models,
    names_of,
    offsets,
    on_cards,
    placed,
    probes_of,
    replay,
    replay_series,
    restarting,
)
from placement.fit.week.series import Column, Key, Series, SeriesBuilder
from placement.fit.week.stats import allowed_short
from seats.model import Catalogue, Seat

INFINITY = float("inf")


class RollupHistory(Protocol):
    """What the pruned replay reads of a history (`inventory.history.ledger.LedgerHistory`)."""

    def moment_times(
        self, host: str, start: datetime, end: datetime
    ) -> list[tuple[int, int | None]] | None: ...

    def rollups(self, host: str, start: datetime, end: datetime) -> Rollups: ...

    def moments(
        self, host: str, start: datetime, end: datetime, cards: Sequence[int] | None = None
    ) -> Iterator[Moment]: ...


@dataclass(frozen=True)
class Hour:
    """One UTC hour of the window: its first second and its moments' indices [lo, hi)."""

    start_s: int
    lo: int
    hi: int


@dataclass
class Pruned:
    """What the pruned replay read: hours judged, and those read raw (for the benchmark)."""

    hours: int = 0
    raw_hours: int = 0
    raw_moments: int = 0


def replay_history(
    catalogue: Catalogue,
    snapshot: Snapshot,
    history: object,
    new: Sequence[NewSeat],
    rules: WindowRules,
    stats: Pruned | None = None,
) -> tuple[SeatWindow, ...]:
    """`replay` of the window's moments in [rules.start, rules.end], reading `history`'s rollups
    first and its raw moments only for the hours they cannot decide (the module docstring).

    A history without `moment_times` (or whose ledger keeps no rollups) is replayed moment by
    moment, as `replay` does.
    """
    host = snapshot.host
    stop = rules.end + timedelta(seconds=1)
    read_times = getattr(history, "moment_times", None)
    found = read_times(host, rules.start, stop) if read_times is not None else None
    if found is None:
        moments = history.moments(host, rules.start, stop)  # type: ignore[attr-defined]
        return replay(catalogue, snapshot, moments, new, rules)
    source: RollupHistory = history  # type: ignore[assignment]
    times = [int(t) for t, _ in found]
    arrivals = [None if a is None else int(a) for _, a in found]
    hours = _hours(times)
    bare = end_models(catalogue, snapshot, new)
    cards = sorted(c for c in on_cards(new) if c in bare)
    reader = _Reader(source, host, rules.start, stop, cards, hours)
    if len(hours) <= 2 or not cards:
        raw = {h.start_s for h in hours} if cards else set()
        series = reader.series(catalogue, times, arrivals, raw, {})
        return _done(catalogue, snapshot, series, new, rules, stats, hours, raw, times)
    # A source that bounds hours without dating their extremes (Prometheus's aggregates) gives
    # those first; the hours that need the dates are then read raw (step 3).
    first_s, last_s = utc(hours[1].start_s), utc(hours[-1].start_s)
    read_bounds = getattr(source, "bounds", None)
    if read_bounds is not None:  # of the judged cards only: the others are never read
        rollups = read_bounds(host, first_s, last_s, cards)
    else:
        rollups = source.rollups(host, first_s, last_s)
    by_hour = _index(rollups, frozenset(cards))
    plan = _Plan(catalogue, host, times, hours, cards, by_hour, int(rules.end.timestamp()))
    plan.ranked = allowed_short(rules.percentile, len(times)) + 1 if rules.percentile < 100 else 0
    raw = plan.structure()
    first = reader.series(catalogue, times, arrivals, raw, by_hour)
    adjusted = adjusted_cards(catalogue, first, bare, new, rules)
    raw |= plan.bounds(first, adjusted, bare, new, raw)
    series = reader.series(catalogue, times, arrivals, raw, by_hour)
    return _done(catalogue, snapshot, series, new, rules, stats, hours, raw, times)


def _done(
    catalogue: Catalogue,
    snapshot: Snapshot,
    series: Series,
    new: Sequence[NewSeat],
    rules: WindowRules,
    stats: Pruned | None,
    hours: Sequence[Hour],
    raw: set[int],
    times: Sequence[int],
) -> tuple[SeatWindow, ...]:
    if stats is not None:
        stats.hours = len(hours)
        stats.raw_hours = sum(1 for h in hours if h.start_s in raw)
        stats.raw_moments = sum(h.hi - h.lo for h in hours if h.start_s in raw)
    return replay_series(catalogue, snapshot, series, new, rules)


def _hours(times: Sequence[int]) -> list[Hour]:
    out: list[Hour] = []
    lo = 0
    for i in range(1, len(times) + 1):
        if i == len(times) or times[i] // HOUR_S != times[lo] // HOUR_S:
            out.append(Hour(times[lo] - times[lo] % HOUR_S, lo, i))
            lo = i
    return out


# (hour, card) → the card's rollup, and its command rollups.
HourIndex = dict[tuple[int, int], tuple[CardHour, list[CommandHour]]]


def _index(rollups: Rollups, cards: frozenset[int]) -> HourIndex:
    out: HourIndex = {}
    for row in rollups.cards:
        if row.card in cards:
            out[(int(row.hour.timestamp()), row.card)] = (row, [])
    for group in rollups.commands:
        if group.card in cards:
            found = out.get((int(group.hour.timestamp()), group.card))
            if found is not None:
                found[1].append(group)
    return out


class _Reader:
    """The raw moments of the hours asked for (each read once), and the columns built from them
    and the other hours' rollups."""

    def __init__(
        self,
        source: RollupHistory,
        host: str,
        start: datetime,
        stop: datetime,
        cards: Sequence[int],
        hours: Sequence[Hour],
    ) -> None:
        self.source, self.host, self.start, self.stop = source, host, start, stop
        self.cards = list(cards)
        self.hours = hours
        self.moments: dict[int, list[Moment]] = {}

    def _read(self, raw: set[int]) -> None:
        wanted = [
            h.start_s for h in self.hours if h.start_s in raw and h.start_s not in self.moments
        ]
        for _, run in itertools.groupby(enumerate(wanted), key=lambda p: p[1] - p[0] * HOUR_S):
            starts = [s for _, s in run]
            low = max(self.start, utc(starts[0]))
            high = min(self.stop, utc(starts[-1] + HOUR_S))
            for s in starts:
                self.moments[s] = []
            for moment in self.source.moments(self.host, low, high, self.cards):
                t = int(moment.taken_at.timestamp())
                self.moments[t - t % HOUR_S].append(moment)

    def series(
        self,
        catalogue: Catalogue,
        times: list[int],
        arrivals: list[int | None],
        raw: set[int],
        by_hour: HourIndex,
    ) -> Series:
        self._read(raw)
        at = {t: i for i, t in enumerate(times)}
        builder = SeriesBuilder(catalogue, self.host, times, arrivals)
        for hour in self.hours:
            if hour.start_s in raw:
                for moment in self.moments[hour.start_s]:
                    builder.moment(at[int(moment.taken_at.timestamp())], moment)
                continue
            for card in self.cards:
                found = by_hour.get((hour.start_s, card))
                if found is not None:
                    _fill(builder, card, hour, found[0], found[1], at)
        return builder.series()


def _fill(
    builder: SeriesBuilder,
    card: int,
    hour: Hour,
    rollup: CardHour,
    groups: Sequence[CommandHour],
    at: Mapping[int, int],
) -> None:
    """One card's hour from its rollups (module docstring): least free at its moment, one byte
    more at the others; each group at its least, its most at its moment."""
    column = builder.column(card)
    n = hour.hi - hour.lo
    low = rollup.min_free_bytes or 0
    column.free[hour.lo : hour.hi] = [low + 1] * n
    # An undated least stands at the hour's first moment: the hour is read raw wherever when
    # it fell could tell (step 3).
    column.free[at[_s(rollup.min_free_at)] if rollup.dated else hour.lo] = low
    for group in groups:
        key = builder.key_of(group.seat, group.cmdline)
        held = column.held.get(key)
        if held is None:
            held = column.held[key] = [0] * len(column.free)
        if group.dated:
            low_at, high_at = at[_s(group.min_at)], at[_s(group.max_at)]
        else:  # present at every moment (`whole_hour`): its most first, its least after
            high_at, low_at = hour.lo, min(hour.lo + 1, hour.hi - 1)
        if group.samples >= n:
            held[hour.lo : hour.hi] = [group.min_bytes] * n
        else:
            present = {low_at, high_at}
            for i in range(hour.lo, hour.hi):
                if len(present) >= group.samples:
                    break
                present.add(i)
            for i in present:
                held[i] = group.min_bytes
        held[high_at] = group.max_bytes
        held[low_at] = group.min_bytes
        if key[0] == "seat":
            builder.last_signature[(card, key[1])] = group.cmdline or ""


def _s(moment: datetime | None) -> int:
    return 0 if moment is None else int(moment.timestamp())


@dataclass
class _Bounds:
    """One card's hour: Σ adjustments and Σ absent places, low and high; the lows of each key's
    own bytes and adjustment (for a neighbour's restart read)."""

    adj_lo: int
    adj_hi: int
    absent_lo: int
    absent_hi: int
    own_lo: dict[str, int]
    adj_of: dict[str, int]

    @property
    def exact(self) -> bool:
        return self.adj_lo == self.adj_hi and self.absent_lo == self.absent_hi


class _Plan:
    """Which hours to read raw, from the rollups (structure), then from the bounds."""

    def __init__(
        self,
        catalogue: Catalogue,
        host: str,
        times: Sequence[int],
        hours: Sequence[Hour],
        cards: Sequence[int],
        by_hour: HourIndex,
        end_s: int,
    ) -> None:
        self.catalogue, self.host, self.times, self.hours = catalogue, host, times, hours
        self.cards, self.by_hour, self.end_s = cards, by_hour, end_s
        # Below p100: at most this many least rooms of a card rank its room at the percentile.
        self.ranked = 0
        self.keys = SeriesBuilder(catalogue, host, [], [])
        self.whole = [h for h in hours[1:-1]]

    def inside(self, moment: datetime | None, hour: Hour) -> bool:
        """True when `moment` is one of the hour's moments."""
        if moment is None:
            return False
        t = int(moment.timestamp())
        i = bisect.bisect_left(self.times, t, hour.lo, hour.hi)
        return i < hour.hi and self.times[i] == t

    def bucket(self, t: int) -> int:
        return (self.end_s - t) // DAY_S

    def groups(self, hour: int, card: int) -> dict[Key, list[CommandHour]]:
        out: dict[Key, list[CommandHour]] = {}
        for group in self.by_hour[(hour, card)][1]:
            out.setdefault(self.keys.key_of(group.seat, group.cmdline), []).append(group)
        return out

    def structure(self) -> set[int]:
        """Step 1: the hours whose structure the rollups do not give."""
        raw = {self.hours[0].start_s, self.hours[-1].start_s}
        for hour in self.whole:
            if self.bucket(self.times[hour.lo]) != self.bucket(self.times[hour.hi - 1]):
                raw.add(hour.start_s)
        for card in self.cards:
            last: dict[str, str | None] = {}
            positive: set[str] = set()
            for hour in self.whole:
                found = self.by_hour.get((hour.start_s, card))
                if found is None or not self.whole_hour(hour, *found):
                    raw.add(hour.start_s)
                if found is not None and not self.same_seats(hour, card, last, positive):
                    raw.add(hour.start_s)
        return raw

    def whole_hour(self, hour: Hour, rollup: CardHour, groups: Sequence[CommandHour]) -> bool:
        """Every moment of the hour read on the card, and each extreme at one of them (or
        undated: a group's then present at every moment)."""
        n = hour.hi - hour.lo
        return (
            not rollup.error_samples
            and rollup.samples == n
            and rollup.min_free_bytes is not None
            and (not rollup.dated or self.inside(rollup.min_free_at, hour))
            and all(
                (self.inside(g.min_at, hour) and self.inside(g.max_at, hour))
                if g.dated
                else g.samples == n
                for g in groups
            )
        )

    def same_seats(
        self, hour: Hour, card: int, last: dict[str, str | None], positive: set[str]
    ) -> bool:
        """False where a group has several rollups, or a seat is first seen, first holds bytes
        or changes its command line (`last`: each seat's line at its previous sighting)."""
        same = True
        for (kind, name), groups in self.groups(hour.start_s, card).items():
            if len(groups) > 1:
                same = False
                if kind == "seat":
                    last[name] = None
                continue
            if kind != "seat":
                continue
            (group,) = groups
            line = group.cmdline or ""
            if name not in last or last[name] != line:
                same = False
            last[name] = line
            if name not in positive and group.max_bytes > 0:
                same = False
                positive.add(name)
        return same

    def bounds(
        self,
        series: Series,
        adjusted: Mapping[int, AdjustedCard],
        bare: Mapping[int, CardModel],
        new: Sequence[NewSeat],
        structural: set[int],
    ) -> set[int]:
        """Steps 2 and 3: the hours the bounds cannot decide, or that may hold a minimum."""
        raw: set[int] = set(structural)
        here = on_cards(new)
        for card in self.cards:
            judged = adjusted.get(card)
            if judged is not None:
                raw |= self._card_bounds(series, card, judged, bare[card], here[card], new, raw)
        return raw - structural

    def _card_bounds(
        self,
        series: Series,
        card: int,
        judged: AdjustedCard,
        bare: CardModel,
        here: Sequence[NewSeat],
        new: Sequence[NewSeat],
        raw: set[int],
    ) -> set[int]:
        names = names_of(new)
        at = {t: i for i, t in enumerate(self.times)}
        counting = _Counting(
            names=names,
            seats={s.name: s for s in self.catalogue.seats},
            cold={c.seat: c.need_bytes for c in judged.cold},
            rebased={
                r.seat: (at[int(r.changed_at.timestamp())], r.peak_bytes) for r in judged.rebased
            },
            column=series.columns[card],
            end=series.end_index,
            times=self.times,
        )
        absent_seats = [
            (s.name, keep)
            for s in self.catalogue.pinned_on(self.host, card)
            if s.match is not None
            and s.name not in names
            and s.name not in counting.cold
            and (keep := bare.absent_part_bytes(s.name, s.resident_bytes))
        ]
        neighbours = restarting(self.catalogue, self.host, card, bare, here, names_of(here))
        per_seat = [(seat, offsets(placed(bare, here, seat.name), seat.name)) for seat in here]
        out: set[int] = set()
        candidates: list[tuple[Hour, _Bounds, CardHour]] = []
        for hour in self.whole:
            found = self.by_hour.get((hour.start_s, card))
            if hour.start_s in raw or found is None or found[0].min_free_bytes is None:
                continue
            bounds = self._bounds(hour, card, counting, absent_seats)
            free = found[0].min_free_bytes
            if _may_fail(bounds, free, card, per_seat, neighbours):
                out.add(hour.start_s)
            else:
                candidates.append((hour, bounds, found[0]))
        return out | self._minima(candidates, per_seat)

    def _minima(
        self,
        candidates: Sequence[tuple[Hour, _Bounds, CardHour]],
        per_seat: Sequence[tuple[NewSeat, tuple[int, int, int, int]]],
    ) -> set[int]:
        """Step 3: hours with varying bounds whose least room may be the window's or its
        bucket's least (known from the exact hours). Below p100 also every hour that may hold
        one of the `ranked` least rooms (the room at the percentile is the last of them): each
        exact hour's least is a moment's room, so the `ranked`-th smallest of those bounds them.
        The first exact hour at the least of them is read where its least is undated (its moment
        may be the window's `min_room_at`, the earliest of equals)."""
        raw: set[int] = set()
        for _, (room_off, _, _, _) in per_seat:
            least: float = INFINITY
            bucket_least: dict[int, float] = {}
            exact: list[int] = []
            for hour, bounds, rollup in candidates:
                if bounds.exact:
                    value = room_off + (rollup.min_free_bytes or 0) + bounds.adj_lo
                    value -= bounds.absent_lo
                    exact.append(value)
                    least = min(least, value)
                    k = self.bucket(self.times[hour.lo])
                    bucket_least[k] = min(bucket_least.get(k, INFINITY), value)
            first_least = False
            ranked: float = -INFINITY
            if self.ranked:
                ranked = INFINITY if len(exact) < self.ranked else sorted(exact)[self.ranked - 1]
            for hour, bounds, rollup in candidates:
                low = room_off + (rollup.min_free_bytes or 0) + bounds.adj_lo - bounds.absent_hi
                if low <= ranked:
                    raw.add(hour.start_s)
                if bounds.exact:
                    # The first exact hour at the least may hold the window's least (`min_room_at`,
                    # the earliest of equals): undated, its moment is read.
                    if low == least and not rollup.dated and not first_least:
                        raw.add(hour.start_s)
                    first_least = first_least or low == least
                    continue
                k = self.bucket(self.times[hour.lo])
                if low <= least or low <= bucket_least.get(k, INFINITY):
                    raw.add(hour.start_s)
        return raw

    def _bounds(
        self,
        hour: Hour,
        card: int,
        counting: _Counting,
        absent_seats: Iterable[tuple[str, int]],
    ) -> _Bounds:
        n = hour.hi - hour.lo
        out = _Bounds(0, 0, 0, 0, {}, {})
        groups = self.groups(hour.start_s, card)
        for (kind, name), (group,) in groups.items():
            low = 0 if group.samples < n else group.min_bytes
            high = group.max_bytes
            if kind == "seat":
                out.own_lo[name] = low
            if kind != "seat" or (name not in counting.seats and name not in counting.names):
                continue
            lo, hi = _adjustment(name, low, high, hour, counting)
            out.adj_lo += lo
            out.adj_hi += hi
            out.adj_of[name] = lo
        for name, keep in absent_seats:
            found = groups.get(("seat", name))
            if found is None:
                lo = hi = keep
            else:
                (group,) = found
                if group.samples >= n and group.min_bytes > 0:
                    lo = hi = 0
                elif group.samples >= n and group.max_bytes == 0:
                    lo = hi = keep
                else:
                    lo, hi = 0, keep
            out.absent_lo += lo
            out.absent_hi += hi
        return out


@dataclass(frozen=True)
class _Counting:
    """How the replay counts each seat of a card (`replay._adjusted_card`): the new seats, the
    catalogue's, the cold ones (→ need), the rebased ones (→ (index of the change, peak))."""

    names: frozenset[str]
    seats: Mapping[str, Seat]
    cold: Mapping[str, int]
    rebased: Mapping[str, tuple[int, int]]
    column: Column
    end: int
    times: Sequence[int]


def _may_fail(
    bounds: _Bounds,
    free: int,
    card: int,
    per_seat: Sequence[tuple[NewSeat, tuple[int, int, int, int]]],
    neighbours: Sequence[tuple[Seat, int, int, int]],
) -> bool:
    """True when, at the hour's lower bounds, a new seat may be short or its gate under its
    request, or a neighbour's restart read under its own."""
    for seat, (room_off, gate_off, _, _) in per_seat:
        if room_off + free + bounds.adj_lo - bounds.absent_hi < seat.need_bytes:
            return True
        wanted = seat.requested_bytes.get(card, 0)
        if any(seat.requested_bytes.values()) and gate_off + free + bounds.adj_lo < wanted:
            return True
    for neighbour, requested, with_off, _ in neighbours:
        name = neighbour.name
        others = bounds.adj_lo - bounds.adj_of.get(name, 0)
        if with_off + free + others + bounds.own_lo.get(name, 0) < requested:
            return True
    return False


def _adjustment(name: str, low: int, high: int, hour: Hour, counting: _Counting) -> tuple[int, int]:
    """The least and most of observed − counted over the hour for a seat whose bytes there lie
    in [low, high] (`replay._adjusted_card`'s counting)."""
    if name in counting.names:
        return low, high  # a new seat's own processes are freed: all of them
    seat = counting.seats[name]
    if seat.state == "retired":
        now = counting.column.held[("seat", name)][counting.end]
        return max(0, low - now), max(0, high - now)
    if name in counting.cold:
        need = counting.cold[name]
        return min(0, low - need), min(0, high - need)
    if name in counting.rebased:
        since, peak = counting.rebased[name]
        if counting.times[hour.lo] >= counting.times[since]:
            return 0, 0
        values = [high - peak if high > 0 else 0]
        values.append(max(low, 1) - peak if high > 0 else 0)
        if low == 0:
            values.append(0)
        return min(values), max(values)
    return 0, 0


def open_windows_history(
    catalogue: Catalogue,
    snapshot: Snapshot,
    history: object,
    rules: WindowRules,
    cards: Sequence[int] | None = None,
    needs: Mapping[int, int] | None = None,
) -> tuple[SeatWindow, ...]:
    """`replay.open_windows` (each card's window for a seat nothing names) read from `history`'s
    rollups first, as `replay_history` reads them: what `ledger --window` and `plan --window`
    show, without reading every moment."""
    probes = probes_of(snapshot, cards, needs)
    if not probes:
        return ()
    return replay_history(catalogue, snapshot, history, probes, rules)


def rooms_now(
    catalogue: Catalogue, snapshot: Snapshot, cards: Sequence[int] | None = None
) -> dict[int, int]:
    """Each card's room now for a seat nothing names (`open_windows`' `room_now_bytes`): the
    card model's at the window's end, no moment read."""
    # end_models takes every probe off every card: a probe holds nothing, so each card's model
    # is the snapshot's (built once a card, not once a probe).
    by_index = {card.index: card for card in snapshot.cards}
    return {
        p.cards[0]: card_model(catalogue, snapshot.host, by_index[p.cards[0]]).room_for(p.name)
        for p in probes_of(snapshot, cards, None)
        if p.cards[0] in by_index
    }
