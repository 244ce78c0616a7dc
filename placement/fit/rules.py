"""Each rule of what fits as one small pure function: a seat and a card state in, a Reason or None out.

The rule names are DESIGN.md's: room, reserve, gate, unbounded, exclusive, error, host (and
kv_capacity, whose arithmetic is `placement.fit.kv`'s). The
predicates (`fits_room`, `passes_gate`, `exclusive_binds`, `unbounded_binds`) are what the
reasons are built on; pruning and the placers call the same predicates without the words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from functools import lru_cache

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
from placement.fit.verdict import Reason, Rule, bare_reason, host_reason
from seats.model import Seat
from seats.names import escaped
from seats.units import GiB, format_bytes


@lru_cache(maxsize=8192)
def b(n: int) -> str:
    """Bytes as text. Cached: explaining refusals prints the same card figures seat after seat."""
    return format_bytes(n)


# What a negative figure says: nothing is left, and by how much the card is already over.
_NONE_LEFT = {"room": "no room", "free": "nothing free"}


def figure_text(word: str, n: int) -> str:
    """'room 1.58 GiB'; a negative figure as 'no room (344.03 MiB over)', never 'room -344.03 MiB'."""
    if n >= 0:
        return f"{word} {b(n)}"
    return f"{_NONE_LEFT.get(word, 'no ' + word)} ({b(-n)} over)"


def unbounded_binds(*, gating: str, exclusive: bool, shared: bool) -> bool:
    """Rule `unbounded`: an unbounded vLLM, not exclusive, on a card something else holds or needs."""
    return gating == "unbounded" and not exclusive and shared


def host_reasons(seat: Seat, host: str, cards: Sequence[int]) -> list[Reason]:
    """Rule `host` for the seat as a whole: the host it names, its card count, a card named twice."""
    out: list[Reason] = []
    if seat.host is not None and seat.host != host:
        out.append(host_reason(f"{seat.name} names host {seat.host}, not {host}", host))
    if len(cards) != seat.card_count:
        out.append(
            host_reason(f"{seat.name} takes {seat.card_count} card(s); {len(cards)} given", host)
        )
    if len(set(cards)) != len(cards):
        out.append(host_reason(f"card list {list(cards)} names a card twice", host))
    return out


def missing_card_reason(index: int, host: str) -> Reason:
    """Rule `host`: the snapshot has no such card."""
    return bare_reason("host", index, f"{host} has no card {index}", host)


def error_reason(card: Card, host: str) -> Reason | None:
    """Rule `error`: a card in error takes no seat."""
    if card.ok:
        return None
    # The error's words come from the snapshot (another host's file): shown, never obeyed.
    text = f"card {card.index} is in error ({escaped(card.error or '')}); it takes no seat"
    return bare_reason("error", card.index, text, host)


def reserve_reason(*, need_bytes: int, state: CardState, host: str) -> Reason | None:
    """Rule `reserve`: the seat does not fit, and reserves it is not for hold bytes here."""
    if not state.reserve_held_bytes:
        return None
    text = (
        f"{b(state.reserve_held_bytes)} held for {', '.join(dict.fromkeys(state.reserve_for))} "
        f"({', '.join(state.reserve_names)})"
    )
    return _held_reason("reserve", text, need_bytes=need_bytes, state=state, host=host)


def kept_reserve_reason(*, need_bytes: int, state: CardState, host: str) -> Reason | None:
    """Rule `reserve` beside `room`: a reserve in use by its own seats keeps part of the room short.

    What is left of a reserve whose seats run or are placed here is theirs: the user must learn
    that the card is held for them, not only that it is full.
    """
    if not state.kept_reserves:
        return None
    kept = "; ".join(
        f"{name} keeps {b(amount)} for {', '.join(owners)}"
        for name, amount, owners in state.kept_reserves
    )
    return _held_reason("reserve", kept, need_bytes=need_bytes, state=state, host=host)


def hold_reason(*, need_bytes: int, state: CardState, host: str) -> Reason | None:
    """Rule `hold`: the seat does not fit, and other approved deploys' holds take bytes here."""
    if not state.hold_held_bytes:
        return None
    text = "; ".join(state.hold_notes)
    return _held_reason("hold", text, need_bytes=need_bytes, state=state, host=host)


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
                text=f"would leave {gate.seat}'s approved gate short by {b(short)} "
                f"(it requests {b(gate.requested_bytes)}; {gate.note})",
                host=host,
            )
        )
    return out


