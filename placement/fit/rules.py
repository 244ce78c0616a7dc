"""Each rule of what fits as one small pure function: a seat and a card state in, a Reason or None out.

A Reason is data (rule, card, bytes, and the facts its sentence needs); the words are written at
the edge, placement/cli/reasons_text.py.

The rule names are DESIGN.md's: room, reserve, gate, unbounded, exclusive, error, host (and
kv_capacity, whose arithmetic is `placement.fit.kv`'s). The
predicates (`fits_room`, `passes_gate`, `exclusive_binds`, `unbounded_binds`) are what the
reasons are built on; pruning and the placers call the same predicates without the words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal

from inventory.snapshot import Card
from placement.fit.engines import (
    GateRule,
    engine_of,
    format_util,
    passes_gate,
    requested_bytes,
    unbounded_as_declared,
)
from placement.fit.engines.base import EngineCard, Refusal
from placement.fit.kv import kv_capacity_reason
from placement.fit.room import exclusive_binds, fits_room
from placement.fit.state import CardState
from placement.fit.verdict import Fact, Reason, Rule, bare_reason, facts, host_reason
from seats.model import Seat
from seats.units import GiB


def unbounded_binds(*, gating: str, exclusive: bool, shared: bool) -> bool:
    """Rule `unbounded`: an unbounded vLLM, not exclusive, on a card something else holds or needs."""
    return gating == "unbounded" and not exclusive and shared


def host_reasons(seat: Seat, host: str, cards: Sequence[int]) -> list[Reason]:
    """Rule `host` for the seat as a whole: the host it names, its card count, a card named twice."""
    out: list[Reason] = []
    if seat.host is not None and seat.host != host:
        out.append(host_reason(host=host, said="other_host", seat=seat.name, seat_host=seat.host))
    if len(cards) != seat.card_count:
        out.append(
            host_reason(
                host=host,
                said="card_count",
                seat=seat.name,
                cards_wanted=seat.card_count,
                cards_given=len(cards),
            )
        )
    if len(set(cards)) != len(cards):
        out.append(host_reason(host=host, said="card_twice", cards=tuple(cards)))
    return out


def missing_card_reason(index: int, host: str) -> Reason:
    """Rule `host`: the snapshot has no such card."""
    return bare_reason("host", index, host=host, said="no_card")


def error_reason(card: Card, host: str) -> Reason | None:
    """Rule `error`: a card in error takes no seat."""
    if card.ok:
        return None
    # The error's words come from the snapshot (another host's file): shown escaped, never obeyed.
    return bare_reason("error", card.index, host=host, error=card.error or "")


def reserve_reason(*, need_bytes: int, state: CardState, host: str) -> Reason | None:
    """Rule `reserve`: the seat does not fit, and reserves it is not for hold bytes here."""
    if not state.reserve_held_bytes:
        return None
    said = facts(
        held_bytes=state.reserve_held_bytes,
        held_for=tuple(dict.fromkeys(state.reserve_for)),
        reserves=state.reserve_names,
    )
    return _held_reason("reserve", "reserve", said, need_bytes=need_bytes, state=state, host=host)


def kept_reserve_reason(*, need_bytes: int, state: CardState, host: str) -> Reason | None:
    """Rule `reserve` beside `room`: a reserve in use by its own seats keeps part of the room short.

    What is left of a reserve whose seats run or are placed here is theirs: the user must learn
    that the card is held for them, not only that it is full.
    """
    if not state.kept_reserves:
        return None
    kept = facts(kept=tuple((name, amount, owners) for name, amount, owners in state.kept_reserves))
    return _held_reason(
        "reserve", "kept_reserve", kept, need_bytes=need_bytes, state=state, host=host
    )


def hold_reason(*, need_bytes: int, state: CardState, host: str) -> Reason | None:
    """Rule `hold`: the seat does not fit, and other approved deploys' holds take bytes here."""
    if not state.hold_held_bytes:
        return None
    notes = facts(notes=state.hold_notes)
    return _held_reason("hold", "hold", notes, need_bytes=need_bytes, state=state, host=host)


def hold_gate_reasons(*, need_bytes: int, state: CardState, host: str) -> list[Reason]:
    """Rule `hold`: placed here, the seat would leave an approved seat's own gate short.

    An active hold is a new seat judged as if it started last: its gate reads
    hold_free − need (the judged seat's need taken too) and asks its recorded request.
    """
    out: list[Reason] = []
    for gate in state.hold_gates:
        left = gate.free_bytes - need_bytes
        if passes_gate(left, gate.requested_bytes):
            continue
        short = gate.requested_bytes - left
        out.append(
            Reason(
                rule="hold",
                card=state.card.index,
                need_bytes=need_bytes,
                room_bytes=max(0, gate.free_bytes - gate.requested_bytes),
                short_bytes=short,
                host=host,
                said="hold_gate",
                facts=facts(seat=gate.seat, requested_bytes=gate.requested_bytes, note=gate.note),
            )
        )
    return out


