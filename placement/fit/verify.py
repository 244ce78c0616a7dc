"""The verifier: one seat judged on given cards, in exact integer bytes, by DESIGN.md "What fits means".

`plan`, `check`, the report and the fleet code all decide through `judge`; the solver only proposes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Literal

from inventory.snapshot import Card, Snapshot
from placement.fit.capacity import (
    cuda_context_bytes,
    cuda_total,
    held_parts,
    margin_bytes,
    seats_declared_on,
)
from placement.fit.engines import (
    UTIL_STEP,
    GateRule,
    cover_target,
    engine_flags,
    format_util,
    gate_rule,
    largest_util_within,
    need_bytes,
    requested_bytes,
    smallest_util_covering,
)
from placement.fit.verdict import CardFigures, Reason, Verdict, VerdictKind, host_reason
from seats.model import Catalogue, Reserve, Seat
from seats.units import format_bytes

Mode = Literal["plan", "check"]


def host_catalogues(catalogue: Catalogue, *, hostless: bool = False) -> dict[str, Catalogue]:
    """Per host, the catalogue cut down to what the per-card formulas of that host read.

    The formulas of placement.fit.capacity scan every seat of the catalogue for each card; in a
    fleet that makes each card cost as much as the whole fleet. A host's view keeps every host
    entry, the host's reserves, and the seats the host's formulas can name (in catalogue
    order): those on the host and those a reserve of the host is for. Judged through it, a
    card gives the same figures as through the whole catalogue. `hostless` adds the seats
    that name no host (attribution and the snapshot checks read those too).
    """
    reserves: dict[str, list[Reserve]] = defaultdict(list)
    named_by: dict[str, list[str]] = defaultdict(list)
    for reserve in catalogue.reserves:
        reserves[reserve.host].append(reserve)
        for name in reserve.for_:
            named_by[name].append(reserve.host)
    seats: dict[str, list[Seat]] = defaultdict(list)
    everywhere = list(catalogue.hosts) if hostless else []
    for seat in catalogue.seats:
        own = [seat.host] if seat.host is not None else everywhere
        hosts = dict.fromkeys(own + named_by[seat.name])
        for host in hosts:
            seats[host].append(seat)
    return {
        host: catalogue.model_copy(
            update={"reserves": tuple(reserves[host]), "seats": tuple(seats[host])}
        )
        for host in dict.fromkeys([*catalogue.hosts, *reserves, *seats])
    }


def card_catalogues(catalogue: Catalogue) -> dict[tuple[str, int], Catalogue]:
    """Per card of every described host, the catalogue cut down to what that card's formulas read.

    Like `host_catalogues`, one level down: the card's reserves, and the seats pinned to it
    or named by one of its reserves (catalogue order). A card that nothing is pinned to or
    held on shares one view with no seats and no reserves. Good only for judging that one
    card; a seat judged on several cards needs its host's view.
    """
    reserves: dict[tuple[str, int], list[Reserve]] = defaultdict(list)
    named_by: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for reserve in catalogue.reserves:
        key = (reserve.host, reserve.gpu)
        reserves[key].append(reserve)
        for name in reserve.for_:
            named_by[name].append(key)
    seats: dict[tuple[str, int], list[Seat]] = defaultdict(list)
    for seat in catalogue.seats:
        own = [(seat.host, c) for c in seat.pinned_cards or ()] if seat.host is not None else []
        for key in dict.fromkeys(own + named_by[seat.name]):
            seats[key].append(seat)
    bare = catalogue.model_copy(update={"reserves": (), "seats": ()})
    views = {
        (host, index): bare for host, spec in catalogue.hosts.items() for index in range(spec.cards)
    }
    for key in dict.fromkeys([*reserves, *seats]):
        views[key] = catalogue.model_copy(
            update={"reserves": tuple(reserves[key]), "seats": tuple(seats[key])}
        )
    return views


@dataclass(frozen=True)
class Placement:
    """A new seat put on `cards` of `host`; `util` when its start util is already fixed."""

    seat: Seat
    host: str
    cards: tuple[int, ...]
    util: Decimal | None = None


def kv_bytes(seat: Seat) -> int | None:
    """The pinned KV cache of a vLLM seat, else None."""
    return seat.engine.kv_cache_bytes if seat.engine.kind == "vllm" else None


def proposed_util(seat: Seat, cuda_totals: Iterable[int], cuda_context: int) -> Decimal | None:
    """The smallest 3-decimal util whose request covers the seat on every one of its cards."""
    target = cover_target(seat.resident_bytes, kv_bytes(seat), cuda_context)
    best: Decimal | None = UTIL_STEP
    for total in cuda_totals:
        util = smallest_util_covering(target, total)
        if util is None:
            return None
        best = max(best, util) if best is not None else util
    return best


def start_util(
    seat: Seat, rule: GateRule, cuda_totals: Sequence[int], cuda_context: int
) -> Decimal | None:
    """The util a seat starts with before any gate is met: declared, default or covering proposal."""
    if rule.gating != "gated":
        return None
    if rule.util is not None:
        return rule.util
    util = proposed_util(seat, cuda_totals, cuda_context)
    # A seat larger than the card: ask for everything; room refuses it anyway.
    return util if util is not None else Decimal(1)


def seat_need(
    seat: Seat, util: Decimal | None, total: int, cuda_context: int, rule: GateRule | None = None
) -> int:
    """What `seat` takes on a card of CUDA total `total` when started with `util`."""
    if seat.engine.kind != "vllm" or (rule is not None and rule.gating != "gated"):
        return seat.resident_bytes
    return need_bytes(seat.resident_bytes, kv_bytes(seat), util, total, cuda_context)


def other_need(
    catalogue: Catalogue, snapshot: Snapshot, placement: Placement, card: Card, mode: Mode
) -> int:
    """Bytes another new seat placed on `card` takes there (its own util as it will start)."""
    seat = placement.seat
    if seat.engine.kind != "vllm":
        return seat.resident_bytes
    rule = gate_rule(seat.engine, propose=mode == "plan")
    ctx = cuda_context_bytes(catalogue, snapshot.host)
    util = placement.util
    if util is None:
        totals = [cuda_total(c) for c in snapshot.cards if c.index in placement.cards and c.ok]
        util = start_util(seat, rule, totals or [cuda_total(card)], ctx)
    return seat_need(seat, util, cuda_total(card), ctx, rule)


def override_seat(
    seat: Seat, util: float | Decimal | None, kv_cache_bytes: int | None, resident_bytes: int | None
) -> Seat:
    """`seat` with the flags a check or plan gives (util, KV cache bytes, resident) put in."""
    engine_update: dict[str, object] = {}
    if util is not None:
        # A float keeps the util's decimal text exactly: repr(float(Decimal("0.046"))) == "0.046".
        engine_update["gpu_memory_utilization"] = float(util)
    if kv_cache_bytes is not None:
        engine_update["kv_cache_bytes"] = kv_cache_bytes
    update: dict[str, object] = {}
    if engine_update:
        update["engine"] = seat.engine.model_copy(update=engine_update)
    if resident_bytes is not None:
        update["resident_bytes"] = resident_bytes
    return seat.model_copy(update=update) if update else seat


@dataclass(frozen=True)
class _CardState:
    card: Card
    total: int
    free: int
    held: int
    reserve_held: int
    reserve_names: tuple[str, ...]
    reserve_for: tuple[str, ...]
    others: int
    margin_bytes: int
    room: int
    gate_free: int
    occupants: tuple[str, ...]
    exclusive_neighbours: tuple[str, ...]


def _card_state(
    catalogue: Catalogue,
    snapshot: Snapshot,
    seat: Seat,
    card: Card,
    others_here: Sequence[Placement],
    mode: Mode,
) -> _CardState:
    host = snapshot.host
    own = [p for p in card.processes if p.seat == seat.name]
    # A redeploy: the seat's own processes on the card are stopped before it starts again.
    free = (card.free_bytes or 0) + sum(p.used_bytes or 0 for p in own)
    parts = held_parts(
        catalogue, host, card, seat.name, [p.seat.name for p in others_here] + [seat.name]
    )
    reserves = [part for part in parts if part.kind == "reserve"]
    reserve_for = tuple(
        name
        for reserve in catalogue.reserves
        if reserve.name in {part.name for part in reserves}
        for name in reserve.for_
    )
    held = sum(part.bytes for part in parts)
    others = sum(other_need(catalogue, snapshot, p, card, mode) for p in others_here)
    margin = margin_bytes(catalogue, host)
    declared = [s for s in seats_declared_on(catalogue, host, card.index) if s.name != seat.name]
    foreign = [
        p
        for p in card.processes
        if p.seat != seat.name and p.seat not in {s.name for s in declared}
    ]
    occupants = tuple(
        [s.name for s in declared]
        + [f"pid {p.pid}" if p.seat is None else p.seat for p in foreign]
        + [p.seat.name for p in others_here]
    )
    exclusive_neighbours = tuple(
        [s.name for s in declared if s.exclusive]
        + [p.seat.name for p in others_here if p.seat.exclusive]
    )
    return _CardState(
        card=card,
        total=cuda_total(card),
        free=free,
        held=held,
        reserve_held=sum(part.bytes for part in reserves),
        reserve_names=tuple(part.name for part in reserves),
        reserve_for=reserve_for,
        others=others,
        margin_bytes=margin,
        room=free - held - margin - others,
        gate_free=free - others - cuda_context_bytes(catalogue, host),
        occupants=occupants,
        exclusive_neighbours=exclusive_neighbours,
    )


@lru_cache(maxsize=8192)
def _b(n: int) -> str:
    # Cached: explaining refusals prints the same card figures for seat after seat.
    return format_bytes(n)


# Card states shared between judgements of different seats, by (host, card, mode); see
# `judge(state_cache=...)`.
CardStates = dict[tuple[str, int, str], _CardState]


def _anonymous_on(catalogue: Catalogue, seat: Seat, card: Card) -> bool:
    """True when nothing on `card` names `seat`: its state is then the same for any such seat.

    _card_state reads the seat's name only to free its own processes (a redeploy), to skip
    reserves held for it, and to leave it out of the card's declared seats and occupants.
    """
    name = seat.name
    if any(process.seat == name for process in card.processes):
        return False
    if any(s.name == name for s in catalogue.seats):
        return False
    return not any(name in reserve.for_ for reserve in catalogue.reserves)


def judge(
    catalogue: Catalogue,
    snapshot: Snapshot,
    seat: Seat,
    cards: Sequence[int],
    *,
    others: Sequence[Placement] = (),
    mode: Mode = "plan",
    util: float | Decimal | None = None,
    kv_cache_bytes: int | None = None,
    resident_bytes: int | None = None,
    state_cache: CardStates | None = None,
) -> Verdict:
    """Judge `seat` started last on `cards` of `snapshot` (attributed), beside the new `others`.

    `state_cache`: card states the caller shares between judgements made with the same
    catalogue, snapshot and `others` (explaining many refused seats); used only for cards
    where nothing names the seat, whose state does not depend on which seat it is.

    `mode="plan"` proposes a util where none is declared; `mode="check"` uses the version's
    default. `util`, `kv_cache_bytes`, `resident_bytes` override the catalogue's figures.
    """
    seat = override_seat(seat, util, kv_cache_bytes, resident_bytes)
    host = snapshot.host
    ctx = cuda_context_bytes(catalogue, host)
    reasons: list[Reason] = []
    nearest: list[tuple[int, str]] = []
    figures: list[CardFigures] = []
    rule = gate_rule(seat.engine, propose=mode == "plan")
    warnings = list(rule.warnings)
    verdict_kind: VerdictKind = "pass"

    if seat.host is not None and seat.host != host:
        reasons.append(host_reason(f"{seat.name} names host {seat.host}, not {host}", host))
    if len(cards) != seat.card_count:
        reasons.append(
            host_reason(f"{seat.name} takes {seat.card_count} card(s); {len(cards)} given", host)
        )
    if len(set(cards)) != len(cards):
        reasons.append(
            Reason(
                "host", None, None, None, None, f"card list {list(cards)} names a card twice", host
            )
        )
    by_index = {card.index: card for card in snapshot.cards}
    usable: list[Card] = []
    for index in cards:
        card = by_index.get(index)
        if card is None:
            reasons.append(
                Reason("host", index, None, None, None, f"{host} has no card {index}", host)
            )
        elif not card.ok:
            reasons.append(
                Reason(
                    "error",
                    index,
                    None,
                    None,
                    None,
                    f"card {index} is in error ({card.error}); it takes no seat",
                    host,
                )
            )
            if mode == "check":
                verdict_kind = "unknown"
        else:
            usable.append(card)
            if card.reserved_bytes is None:
                warnings.append(
                    f"card {index}: NVML v1 only (no driver reserve reading); CUDA total taken as the "
                    "NVML total, stricter for the gate"
                )
    if seat.engine.kind == "vllm" and ctx == 0:
        warnings.append(
            f"host {host} declares no cuda_context: vLLM's gate reads free memory after its own "
            "context (~1.25 GiB measured on an NVIDIA H200); set hosts.{host}.cuda_context"
        )

    others_by_card = {
        card.index: [
            p
            for p in others
            if p.host == host and card.index in p.cards and p.seat.name != seat.name
        ]
        for card in usable
    }
    states: list[_CardState] = []
    for card in usable:
        key = (host, card.index, mode)
        shared = state_cache is not None and _anonymous_on(catalogue, seat, card)
        state = state_cache.get(key) if shared and state_cache is not None else None
        if state is None:
            state = _card_state(catalogue, snapshot, seat, card, others_by_card[card.index], mode)
            if shared and state_cache is not None:
                state_cache[key] = state
        states.append(state)
    totals = [state.total for state in states]
    kv = kv_bytes(seat)
    start = start_util(seat, rule, totals, ctx) if states else rule.util
    chosen = start
    # kv_cache_memory pinned: util only feeds vLLM's gate. Prefer the util whose request
    # covers the seat; where the gate cannot honour that, the largest util that passes.
    if (
        rule.source == "proposed"
        and kv is not None
        and start is not None
        and any(requested_bytes(start, s.total) > s.gate_free for s in states)
    ):
        limits = [largest_util_within(s.gate_free, s.total) for s in states]
        if all(limit is not None for limit in limits):
            chosen = min(limit for limit in limits if limit is not None)
            asked = max(requested_bytes(chosen, s.total) for s in states)
            warnings.append(
                f"util {format_util(chosen)} is the largest that passes vLLM's gate on card(s) "
                f"{', '.join(str(s.card.index) for s in states)}: it requests {_b(asked)}, less than the "
                f"seat's {_b(seat.resident_bytes)} resident, so vLLM's own gate no longer covers the whole seat"
            )

    for state in states:
        index = state.card.index
        need = seat_need(seat, chosen, state.total, ctx, rule)
        requested = (
            requested_bytes(chosen, state.total)
            if rule.gating == "gated" and chosen is not None
            else None
        )
        figures.append(
            CardFigures(
                index,
                state.free,
                state.held,
                state.margin_bytes,
                state.others,
                need,
                state.room,
                state.gate_free if requested is not None else None,
                requested,
            )
        )
        card_reasons = _card_reasons(seat, rule, chosen, state, need, requested, host, ctx)
        reasons.extend(card_reasons)
        if card_reasons:
            nearest.extend(_nearest(seat, rule, chosen, state, need, requested, ctx, card_reasons))

    if reasons and verdict_kind != "unknown":
        verdict_kind = "refuse"
    flags: tuple[str, ...] = ()
    if seat.engine.kind == "vllm" and rule.gating == "gated":
        flags = engine_flags(chosen, kv, proposed=rule.source != "declared")
    seen: set[str] = set()
    ordered = []
    for _, text in sorted(nearest, key=lambda item: item[0]):
        if text not in seen:
            seen.add(text)
            ordered.append(text)
    return Verdict(
        verdict=verdict_kind,
        seat=seat.name,
        host=host,
        cards=tuple(cards),
        reasons=tuple(reasons),
        flags=flags,
        warnings=tuple(dict.fromkeys(warnings)),
        nearest=tuple(ordered),
        need_bytes=max((f.need_bytes for f in figures), default=seat.resident_bytes),
        util=format_util(chosen) if chosen is not None and rule.gating == "gated" else None,
        figures=tuple(figures),
    )


def _card_reasons(
    seat: Seat,
    rule: GateRule,
    util: Decimal | None,
    state: _CardState,
    need: int,
    requested: int | None,
    host: str,
    ctx: int,
) -> list[Reason]:
    index = state.card.index
    out: list[Reason] = []
    if need > state.room:
        short = need - state.room
        if state.reserve_held:
            out.append(
                Reason(
                    "reserve",
                    index,
                    need,
                    state.room,
                    short,
                    f"{_b(state.reserve_held)} held for {', '.join(dict.fromkeys(state.reserve_for))} "
                    f"({', '.join(state.reserve_names)})",
                    host,
                )
            )
        if not state.reserve_held or need > state.room + state.reserve_held:
            out.append(
                Reason(
                    "room",
                    index,
                    need,
                    state.room,
                    short,
                    f"need {_b(need)}, room {_b(state.room)} ({_room_terms(state)}): short {_b(short)}",
                    host,
                )
            )
    if requested is not None and util is not None and requested > state.gate_free:
        short = requested - state.gate_free
        out.append(
            Reason(
                "gate",
                index,
                requested,
                state.gate_free,
                short,
                f"vLLM's gate: free {_b(state.gate_free)} after its {_b(ctx)} CUDA context is less than "
                f"util {format_util(util)} × {_b(state.total)} = {_b(requested)}: short {_b(short)}",
                host,
            )
        )
    if rule.gating == "unbounded" and not seat.exclusive:
        sharing = list(state.occupants) + list(state.reserve_names)
        if sharing:
            out.append(
                Reason(
                    "unbounded",
                    index,
                    None,
                    None,
                    None,
                    "unbounded vLLM (≥ 0.34 with neither gpu_memory_utilization nor kv_cache_memory) "
                    f"would take what {', '.join(sharing)} need",
                    host,
                )
            )
    if seat.exclusive and state.occupants:
        out.append(
            Reason(
                "exclusive",
                index,
                None,
                None,
                None,
                f"{seat.name} is exclusive; card {index} holds {', '.join(state.occupants)}",
                host,
            )
        )
    elif state.exclusive_neighbours:
        out.append(
            Reason(
                "exclusive",
                index,
                None,
                None,
                None,
                f"card {index} holds exclusive {', '.join(state.exclusive_neighbours)}",
                host,
            )
        )
    return out


def _room_terms(state: _CardState) -> str:
    """'5.57 GiB free − 256.00 MiB margin', leaving out the terms that are zero."""
    text = f"{_b(state.free)} free"
    for amount, label in (
        (state.held, "held"),
        (state.margin_bytes, "margin"),
        (state.others, "for new seats here"),
    ):
        if amount:
            text += f" − {_b(amount)} {label}"
    return text


def _nearest(
    seat: Seat,
    rule: GateRule,
    util: Decimal | None,
    state: _CardState,
    need: int,
    requested: int | None,
    ctx: int,
    reasons: Sequence[Reason],
) -> list[tuple[int, str]]:
    """Smallest changes that would let the seat onto this card, keyed by bytes to find."""
    index = state.card.index
    rules = {reason.rule for reason in reasons}
    if rules & {"error", "host", "exclusive", "unbounded"}:
        return []
    out: list[tuple[int, str]] = []
    kv = kv_bytes(seat)
    room_short = max(0, need - state.room)
    gate_short = max(0, (requested or 0) - state.gate_free)
    if rules == {"gate"} and util is not None and rule.source != "proposed":
        limit = largest_util_within(state.gate_free, state.total)
        if limit is not None and seat_need(seat, limit, state.total, ctx, rule) <= state.room:
            out.append((gate_short, f"fits on card {index} with util ≤ {format_util(limit)}"))
    if "room" in rules and kv is None and util is not None and need > seat.resident_bytes:
        # The request sizes this seat: a smaller util shrinks it.
        limit = largest_util_within(min(state.room - ctx, state.gate_free), state.total)
        if limit is not None and seat.resident_bytes <= state.room:
            out.append((room_short, f"fits on card {index} with util ≤ {format_util(limit)}"))
    if "room" in rules and kv is not None and room_short < kv and not gate_short:
        out.append((room_short, f"lower kv_cache_memory by {_b(room_short)} (card {index})"))
    if "reserve" in rules and "room" not in rules and not gate_short:
        out.append((room_short, f"release {', '.join(state.reserve_names)}"))
    short = max(room_short, gate_short)
    if need > state.total - state.margin_bytes:
        # No amount of freeing makes a card hold more than its own total.
        return [
            (
                short,
                f"{_b(need)} is more than a card of {_b(state.total)} CUDA total holds",
            )
        ]
    if "reserve" not in rules and short:
        out.append((short, f"free {_b(short)} on card {index}"))
    return out


def verify_placement(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    placements: Sequence[Placement],
    *,
    mode: Mode = "plan",
    views: Mapping[str, Catalogue] | None = None,
    card_views: Mapping[tuple[str, int], Catalogue] | None = None,
) -> list[Verdict]:
    """Re-judge every placement as if it started last beside all the others; one verdict each.

    `views`, `card_views`: `host_catalogues(catalogue)` and `card_catalogues(catalogue)`
    when the caller already has them.
    """
    by_host = {snapshot.host: snapshot for snapshot in snapshots}
    if views is None:
        views = host_catalogues(catalogue)
    # judge reads only the others on the placement's own host: hand it those alone.
    on_host: dict[str, list[Placement]] = defaultdict(list)
    for placement in placements:
        on_host[placement.host].append(placement)
    verdicts: list[Verdict] = []
    for placement in placements:
        snapshot = by_host.get(placement.host)
        if snapshot is None:
            verdicts.append(
                Verdict(
                    "refuse",
                    placement.seat.name,
                    placement.host,
                    placement.cards,
                    (host_reason(f"no snapshot of host {placement.host}", placement.host),),
                )
            )
            continue
        others = [p for p in on_host[placement.host] if p.seat.name != placement.seat.name]
        verdicts.append(
            judge(
                _view_for(catalogue, views, card_views, placement),
                snapshot,
                placement.seat,
                placement.cards,
                others=others,
                mode=mode,
                util=placement.util,
            )
        )
    return verdicts


def _view_for(
    catalogue: Catalogue,
    views: Mapping[str, Catalogue],
    card_views: Mapping[tuple[str, int], Catalogue] | None,
    placement: Placement,
) -> Catalogue:
    """The smallest view that judges `placement` as the whole catalogue would."""
    if card_views is not None and len(placement.cards) == 1:
        found = card_views.get((placement.host, placement.cards[0]))
        if found is not None:
            return found
    return views.get(placement.host, catalogue)