def _held_reason(
    rule: Rule, text: str, *, need_bytes: int, state: CardState, host: str
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
        text=text,
        host=host,
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
        text=(
            f"need at least {b(need_bytes)} (its resident is unknown), "
            f"{figure_text('room', room)} ({room_terms(state)}): short at least {b(short)}"
            if need_floor
            else f"need {b(need_bytes)}, {figure_text('room', room)} ({room_terms(state)}): "
            f"short {b(short)}"
        ),
        host=host,
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
        text=f"{count} replicas need {count} × {b(each)} = {b(need_all)}, more than the card's "
        f"{b(total_bytes)} in all: refused at once, no replica judged",
        host=host,
    )


def room_terms(state: CardState) -> str:
    """'5.57 GiB free − 256.00 MiB margin', leaving out the terms that are zero."""
    text = f"{b(state.free_bytes)} free"
    for amount, label in (
        (state.held_bytes, "held"),
        (state.margin_bytes, "margin"),
        (state.others_bytes, "for new seats here"),
    ):
        if amount:
            text += f" − {b(amount)} {label}"
    return text


def gate_reason(
    *, requested_bytes: int | None, util: Decimal | None, state: CardState, host: str
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
        text=f"vLLM's gate: {figure_text('free', gate_free)} after its "
        f"{b(state.cuda_context_bytes)} CUDA context "
        f"is less than util {format_util(util)} × {b(state.cuda_total_bytes)} = "
        f"{b(requested_bytes)}: short {b(short)}",
        host=host,
    )


def sharing(state: CardState) -> list[str]:
    """Who an unbounded engine would take from here: every other occupant, and the reserves."""
    return [*state.occupants, *state.reserve_names]


def unbounded_reason(*, seat: Seat, rule: GateRule, state: CardState, host: str) -> Reason | None:
    """Rule `unbounded`: it would grow into what the card's other seats and reserves need."""
    others = sharing(state)
    if not unbounded_binds(gating=rule.gating, exclusive=seat.exclusive, shared=bool(others)):
        return None
    text = (
        "unbounded vLLM (≥ 0.34 with neither gpu_memory_utilization nor kv_cache_memory) "
        f"would take what {', '.join(others)} need"
    )
    return bare_reason("unbounded", state.card.index, text, host)


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
        text = f"{seat.name} is exclusive; card {index} holds {', '.join(state.occupants)}"
    else:
        text = f"card {index} holds exclusive {', '.join(state.exclusive_neighbours)}"
    return bare_reason("exclusive", index, text, host)


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
        text=refusal.text,
        host=host,
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
        text = (
            f"unbounded {engine.unbounded_why(seat.engine)}: it takes a share of what is free "
            f"when it starts, so it would take what {', '.join(others)} need; pin it ({pins})"
        )
        out.append(bare_reason("unbounded", state.card.index, text, host))
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
        gate_reason(requested_bytes=requested_bytes, util=util, state=state, host=host),
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
        if note is not None and reason.rule in ROOMY_RULES:
            reasons[i] = replace(reason, text=f"{reason.text}; {note}")
            break
    return reasons


def no_gate_note(
    *, seat: Seat, rule: GateRule, util: Decimal | None, state: CardState
) -> str | None:
    """What vLLM ≥ 0.34 with a util cap and no kv_cache_memory does where room refuses it.

    Its extensible KV cache skips the start-up check and grows to about
    min(util × CUDA total, free − 1 GiB): it starts, and takes from its neighbours.
    """
    free = state.free_bytes - state.others_bytes
    if rule.checks_gate or util is None or seat.resident_bytes > free:
        return None  # gated, or it could not even load: vLLM fails as gpuplan refuses
    takes = min(requested_bytes(util, state.cuda_total_bytes), max(0, free - GiB))
    squeezed = sharing(state) or ["the card's margin"]
    return (
        f"vLLM {seat.engine.version} would not refuse it (no start-up check without "
        f"kv_cache_memory): it would start and take about {b(takes)}, squeezing "
        f"{', '.join(squeezed)}"
    )