def _held_reason(
    rule: Rule,
    said: str,
    found: tuple[tuple[str, Fact], ...],
    *,
    need_bytes: int,
    state: CardState,
    host: str,
) -> Reason | None:
    """A `reserve` or `hold` reason: bytes others were promised bind where the seat is short."""
    if fits_room(need_bytes, state.room_bytes):
        return None
    return Reason(
        rule=rule,
        card=state.card.index,
        need_bytes=need_bytes,
        room_bytes=state.room_bytes,
        short_bytes=need_bytes - state.room_bytes,
        host=host,
        said=said,
        facts=found,
    )


def room_reason(
    *, need_bytes: int, state: CardState, host: str, need_floor: bool = False
) -> Reason | None:
    """Rule `room`: need > free − held − margin − others (only `reserve` where releasing would do).

    `need_floor`: the seat's resident is unknown and `need_bytes` a lower bound of what it takes
    (the refusal is certain all the same): the text says so, as the figures table does.
    """
    room = state.room_bytes
    if fits_room(need_bytes, room):
        return None
    releasable = state.reserve_held_bytes + state.hold_held_bytes
    if releasable and fits_room(need_bytes, room + releasable):
        return None  # reserves or holds alone bind
    short = need_bytes - room
    return Reason(
        rule="room",
        card=state.card.index,
        need_bytes=need_bytes,
        room_bytes=room,
        short_bytes=short,
        host=host,
        said="room_floor" if need_floor else "room",
        facts=room_terms(state),
    )


def replicas_reason(
    *, count: int, card: int, need_bytes: int, total_bytes: int, host: str
) -> Reason | None:
    """Rule `room` for `count` replicas on the same card, before any is judged: count × need
    (at least one byte each) beyond the card's total cannot fit, whatever else is on it
    (DESIGN.md "Never yes by accident": a count that cannot fit is refused at once)."""
    each = max(need_bytes, 1)
    need_all = count * each
    if need_all <= total_bytes:
        return None
    return Reason(
        rule="room",
        card=card,
        need_bytes=need_all,
        room_bytes=total_bytes,
        short_bytes=need_all - total_bytes,
        host=host,
        said="replicas",
        facts=facts(replicas=count, each_bytes=each),
    )


def room_terms(state: CardState) -> tuple[tuple[str, int], ...]:
    """The terms of a card's room: free − held − margin − what new seats here take."""
    return (
        ("free_bytes", state.free_bytes),
        ("held_bytes", state.held_bytes),
        ("margin_bytes", state.margin_bytes),
        ("others_bytes", state.others_bytes),
    )


def gate_reason(
    *,
    requested_bytes: int | None,
    util: Decimal | None,
    state: CardState,
    host: str,
    engine: str = "vLLM",
) -> Reason | None:
    """Rule `gate` (vLLM's own): engine free < ceil(util × CUDA total)."""
    if requested_bytes is None or util is None:
        return None
    gate_free = state.gate_free_bytes
    if passes_gate(gate_free, requested_bytes):
        return None
    short = requested_bytes - gate_free
    return Reason(
        rule="gate",
        card=state.card.index,
        need_bytes=requested_bytes,
        room_bytes=gate_free,
        short_bytes=short,
        host=host,
        said="gate",
        facts=facts(
            engine=engine,
            cuda_context_bytes=state.cuda_context_bytes,
            util=format_util(util),
            cuda_total_bytes=state.cuda_total_bytes,
        ),
    )


def sharing(state: CardState) -> list[str]:
    """Who an unbounded engine would take from here: every other occupant, and the reserves."""
    return [*state.occupants, *state.reserve_names]


def unbounded_reason(*, seat: Seat, rule: GateRule, state: CardState, host: str) -> Reason | None:
    """Rule `unbounded`: it would grow into what the card's other seats and reserves need."""
    others = sharing(state)
    if not unbounded_binds(gating=rule.gating, exclusive=seat.exclusive, shared=bool(others)):
        return None
    return bare_reason(
        "unbounded",
        state.card.index,
        host=host,
        engine=engine_of(seat.engine).title,
        takes=tuple(others),
    )


def exclusive_reason(*, seat: Seat, state: CardState, host: str) -> Reason | None:
    """Rule `exclusive`: no other seat or process beside an exclusive seat, either way round."""
    index = state.card.index
    if not exclusive_binds(
        exclusive=seat.exclusive,
        occupied=bool(state.occupants),
        exclusive_neighbour=bool(state.exclusive_neighbours),
    ):
        return None
    if seat.exclusive and state.occupants:
        return bare_reason(
            "exclusive", index, host=host, said="exclusive", seat=seat.name, holds=state.occupants
        )
    return bare_reason(
        "exclusive", index, host=host, said="beside_exclusive", holds=state.exclusive_neighbours
    )


