"""The replay: every moment of the window re-judged on the card model with today's catalogue,
holds and new seats (DESIGN.md "The week").

For a new seat s on card c, with M_s the card model of the window's end (its snapshot,
today's reserves and holds, every new seat's own processes freed, the other new seats placed):

    base(t)   = free(t) + adj(t) − absent(t)
    room(s,t) = M_s.room_for(s) + base(t) − (M_s.free − absent_M)       (= M_s.room_for(s) at the end)
    gate(s,t) = M_s.gate_free(s) + free(t) + adj(t) − M_s.free

where adj(t) = Σ over the card's groups of (observed(t) − counted(t)): a new seat's own
processes are freed (counted 0: a redeploy), a retired seat counts at its bytes at the end
(gone: 0), a cold seat at max(observed(t), its declared need), a rebased seat before its last
change at its peak since; foreign processes and warm seats count as observed. absent(t) is Σ
residents of seats declared running on c, with a `match`, that had no process there at t (a
seat that is down keeps its place), as the card model counts them. Everything that does not
depend on t (reserves, holds, margin, the other new seats) is the model's, worked out once.

s is short at t on c when need(s) > room(s,t); a multi-card seat is short at t when any of
its cards is (the union by moment); a card in error at t is unseen there, never zero free.
A running request-gated neighbour n restarting at t reads
    M.gate_free(n) + free(t) + adj(t) − M.free + counted_n(t)
(M with every new seat placed) against its request ceil(util × cuda_total).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from inventory.history.model import Moment
from inventory.snapshot import Snapshot, utc
from placement.fit.card import CardModel, card_model
from placement.fit.engines import gate_rule, requested_bytes
from placement.fit.engines.base import EngineCard
from placement.fit.engines.registry import engine as engine_named
from placement.fit.engines.registry import process_engine, spec_of
from placement.fit.verdict import Reason
from placement.fit.week.model import (
    DAY_S,
    HOUR_S,
    CardWindow,
    Cold,
    Gap,
    HostWindow,
    NewSeat,
    Rebased,
    RestartRisk,
    SeatWindow,
    Squeezer,
    WindowReason,
    WindowRules,
    WindowWarning,
)
from placement.fit.week.series import Column, Series, series_of
from placement.fit.week.stats import (
    BUCKET_COVER_S,
    allowed_short,
    forecast,
    gaps_of,
    largest_first,
    median_spacing,
    pass_percentile,
)
from seats.model import Catalogue, Seat

# An arrival more than this after (or before) taken_at is a clock skew.
SKEW_S = 300
# A card runs out within this many days: a `trend` warning.
TREND_WARN_DAYS = 7
NO_HOURS = (0,) * 24


# --- the host's moments: spacing, gaps, history, clocks ------------------------------------


def host_window(series: Series, rules: WindowRules) -> HostWindow:
    """Spacing, gaps, history and clock skew of the host's moments."""
    times = series.times
    interval = median_spacing(times)
    gaps = [Gap(utc(a), utc(b), b - a) for a, b in gaps_of(times, interval)]
    unseen = sum(g.seconds - interval for g in gaps)
    history = times[-1] - times[0] + interval if times else 0
    hours_seen = {(t // HOUR_S) % 24 for t in times}
    unseen_hours = tuple(h for h in range(24) if h not in hours_seen) if times else ()
    skews = [abs(a - t) for a, t in zip(series.arrivals, times, strict=True) if a is not None]
    skewed = [s for s in skews if s > SKEW_S]
    return HostWindow(
        host=series.host,
        start=rules.start,
        end=rules.end,
        moments=len(times),
        interval_s=interval,
        history_s=history,
        gaps=largest_first(gaps),
        unseen_s=unseen,
        unseen_hours=unseen_hours,
        skewed=len(skewed),
        largest_skew_s=max(skewed, default=0),
    )


# --- one card: what every seat there counts at each moment ---------------------------------


@dataclass
class _Card:
    """One card's moments adjusted once for every new seat judged on it."""

    index: int
    column: Column
    adj: list[int]  # Σ (observed − counted) over the card's groups
    absent: list[int]
    counted: dict[str, list[int]]  # per catalogue seat: what it counts at each moment
    cold: list[Cold]
    rebased: list[Rebased]


AdjustedCard = _Card


def _present(held: Sequence[int]) -> list[int]:
    return [i for i, b in enumerate(held) if b > 0]


def _adjusted_card(
    catalogue: Catalogue,
    series: Series,
    index: int,
    model: CardModel,
    new_names: frozenset[str],
    rules: WindowRules,
) -> _Card:
    """The card's adjustments: new seats freed, retired removed, cold and rebased seats
    counted as DESIGN.md says, absent declared seats keeping their place."""
    column = series.columns[index]
    n, end, times = len(series.times), series.end_index, series.times
    adj = [0] * n
    counted: dict[str, list[int]] = {}
    colds: list[Cold] = []
    rebased: list[Rebased] = []
    seats = {s.name: s for s in catalogue.seats}
    for (kind, name), held in column.held.items():
        if kind != "seat":
            continue
        seat = seats.get(name)
        if name in new_names:
            counts = [0] * n  # a redeploy: its own processes are freed at every moment
        elif seat is None:
            continue  # a seat recorded at capture that today's catalogue lacks: as observed
        elif seat.state == "retired":
            counts = [min(b, held[end]) for b in held]
        else:
            counts = _warm_or_cold(seat, index, column, held, model, times, rules, colds, rebased)
        counted[name] = counts
        for i, (b, c) in enumerate(zip(held, counts, strict=True)):
            if b != c:
                adj[i] += b - c
    absent = _absent(catalogue, series, index, model, new_names | {c.seat for c in colds}, counted)
    return _Card(index, column, adj, absent, counted, colds, rebased)


def _absent(
    catalogue: Catalogue,
    series: Series,
    index: int,
    model: CardModel,
    skip: frozenset[str],
    counted: dict[str, list[int]],
) -> list[int]:
    """Σ at each moment of the places kept by seats declared running here, with a `match`, that
    had no process here then (as the card model counts them; `skip`: new and cold seats)."""
    n = len(series.times)
    column = series.columns[index]
    absent = [0] * n
    for seat in catalogue.pinned_on(series.host, index):
        if seat.match is None or seat.name in skip:
            continue
        keep = model.absent_part_bytes(seat.name, seat.resident_bytes)
        found = column.held.get(("seat", seat.name))
        if not keep:
            continue
        for i in range(n):
            if found is None or found[i] == 0:
                absent[i] += keep
        counted.setdefault(seat.name, found or [0] * n)
    return absent


def _warm_or_cold(
    seat: Seat,
    index: int,
    column: Column,
    held: list[int],
    model: CardModel,
    times: list[int],
    rules: WindowRules,
    colds: list[Cold],
    rebased: list[Rebased],
) -> list[int]:
    """What a live seat counts at each moment: cold, rebased or as observed."""
    end = len(times) - 1
    changes = column.signatures.get(seat.name, [])
    present = _present(held)
    if not present:
        return list(held)
    since = changes[-1][0] if len(changes) > 1 else present[0]
    last = present[-1]
    seen = times[last] - times[since]
    if held[end] > 0 and seen < rules.min_history_s:
        need = engine_named(seat.engine.kind).need_bytes(
            seat, EngineCard(model.cuda_total, model.free_bytes, model.cuda_context_bytes)
        )
        colds.append(Cold(seat.name, index, utc(times[since]), seen, need))
        return [max(b, need) for b in held]
    if len(changes) > 1 and rules.rebase:
        peak = max(held[since:])
        rebased.append(Rebased(seat.name, index, utc(times[since]), peak))
        return [peak if i < since and b > 0 else b for i, b in enumerate(held)]
    return list(held)


# --- the statistic per seat ----------------------------------------------------------------


@dataclass
class _Judged:
    """One new seat on one card: its room and gate free at every moment (None: unseen)."""

    card: int
    room: list[int | None]
    gate: list[int | None]
    room_now: int
    gate_now: int


def offsets(model: CardModel, name: str | None) -> tuple[int, int, int, int]:
    """(room offset, gate offset, room now, gate now) of seat `name` on the card model: room(s,t)
    = room offset + free(t) + adj(t) − absent(t); gate(s,t) = gate offset + free(t) + adj(t)."""
    room_now = model.room_for(name)
    gate_now = model.gate_free_bytes(name)
    absent_model = sum(p.bytes for p in model.held_parts(name) if p.kind == "absent")
    return (
        room_now - (model.free_bytes - absent_model),
        gate_now - model.free_bytes,
        room_now,
        gate_now,
    )


def _series_for(
    card: _Card, model: CardModel, name: str | None, times: Sequence[int]
) -> tuple[list[int | None], list[int | None], int, int]:
    """room(s,t) and gate(s,t) on the card (module docstring), and both at the end."""
    room_offset, gate_offset, room_now, gate_now = offsets(model, name)
    room: list[int | None] = []
    gate: list[int | None] = []
    for free, adj, absent in zip(card.column.free, card.adj, card.absent, strict=True):
        if free is None:
            room.append(None)
            gate.append(None)
        else:
            room.append(room_offset + free + adj - absent)
            gate.append(gate_offset + free + adj)
    return room, gate, room_now, gate_now


def _by_hour(indices: Iterable[int], times: Sequence[int]) -> tuple[int, ...]:
    counts = [0] * 24
    for i in indices:
        counts[(times[i] // HOUR_S) % 24] += 1
    return tuple(counts)


def _days_by_hour(indices: Iterable[int], times: Sequence[int]) -> tuple[tuple[int, ...], int]:
    """Per UTC hour, on how many UTC days some moment of `indices` fell in it; and the days."""
    pairs = {(times[i] // DAY_S, (times[i] // HOUR_S) % 24) for i in indices}
    counts = [0] * 24
    for _, hour in pairs:
        counts[hour] += 1
    return tuple(counts), len({day for day, _ in pairs})


def _squeezers(
    catalogue: Catalogue,
    card: _Card,
    worst: int,
    end: int,
    times: Sequence[int],
    new: frozenset[str],
) -> tuple[Squeezer, ...]:
    """Groups that held more at the worst moment than at the end, largest excess first."""
    seen_days = len({times[i] // DAY_S for i, f in enumerate(card.column.free) if f is not None})
    seats = {s.name: s for s in catalogue.seats}
    out: list[Squeezer] = []
    for (kind, name), held in card.column.held.items():
        if kind == "seat" and (name in new or (name in seats and seats[name].state == "retired")):
            continue
        counts = card.counted.get(name, held) if kind == "seat" else held
        then, now = counts[worst], counts[end]
        if then <= now:
            continue
        above = [i for i, b in enumerate(counts) if b > now and card.column.free[i] is not None]
        by_hour, days = _days_by_hour(above, times)
        engine, behaviour = _engine_of(seats.get(name) if kind == "seat" else None, name, kind)
        out.append(
            Squeezer(name, kind == "seat", engine, behaviour, then, now, by_hour, days, seen_days)
        )
    return tuple(sorted(out, key=lambda s: (-s.excess_bytes, s.name)))


def _engine_of(seat: Seat | None, name: str, kind: str) -> tuple[str | None, str | None]:
    """(kind, behaviour) of a group's engine: its seat's, else the one its command line starts."""
    if seat is not None:
        return seat.engine.kind, engine_named(seat.engine.kind).behaviour(seat.engine)
    found = process_engine(name if kind == "cmd" else None)
    if found is None:
        return None, None
    try:
        return found.kind, found.behaviour(spec_of(found.kind, {}))
    except ValueError:
        return found.kind, None


def _restart_request(seat: Seat, cuda_total: int) -> int | None:
    """A running seat's own gate request on a card (request-gated engines only), else None."""
    if engine_named(seat.engine.kind).behaviour(seat.engine) != "request-gated":
        return None
    rule = gate_rule(seat.engine, propose=False)
    if rule.gating != "gated" or not rule.checks_gate or rule.util is None:
        return None
    return requested_bytes(rule.util, cuda_total)


def _risk(
    seat: str,
    card: int,
    new: bool,
    engine: str | None,
    requested: int,
    reads: Sequence[int | None],
    without: Sequence[int | None] | None,
    times: Sequence[int],
) -> RestartRisk | None:
    """The moments where `reads` < `requested` (and, for a neighbour, `without` passes)."""
    short: list[int] = []
    already = 0
    worst_i, worst_short = -1, 0
    for i, got in enumerate(reads):
        if got is None or got >= requested:
            continue
        if without is not None:
            alone = without[i]
            if alone is not None and alone < requested:
                already += 1
                continue
        short.append(i)
        if requested - got > worst_short:
            worst_i, worst_short = i, requested - got
    if not short:
        return None
    by_hour, days = _days_by_hour(short, times)
    of_days = len({t // DAY_S for t, r in zip(times, reads, strict=True) if r is not None})
    return RestartRisk(
        seat, card, new, engine, requested, len(short), already, utc(times[worst_i]),
        worst_short, by_hour, days, of_days,
    )  # fmt: skip


def _gate_hours(
    gate: Sequence[Sequence[int | None]], requested: Sequence[int], times: Sequence[int]
) -> tuple[int, ...]:
    """UTC hours in which the seat's gate passed at every seen moment on ≥ 6 of 7 days seen."""
    seen: dict[tuple[int, int], bool] = {}
    for i, t in enumerate(times):
        reads = [g[i] for g in gate]
        if any(r is None for r in reads):
            continue
        key = (t // DAY_S, (t // HOUR_S) % 24)
        ok = all(r is not None and r >= q for r, q in zip(reads, requested, strict=True))
        seen[key] = seen.get(key, True) and ok
    hours = []
    for hour in range(24):
        days = [ok for (_, h), ok in seen.items() if h == hour]
        if days and 7 * sum(days) >= 6 * len(days):
            hours.append(hour)
    return tuple(hours)


def _forecast_points(
    room: Sequence[int | None], times: Sequence[int], end_s: int, interval_s: int
) -> list[tuple[float, int]]:
    """(−k days, least room) of each 24 h bucket k ending at the end, whose seen moments cover
    12 h (moments × interval)."""
    least: dict[int, int] = {}
    counts: dict[int, int] = {}
    for r, t in zip(room, times, strict=True):
        if r is None:
            continue
        k = (end_s - t) // DAY_S
        counts[k] = counts.get(k, 0) + 1
        least[k] = r if k not in least else min(least[k], r)
    return sorted(
        (float(-k), least[k]) for k in least if counts[k] * max(interval_s, 1) >= BUCKET_COVER_S
    )


# --- the replay ----------------------------------------------------------------------------


def end_models(
    catalogue: Catalogue, snapshot: Snapshot, new: Sequence[NewSeat]
) -> dict[int, CardModel]:
    """Each card's model at the end with every new seat's own processes freed (none placed)."""
    out: dict[int, CardModel] = {}
    names = [s.name for s in new]
    for card in snapshot.cards:
        model = card_model(catalogue, snapshot.host, card)
        for name in names:
            model = model.without_seat(name)
        out[card.index] = model
    return out


def replay(
    catalogue: Catalogue,
    snapshot: Snapshot,
    moments: Iterable[Moment],
    new: Sequence[NewSeat],
    rules: WindowRules,
) -> tuple[SeatWindow, ...]:
    """Judge each of `new` over every moment of the window; one SeatWindow per new seat.

    `snapshot`: the window's newest snapshot of the host, attributed, with the active holds
    attached (what the verifier judged the seats on at the end); `moments`: the host's moments
    in [start, end] (any order; `History.moments`); `new`: the deploy's seats (`NewSeat`), with
    the needs and gate requests the verifier found. Every reason's `text` is left empty: the
    sentences are written in `placement.cli`.
    """
    return replay_series(
        catalogue, snapshot, series_of(catalogue, snapshot.host, moments), new, rules
    )


def on_cards(new: Sequence[NewSeat]) -> dict[int, list[NewSeat]]:
    """Card index → the new seats placed on it."""
    out: dict[int, list[NewSeat]] = {}
    for seat in new:
        for c in seat.cards:
            out.setdefault(c, []).append(seat)
    return out


def adjusted_cards(
    catalogue: Catalogue,
    series: Series,
    bare: Mapping[int, CardModel],
    new: Sequence[NewSeat],
    rules: WindowRules,
) -> dict[int, _Card]:
    """Each card of the new seats, adjusted (`_adjusted_card`)."""
    names = frozenset(s.name for s in new)
    cards: dict[int, _Card] = {}
    for index in sorted(on_cards(new)):
        if index in series.columns and index in bare:
            cards[index] = _adjusted_card(catalogue, series, index, bare[index], names, rules)
    return cards


def replay_series(
    catalogue: Catalogue,
    snapshot: Snapshot,
    series: Series,
    new: Sequence[NewSeat],
    rules: WindowRules,
) -> tuple[SeatWindow, ...]:
    """`replay` of the moments already as columns (`series_of`, or `prune.replay_history`)."""
    host = host_window(series, rules)
    if not series.times:
        return tuple(_empty(s, host, rules) for s in new)
    bare = end_models(catalogue, snapshot, new)
    on_card = on_cards(new)
    cards = adjusted_cards(catalogue, series, bare, new, rules)
    return tuple(
        _judge_seat(catalogue, series, host, cards, bare, on_card, seat, rules) for seat in new
    )


def placed(model: CardModel, seats: Iterable[NewSeat], but: str | None) -> CardModel:
    """The model with `seats` placed, but the one called `but`."""
    for other in seats:
        if other.name != but:
            model = model.with_seat(
                other.name,
                other.need_bytes,
                resident_bytes=other.resident_bytes,
                exclusive=other.exclusive,
            )
    return model


def _judge_seat(
    catalogue: Catalogue,
    series: Series,
    host: HostWindow,
    cards: Mapping[int, _Card],
    bare: Mapping[int, CardModel],
    on_card: Mapping[int, list[NewSeat]],
    seat: NewSeat,
    rules: WindowRules,
) -> SeatWindow:
    times = series.times
    judged, risks = _judge_cards(catalogue, series, cards, bare, on_card, seat)
    union = _union(judged, seat.need_bytes, len(times))
    allowed = allowed_short(rules.percentile, union.seen)
    card_windows = tuple(
        _card_window(
            catalogue, series, cards[j.card], j, seat, union.per_card[j.card], rules, host,
            union.worst,
        )
        for j in judged
    )  # fmt: skip
    worst_at = worst_card = None
    worst_short = 0
    if union.worst is not None:
        worst_short, worst_at = union.worst[0], utc(times[-union.worst[1]])
        worst_card = -union.worst[2]
    passing = pass_percentile(len(union.short), union.seen)
    reasons: list[Reason] = []
    if len(union.short) > allowed and worst_card is not None:
        window = next(c for c in card_windows if c.card == worst_card)
        reasons.append(
            WindowReason(
                "peak", worst_card, seat.need_bytes, seat.need_bytes - worst_short, worst_short,
                series.host, at=worst_at, short_moments=len(union.short), allowed_short=allowed,
                moments=union.seen, percentile=str(rules.percentile),
                short_by_hour=_by_hour(union.short, times),
                squeezed_by=tuple(s.to_json() for s in window.squeezed_by),
                pass_percentile=None if passing is None else str(passing),
            )
        )  # fmt: skip
    restart_reasons, warnings = _restart_rule(risks, rules, allowed, series.host)
    trend_reasons, trend_warnings = _trend_rule(card_windows, seat, rules, series.host)
    reasons += restart_reasons + trend_reasons
    warnings += trend_warnings
    coverage = min(
        (_card_coverage(host, w.unseen_moments) for w in card_windows), default=host.coverage
    )
    warnings += _host_warnings(host, coverage)
    requested = [seat.requested_bytes.get(j.card, 0) for j in judged]
    gate_hours = _gate_hours([j.gate for j in judged], requested, times) if any(requested) else ()
    return SeatWindow(
        seat=seat.name,
        host=host,
        rules=rules,
        need_bytes=seat.need_bytes,
        cards=card_windows,
        seen_moments=union.seen,
        short_moments=len(union.short),
        allowed_short=allowed,
        short_by_hour=_by_hour(union.short, times),
        worst_at=worst_at,
        worst_card=worst_card,
        worst_short_bytes=worst_short,
        restart_risks=tuple(risks),
        gate_hours=gate_hours,
        cold=tuple(c for i in seat.cards if i in cards for c in cards[i].cold),
        rebased=tuple(r for i in seat.cards if i in cards for r in cards[i].rebased),
        coverage=coverage,
        pass_percentile=passing,
        reasons=tuple(reasons),
        warnings=tuple(warnings),
        **_status(reasons, host, coverage, rules),
    )


def _status(
    reasons: Sequence[Reason], host: HostWindow, coverage: Decimal, rules: WindowRules
) -> dict[str, Any]:
    """DESIGN.md's order: refused on the seen moments; else unknown for too little history;
    else unknown for too little coverage; else pass."""
    if reasons:
        return {"status": "refuse", "unknown_why": None}
    if host.history_s < rules.min_history_s:
        return {"status": "unknown", "unknown_why": "history"}
    if coverage < rules.min_coverage:
        return {"status": "unknown", "unknown_why": "coverage"}
    return {"status": "pass", "unknown_why": None}


def _judge_cards(
    catalogue: Catalogue,
    series: Series,
    cards: Mapping[int, _Card],
    bare: Mapping[int, CardModel],
    on_card: Mapping[int, list[NewSeat]],
    seat: NewSeat,
) -> tuple[list[_Judged], list[RestartRisk]]:
    """The seat's room and gate at every moment on each of its cards, and the restart risks
    there (its own, and its request-gated neighbours')."""
    times = series.times
    judged: list[_Judged] = []
    risks: list[RestartRisk] = []
    kind = _new_engine(catalogue, seat.name)
    for index in seat.cards:
        card = cards.get(index)
        if card is None:
            continue
        model = placed(bare[index], on_card[index], seat.name)
        room, gate, room_now, gate_now = _series_for(card, model, seat.name, times)
        judged.append(_Judged(index, room, gate, room_now, gate_now))
        requested = seat.requested_bytes.get(index)
        if requested:
            risk = _risk(seat.name, index, True, kind, requested, gate, None, times)
            risks += [risk] if risk else []
        here = on_card[index]
        risks += _neighbour_risks(catalogue, series, card, bare[index], here, names_of(here), times)
    return judged, risks


@dataclass
class _Union:
    """Moments seen on any of a seat's cards, short on any (the union by moment), per card, and
    the worst as (short bytes, −moment, −card): the largest, earliest, lowest card."""

    seen: int
    short: list[int]
    per_card: dict[int, list[int]]
    worst: tuple[int, int, int] | None


def _union(judged: Sequence[_Judged], need: int, n: int) -> _Union:
    out = _Union(0, [], {j.card: [] for j in judged}, None)
    for i in range(n):
        any_seen = short_here = False
        for j in judged:
            r = j.room[i]
            if r is None:
                continue
            any_seen = True
            if need > r:
                short_here = True
                out.per_card[j.card].append(i)
                key = (need - r, -i, -j.card)
                if out.worst is None or key > out.worst:
                    out.worst = key
        out.seen += any_seen
        if short_here:
            out.short.append(i)
    return out


def _restart_rule(
    risks: Sequence[RestartRisk], rules: WindowRules, allowed: int, host: str
) -> tuple[list[Reason], list[WindowWarning]]:
    """Rule `restart`: a refusal with --restart-safe, else a warning, per seat at risk."""
    reasons: list[Reason] = []
    warnings: list[WindowWarning] = []
    for risk in risks:
        if rules.restart_safe and risk.short_moments > allowed:
            reasons.append(
                WindowReason(
                    "restart", risk.card, risk.requested_bytes,
                    risk.requested_bytes - risk.short_bytes, risk.short_bytes, host,
                    at=risk.worst_at, short_moments=risk.short_moments, allowed_short=allowed,
                    restarting=risk.seat, new=int(risk.new), engine=risk.engine,
                    by_hour=risk.by_hour, days=risk.days, of_days=risk.of_days,
                )
            )  # fmt: skip
        else:
            warnings.append(WindowWarning("restart", {"seat": risk.seat, "card": risk.card}))
    return reasons, warnings


def _trend_rule(
    windows: Sequence[CardWindow], seat: NewSeat, rules: WindowRules, host: str
) -> tuple[list[Reason], list[WindowWarning]]:
    """Rule `trend`: a refusal when a card's forecast runs out within --horizon, else a warning
    under 7 days."""
    reasons: list[Reason] = []
    warnings: list[WindowWarning] = []
    for window in windows:
        cast = window.forecast
        days = cast.days_to_full_with_seat
        if days is None:
            continue
        if rules.horizon_days is not None and Decimal(str(days)) < rules.horizon_days:
            room = cast.intercept_bytes or 0
            reasons.append(
                WindowReason(
                    "trend", window.card, seat.need_bytes, room, max(0, seat.need_bytes - room),
                    host, at=rules.end, days_to_full_with_seat=f"{days:.2f}",
                    horizon_days=str(rules.horizon_days), confidence=cast.confidence,
                    slope_bytes_per_day=cast.slope_bytes_per_day,
                )
            )  # fmt: skip
        elif days < TREND_WARN_DAYS:
            figures = {"card": window.card, "days": round(days, 2), "confidence": cast.confidence}
            warnings.append(WindowWarning("trend", figures))
    return reasons, warnings


def _host_warnings(host: HostWindow, coverage: Decimal) -> list[WindowWarning]:
    """`gap` when coverage < 100 % or a UTC hour was unseen on every day; `clock` on skew."""
    out: list[WindowWarning] = []
    if coverage < 1 or host.unseen_hours:
        out.append(
            WindowWarning(
                "gap",
                {"coverage": round(float(coverage), 4), "gaps": len(host.gaps),
                 "largest_gap_seconds": host.gaps[0].seconds if host.gaps else 0,
                 "unseen_hours": list(host.unseen_hours)},
            )
        )  # fmt: skip
    if host.skewed:
        figures = {
            "host": host.host,
            "moments": host.skewed,
            "largest_skew_seconds": host.largest_skew_s,
        }
        out.append(WindowWarning("clock", figures))
    return out


def names_of(seats: Iterable[NewSeat]) -> frozenset[str]:
    return frozenset(s.name for s in seats)


def _new_engine(catalogue: Catalogue, name: str) -> str | None:
    try:
        return catalogue.seat(name).engine.kind
    except KeyError:
        return None


def restarting(
    catalogue: Catalogue,
    host: str,
    index: int,
    bare: CardModel,
    seats_here: Sequence[NewSeat],
    new: frozenset[str],
) -> list[tuple[Seat, int, int, int]]:
    """The card's running request-gated seats other than `new`: (seat, its gate request, the
    offset of its gate read with the new seats placed, and without them). A restart at t reads
    offset + free(t) + adj(t) + its own counted bytes(t)."""
    with_seats = placed(bare, seats_here, None)
    out = []
    for seat in catalogue.pinned_on(host, index):
        if seat.name in new:
            continue
        requested = _restart_request(seat, bare.cuda_total)
        if requested is None:
            continue
        out.append(
            (
                seat,
                requested,
                with_seats.gate_free_bytes(seat.name) - with_seats.free_bytes,
                bare.gate_free_bytes(seat.name) - bare.free_bytes,
            )
        )
    return out


def _neighbour_risks(
    catalogue: Catalogue,
    series: Series,
    card: _Card,
    bare: CardModel,
    seats_here: Sequence[NewSeat],
    new: frozenset[str],
    times: Sequence[int],
) -> list[RestartRisk]:
    """Every request-gated running seat of the card that the new seats would leave unable to
    restart at some moment where it could restart without them."""
    out: list[RestartRisk] = []
    for seat, requested, with_offset, alone_offset in restarting(
        catalogue, series.host, card.index, bare, seats_here, new
    ):
        counts = card.counted.get(seat.name) or card.column.held.get(("seat", seat.name))
        own = counts if counts is not None else [0] * len(times)
        reads: list[int | None] = []
        without: list[int | None] = []
        for free, adj, mine in zip(card.column.free, card.adj, own, strict=True):
            if free is None:
                reads.append(None)
                without.append(None)
            else:
                reads.append(with_offset + free + adj + mine)
                without.append(alone_offset + free + adj + mine)
        risk = _risk(
            seat.name, card.index, False, seat.engine.kind, requested, reads, without, times
        )
        if risk is not None:
            out.append(risk)
    return out


def _card_coverage(host: HostWindow, unseen_moments: int) -> Decimal:
    if host.history_s <= 0:
        return Decimal(1)
    unseen = host.unseen_s + unseen_moments * host.interval_s
    return max(Decimal(0), Decimal(1) - Decimal(unseen) / Decimal(host.history_s))


def _card_window(
    catalogue: Catalogue,
    series: Series,
    card: _Card,
    judged: _Judged,
    seat: NewSeat,
    short: list[int],
    rules: WindowRules,
    host: HostWindow,
    worst: tuple[int, int, int] | None,
) -> CardWindow:
    times, end = series.times, series.end_index
    seen = [(r, i) for i, r in enumerate(judged.room) if r is not None]
    least = min(seen, default=None)  # (room, i): the earliest of equals
    allowed = allowed_short(rules.percentile, len(seen))
    squeezed: tuple[Squeezer, ...] = ()
    if worst is not None and -worst[2] == card.index:
        squeezed = _squeezers(catalogue, card, -worst[1], end, times, names_of([seat]))
    elif short:
        # This card's own worst moment, where the seat's worst is on another of its cards.
        i = max(short, key=lambda k: (seat.need_bytes - (judged.room[k] or 0), -k))
        squeezed = _squeezers(catalogue, card, i, end, times, names_of([seat]))
    points = _forecast_points(judged.room, times, int(rules.end.timestamp()), host.interval_s)
    return CardWindow(
        card=card.index,
        room_now_bytes=judged.room_now,
        window_room_bytes=None if least is None else least[0],
        min_room_at=None if least is None else utc(times[least[1]]),
        seen_moments=len(seen),
        unseen_moments=len(times) - len(seen),
        short_moments=len(short),
        allowed_short=allowed,
        short_by_hour=_by_hour(short, times),
        squeezed_by=squeezed,
        forecast=forecast(points, seat.need_bytes),
        percentile_room_bytes=_percentile_room(seen, allowed),
    )


def _percentile_room(seen: Sequence[tuple[int, int]], allowed: int) -> int | None:
    """The (allowed + 1)-th least room of the seen moments: need ≤ it passes at the percentile."""
    if not seen:
        return None
    return heapq.nsmallest(allowed + 1, (r for r, _ in seen))[-1]


def _empty(seat: NewSeat, host: HostWindow, rules: WindowRules) -> SeatWindow:
    """No moment in the window: nothing seen, the verdict unknown (history)."""
    return SeatWindow(
        seat=seat.name, host=host, rules=rules, need_bytes=seat.need_bytes, cards=(),
        seen_moments=0, short_moments=0, allowed_short=0, short_by_hour=NO_HOURS,
        worst_at=None, worst_card=None, worst_short_bytes=0, restart_risks=(), gate_hours=(),
        cold=(), rebased=(), coverage=Decimal(0), pass_percentile=None, reasons=(),
        warnings=(), status="unknown", unknown_why="history",
    )  # fmt: skip


def open_windows(
    catalogue: Catalogue,
    snapshot: Snapshot,
    moments: Iterable[Moment] | Series,
    rules: WindowRules,
    cards: Sequence[int] | None = None,
    needs: Mapping[int, int] | None = None,
) -> tuple[SeatWindow, ...]:
    """One window per card for a seat nothing names, alone on it: room now, the least room
    over the window and when, at the percentile too, and the forecast (days_to_full); nothing
    is placed. The host's moments, gaps and coverage come with each.

    `needs`: a need per card for the probe (default 0), so that short moments, their hours and
    who squeezed the card at its worst mean "a seat of that size would have been short". One
    replay judges every card. `moments` may be already as columns (`series_of`), for a caller
    that replays them more than once.
    """
    probes = probes_of(snapshot, cards, needs)
    if not probes:
        return ()
    if isinstance(moments, Series):
        return replay_series(catalogue, snapshot, moments, probes, rules)
    return replay(catalogue, snapshot, moments, probes, rules)


def probes_of(
    snapshot: Snapshot, cards: Sequence[int] | None, needs: Mapping[int, int] | None
) -> list[NewSeat]:
    """`open_windows`' seat nothing names on each card (every readable one by default)."""
    indices = (
        tuple(sorted(c.index for c in snapshot.cards if c.ok)) if cards is None else tuple(cards)
    )
    return [
        NewSeat(f"\x00card {index}", (index,), (needs or {}).get(index, 0)) for index in indices
    ]


def open_rooms(
    catalogue: Catalogue,
    snapshot: Snapshot,
    moments: Iterable[Moment] | Series,
    rules: WindowRules,
    cards: Sequence[int] | None = None,
    needs: Mapping[int, int] | None = None,
) -> tuple[CardWindow, ...]:
    """`open_windows`' per-card windows alone."""
    windows = open_windows(catalogue, snapshot, moments, rules, cards, needs)
    return tuple(card for window in windows for card in window.cards)