# Rules a seat without a start-up check is refused by instead (what it would squeeze).
ROOMY_RULES = ("room", "reserve", "hold")


def engine_card(state: CardState) -> EngineCard:
    """What the seat's engine meets on the card when it starts last: NVML's free less every
    other new seat and hold (its gate free, with its own context not yet up)."""
    ctx = state.cuda_context_bytes
    return EngineCard(
        cuda_total_bytes=state.cuda_total_bytes,
        free_bytes=max(0, state.gate_free_bytes + ctx),
        cuda_context_bytes=ctx,
    )


def _refusal_reason(refusal: Refusal, state: CardState, host: str) -> Reason:
    return Reason(
        rule=refusal.rule,
        card=state.card.index,
        need_bytes=refusal.need_bytes,
        room_bytes=refusal.room_bytes,
        short_bytes=refusal.short_bytes,
        host=host,
        said=refusal.said,
        facts=refusal.facts,
    )


def engine_reasons(*, seat: Seat, state: CardState, host: str) -> list[Reason]:
    """The rules of an engine that starts on no util request, each by its own module
    (DESIGN.md, Engines): its own refusal (`gate`) or its spill (`spill`), a KV cache short of one
    request (`kv_capacity`), and `unbounded` for an unpinned share of free beside anything.
    `other`, with no engine rule, answers none of them: room alone judges it."""
    engine = engine_of(seat.engine)
    if engine.util_request:
        return []  # vLLM's gate, kv_capacity and unbounded are the rules above
    card = engine_card(state)
    out = [
        _refusal_reason(refusal, state, host)
        for refusal in (engine.gate(seat, card), engine.kv_capacity(seat, card))
        if refusal is not None
    ]
    others = sharing(state)
    gating = "unbounded" if unbounded_as_declared(seat.engine) else "gated"
    if unbounded_binds(gating=gating, exclusive=seat.exclusive, shared=bool(others)):
        pins = " ".join(engine.pin_flags(seat, card)) or engine.pin_hint()
        out.append(
            bare_reason(
                "unbounded",
                state.card.index,
                host=host,
                said="unbounded_share",
                why=engine.unbounded_why(seat.engine),
                takes=tuple(others),
                pin=pins,
            )
        )
    return out


def card_reasons(
    *,
    seat: Seat,
    rule: GateRule,
    util: Decimal | None,
    state: CardState,
    need_bytes: int,
    requested_bytes: int | None,
    host: str,
    need_floor: bool = False,
) -> list[Reason]:
    """Every rule that binds for `seat` on one usable card, in the verifier's order.

    A seat without a start-up check is refused by room, reserve or hold; the first of those
    says what vLLM would do instead.
    """
    found = (
        reserve_reason(need_bytes=need_bytes, state=state, host=host),
        hold_reason(need_bytes=need_bytes, state=state, host=host),
        *hold_gate_reasons(need_bytes=need_bytes, state=state, host=host),
        room_reason(need_bytes=need_bytes, state=state, host=host, need_floor=need_floor),
        kept_reserve_reason(need_bytes=need_bytes, state=state, host=host),
        gate_reason(
            requested_bytes=requested_bytes,
            util=util,
            state=state,
            host=host,
            engine=engine_of(seat.engine).title,
        ),
        kv_capacity_reason(
            seat=seat, util=util if rule.gating == "gated" else None, state=state, host=host
        ),
        unbounded_reason(seat=seat, rule=rule, state=state, host=host),
        *engine_reasons(seat=seat, state=state, host=host),
        exclusive_reason(seat=seat, state=state, host=host),
    )
    reasons = [reason for reason in found if reason is not None]
    note = no_gate_note(seat=seat, rule=rule, util=util, state=state)
    for i, reason in enumerate(reasons):
        if note and reason.rule in ROOMY_RULES:
            reasons[i] = replace(reason, facts=reason.facts + note)
            break
    return reasons


def no_gate_note(
    *, seat: Seat, rule: GateRule, util: Decimal | None, state: CardState
) -> tuple[tuple[str, Fact], ...]:
    """What vLLM ≥ 0.34 with a util cap and no kv_cache_memory does where room refuses it.

    Its extensible KV cache skips the start-up check and grows to about
    min(util × CUDA total, free − 1 GiB): it starts, and takes from its neighbours.
    """
    free = state.free_bytes - state.others_bytes
    if rule.checks_gate or util is None or seat.resident_bytes > free:
        return ()  # gated, or it could not even load: vLLM fails as gpuplan refuses
    takes = min(requested_bytes(util, state.cuda_total_bytes), max(0, free - GiB))
    return facts(
        unchecked=engine_of(seat.engine).title,
        unchecked_version=seat.engine.version,
        unchecked_takes_bytes=takes,
        squeezes=tuple(sharing(state)),
    )
