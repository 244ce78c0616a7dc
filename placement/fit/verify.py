"""The verifier: one seat judged on given cards, in exact integer bytes, by DESIGN.md "What fits means".

`plan`, `check`, the report and the fleet code all decide through `judge`; the solver only proposes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal, TypeVar

from inventory.snapshot import Card, Snapshot
from placement.fit.beside import unbounded_beside
from placement.fit.capacity import cuda_context_bytes
from placement.fit.card import CardKey, CardModel, card_model, cuda_total
from placement.fit.engines import (
    UTIL_STEP,
    GateRule,
    cover_target,
    engine_flags,
    engine_of,
    format_util,
    gate_rule,
    largest_util_within,
    need_bytes,
    passes_gate,
    requested_bytes,
    requests_util,
    smallest_util_covering,
)
from placement.fit.engines.base import EngineCard
from placement.fit.engines.note import Note, note
from placement.fit.kv import (
    graphs_outside_request_bytes,
    kv_fixes,
    profile_resident_warning,
    util_target_bytes,
)
from placement.fit.rules import (
    ROOMY_RULES,
    card_reasons,
    engine_card,
    error_reason,
    host_reasons,
    missing_card_reason,
    no_gate_note,
)
from placement.fit.state import CardState, card_state
from placement.fit.verdict import CardFigures, Reason, Verdict, host_reason
from seats.model import Catalogue, Reserve, Seat

Mode = Literal["plan", "check"]
K = TypeVar("K")


def host_catalogues(catalogue: Catalogue, *, hostless: bool = False) -> dict[str, Catalogue]:
    """Per host, the catalogue cut down to what the per-card formulas of that host read.

    The formulas of placement.fit.capacity scan every seat of the catalogue for each card; in a
    fleet that makes each card cost as much as the whole fleet. A host's view keeps every host
    entry, the host's reserves, and the seats the host's formulas can name (in catalogue
    order): those on the host and those a reserve of the host is for. Judged through it, a
    card gives the same figures as through the whole catalogue. `hostless` adds the seats
    that name no host (attribution and the snapshot checks read those too).
    """
    return dict(host_views(catalogue, hostless=hostless))


def card_catalogues(catalogue: Catalogue) -> dict[tuple[str, int], Catalogue]:
    """Per card of every described host, the catalogue cut down to what that card's formulas read.

    Like `host_catalogues`, one level down: the card's reserves, and the seats pinned to it
    or named by one of its reserves (catalogue order). A card that nothing is pinned to or
    held on shares one view with no seats and no reserves. Good only for judging that one
    card; a seat judged on several cards needs its host's view.
    """
    return dict(card_views(catalogue))


class CatalogueViews(Mapping[K, Catalogue]):
    """`host_catalogues` or `card_catalogues` as a mapping that cuts each view when first read.

    The grouping of reserves and seats by key is one pass over the catalogue; the views
    themselves (a model copy each) are made only for the keys asked: a plan of a fleet reads
    the views of the few hosts and cards its new seats go to, not of every card.
    """

    def __init__(
        self,
        catalogue: Catalogue,
        reserves: Mapping[K, list[Reserve]],
        seats: Mapping[K, list[Seat]],
        keys: Iterable[K],
        bare: Catalogue | None = None,
    ) -> None:
        self._catalogue = catalogue
        self._reserves = reserves
        self._seats = seats
        self._keys = dict.fromkeys(keys)
        self._bare = bare  # the view of a key with neither reserves nor seats, shared
        self._made: dict[K, Catalogue] = {}

    def __getitem__(self, key: K) -> Catalogue:
        found = self._made.get(key)
        if found is not None:
            return found
        if key not in self._keys:
            raise KeyError(key)
        reserves, seats = self._reserves.get(key, []), self._seats.get(key, [])
        if self._bare is not None and not reserves and not seats:
            found = self._bare
        else:
            found = self._catalogue.model_copy(
                update={"reserves": tuple(reserves), "seats": tuple(seats)}
            )
        self._made[key] = found
        return found

    def __iter__(self) -> Iterator[K]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys


def host_views(catalogue: Catalogue, *, hostless: bool = False) -> CatalogueViews[str]:
    """`host_catalogues(catalogue, hostless=hostless)`, each view cut when first read."""
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
        named = named_by.get(seat.name, [])
        for host in dict.fromkeys(own + named) if named else own:  # `own` has no repeats
            seats[host].append(seat)
    keys = [*catalogue.hosts, *reserves, *seats]
    return CatalogueViews(catalogue, dict(reserves), dict(seats), keys)


def card_views(catalogue: Catalogue) -> CatalogueViews[tuple[str, int]]:
    """`card_catalogues(catalogue)`, each view cut when first read."""
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
        named = named_by.get(seat.name, [])
        for key in dict.fromkeys(own + named) if named or len(own) > 1 else own:
            seats[key].append(seat)
    bare = catalogue.model_copy(update={"reserves": (), "seats": ()})
    keys = [
        *((host, index) for host, spec in catalogue.hosts.items() for index in range(spec.cards)),
        *reserves,
        *seats,
    ]
    return CatalogueViews(catalogue, dict(reserves), dict(seats), keys, bare)


@dataclass(frozen=True)
class Placement:
    """A new seat put on `cards` of `host`; `util` when its start util is already fixed."""

    seat: Seat
    host: str
    cards: tuple[int, ...]
    util: Decimal | None = None


def kv_bytes(seat: Seat) -> int | None:
    """The pinned KV cache of a seat whose engine starts on a util request, else None."""
    kv = seat.engine.kv_cache_bytes
    return kv if kv is not None and requests_util(seat.engine) else None


def proposed_util(seat: Seat, cuda_totals: Iterable[int], cuda_context: int) -> Decimal | None:
    """The smallest 3-decimal util whose request covers the seat on every one of its cards."""
    # The smallest util that passes both refusals: covering the seat, and holding one sequence.
    # CUDA graphs vLLM captures outside its request (before 0.21) are part of the resident.
    cover = cover_target(seat.resident_bytes, kv_bytes(seat), cuda_context)
    cover = max(1, cover - graphs_outside_request_bytes(seat))
    target = max(cover, util_target_bytes(seat))
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
    if not requests_util(seat.engine) or (rule is not None and rule.gating != "gated"):
        return seat.resident_bytes
    return need_bytes(seat.resident_bytes, kv_bytes(seat), util, total, cuda_context)


def other_need(
    catalogue: Catalogue,
    snapshot: Snapshot,
    placement: Placement,
    card: Card,
    mode: Mode,
    free_bytes: int | None = None,
) -> int:
    """Bytes another new seat placed on `card` takes there (its own util as it will start).

    `free_bytes`: the card's free bytes as its model has them (default: the snapshot's).
    """
    seat = placement.seat
    ctx = cuda_context_bytes(catalogue, snapshot.host)
    if not requests_util(seat.engine):
        # Started before the judged seat, it meets the card as the snapshot shows it (`other`,
        # with no engine rule, answers its resident).
        free = (card.free_bytes or 0) if free_bytes is None else free_bytes
        met = EngineCard(cuda_total(card), free, ctx)
        return max(seat.resident_bytes, engine_of(seat.engine).need_bytes(seat, met))
    rule = gate_rule(seat.engine, propose=mode == "plan")
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


# Card states shared between judgements of different seats, by (host, card, mode); see
# `judge(state_cache=...)`.
CardStates = dict[tuple[str, int, str], CardState]


def _anonymous_on(catalogue: Catalogue, seat: Seat, card: Card) -> bool:
    """True when nothing on `card` names `seat`: its state is then the same for any such seat.

    card_state reads the seat's name only to free its own processes (a redeploy), to skip
    reserves held for it, and to leave it out of the card's declared seats and occupants.
    """
    name = seat.name
    if any(process.seat == name for process in card.processes):
        return False
    if any(s.name == name for s in catalogue.seats):
        return False
    return not any(name in reserve.for_ for reserve in catalogue.reserves)


@dataclass
class _Judgement:
    """What `judge` gathers on its way: reasons, nearest changes, figures, warnings."""

    reasons: list[Reason] = field(default_factory=list)
    nearest: list[tuple[int, Note]] = field(default_factory=list)
    figures: list[CardFigures] = field(default_factory=list)
    warnings: list[Note] = field(default_factory=list)
    unknown: bool = False
    # The seat's resident is unknown (a compose service no catalogue seat describes): its need
    # is a lower bound, and a room refusal says so.
    need_floor: bool = False


def _usable_cards(
    snapshot: Snapshot, cards: Sequence[int], mode: Mode, out: _Judgement
) -> list[Card]:
    """The named cards that can take a seat; rules `host` and `error` for the others."""
    host = snapshot.host
    by_index = {card.index: card for card in snapshot.cards}
    usable: list[Card] = []
    for index in cards:
        card = by_index.get(index)
        if card is None:
            out.reasons.append(missing_card_reason(index, host))
            continue
        error = error_reason(card, host)
        if error is not None:
            out.reasons.append(error)
            out.unknown = out.unknown or mode == "check"
            continue
        usable.append(card)
        if card.reserved_bytes is None:
            out.warnings.append(note("nvml_v1_card", card=index))
    return usable


def _states(
    catalogue: Catalogue,
    snapshot: Snapshot,
    seat: Seat,
    usable: Sequence[Card],
    others: Sequence[Placement],
    mode: Mode,
    state_cache: CardStates | None,
    models: Mapping[CardKey, CardModel] | None,
    prepared: Mapping[int, CardState] | None = None,
) -> list[CardState]:
    """The state of each usable card as `seat` meets it: the card's model (from `models`, else
    built) with the other new seats there placed on it; shared through `state_cache` where it may.
    `prepared`: states already worked out for this seat beside these others, by card index."""
    host = snapshot.host
    states: list[CardState] = []
    for card in usable:
        if prepared is not None:
            ready = prepared.get(card.index)
            if ready is not None:
                states.append(ready)
                continue
        key = (host, card.index, mode)
        shared = state_cache is not None and _anonymous_on(catalogue, seat, card)
        state = state_cache.get(key) if shared and state_cache is not None else None
        if state is None:
            model = models.get((host, card.index)) if models is not None else None
            if model is None:
                model = card_model(catalogue, host, card)
            base = model
            for p in others:
                if p.host == host and card.index in p.cards and p.seat.name != seat.name:
                    need = other_need(catalogue, snapshot, p, card, mode, base.free_bytes)
                    model = model.with_seat(
                        p.seat.name,
                        need,
                        resident_bytes=p.seat.resident_bytes,
                        exclusive=p.seat.exclusive,
                    )
            state = card_state(seat, card, model)
            if shared and state_cache is not None:
                state_cache[key] = state
        states.append(state)
    return states


def _chosen_util(
    seat: Seat,
    rule: GateRule,
    states: Sequence[CardState],
    ctx: int,
    out: _Judgement,
    wide: _SeatWide,
) -> Decimal | None:
    """The util the seat is judged with: declared, default, or proposed (DESIGN.md "which util")."""
    totals = [state.cuda_total_bytes for state in states]
    start = wide.start_util(totals, ctx) if states else rule.util
    kv = kv_bytes(seat)
    # kv_cache_memory pinned: util only feeds vLLM's gate. Prefer the util whose request
    # covers the seat; where the gate cannot honour that, the largest util that passes.
    if rule.source != "proposed" or kv is None or start is None:
        return start
    if all(
        passes_gate(s.gate_free_bytes, requested_bytes(start, s.cuda_total_bytes)) for s in states
    ):
        return start
    limits = [largest_util_within(s.gate_free_bytes, s.cuda_total_bytes) for s in states]
    if any(limit is None for limit in limits):
        return start
    chosen = min(limit for limit in limits if limit is not None)
    asked = max(requested_bytes(chosen, s.cuda_total_bytes) for s in states)
    out.warnings.append(
        note(
            "largest_util",
            util=format_util(chosen),
            cards=tuple(s.card.index for s in states),
            requested_bytes=asked,
            resident_bytes=seat.resident_bytes,
        )
    )
    return chosen


def _judge_card(
    seat: Seat, rule: GateRule, util: Decimal | None, state: CardState, host: str, out: _Judgement
) -> None:
    """The figures and every binding rule of `seat` on one usable card."""
    ctx = state.cuda_context_bytes
    if requests_util(seat.engine):
        need = seat_need(seat, util, state.cuda_total_bytes, ctx, rule)
    else:
        need = engine_of(seat.engine).need_bytes(seat, engine_card(state))
    requested = (
        requested_bytes(util, state.cuda_total_bytes)
        if rule.gating == "gated" and rule.checks_gate and util is not None
        else None
    )
    out.figures.append(
        CardFigures(
            card=state.card.index,
            free_bytes=state.free_bytes,
            held_bytes=state.held_bytes,
            margin_bytes=state.margin_bytes,
            others_bytes=state.others_bytes,
            need_bytes=need,
            room_bytes=state.room_bytes,
            gate_free_bytes=state.gate_free_bytes if requested is not None else None,
            requested_bytes=requested,
        )
    )
    reasons = card_reasons(
        seat=seat,
        rule=rule,
        util=util,
        state=state,
        need_bytes=need,
        requested_bytes=requested,
        host=host,
        need_floor=out.need_floor,
    )
    out.reasons.extend(reasons)
    if (
        util is not None
        and no_gate_note(seat=seat, rule=rule, util=util, state=state)
        and any(r.rule in ROOMY_RULES for r in reasons)
    ):
        out.warnings.append(
            note("no_gate", version=seat.engine.version, seat=seat.name, util=format_util(util))
        )
    if reasons:
        out.nearest.extend(_nearest(seat, rule, util, state, need, requested, ctx, reasons))


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
    need_floor: bool = False,
    models: Mapping[CardKey, CardModel] | None = None,
    prepared: Mapping[int, CardState] | None = None,
) -> Verdict:
    """Judge `seat` started last on `cards` of `snapshot` (attributed), beside the new `others`.

    `state_cache`: card states the caller shares between judgements made with the same
    catalogue, snapshot and `others` (explaining many refused seats); used only for cards
    where nothing names the seat, whose state does not depend on which seat it is.

    `mode="plan"` proposes a util where none is declared; `mode="check"` uses the version's
    default. `util`, `kv_cache_bytes`, `resident_bytes` override the catalogue's figures.
    `need_floor`: the seat's resident is unknown, so its need is a lower bound (said in `room`).
    `models`: the cards' models by (host, index), where the caller has them or simulates on them
    (seats placed or taken off: a move, a deploy); a card missing there is modelled from `snapshot`.
    `prepared`: the states of some of `cards` as `seat` meets them beside `others`, worked out by
    the caller (`verify_placement`, a card at a time); the other cards' are worked out here.
    """
    seat = override_seat(seat, util, kv_cache_bytes, resident_bytes)
    wide = _SeatWide(seat, gate_rule(seat.engine, propose=mode == "plan"))
    return _judged(
        catalogue, snapshot, wide, cards, others, mode, need_floor, state_cache, models, prepared
    )


def judge_each(
    views: Sequence[Catalogue],
    snapshot: Snapshot,
    seat: Seat,
    cards: Sequence[int],
    *,
    others: Sequence[Placement] = (),
    state_cache: CardStates | None = None,
    models: Mapping[CardKey, CardModel] | None = None,
) -> list[Verdict]:
    """`seat` judged on each of `cards` alone, each through its own catalogue view (`views`):

        judge_each(views, snapshot, seat, cards, ...) == [
            judge(view, snapshot, seat, [index], ...) for view, index in zip(views, cards)
        ]

    (mode "plan"), with what no card changes worked out once: the seat's gate rule, its start
    util per CUDA total and its engine flags per util. Explaining a refused seat asks this of
    every card of a host.
    """
    wide = _SeatWide(seat, gate_rule(seat.engine, propose=True))
    return [
        _judged(view, snapshot, wide, [index], others, "plan", False, state_cache, models, None)
        for view, index in zip(views, cards, strict=True)
    ]


@dataclass
class _SeatWide:
    """What judging one seat works out that no card changes (shared by `judge_each`'s cards)."""

    seat: Seat
    rule: GateRule
    # start_util by (CUDA totals, cuda_context); engine flags by the util chosen.
    starts: dict[tuple[tuple[int, ...], int], Decimal | None] = field(default_factory=dict)
    flags: dict[Decimal | None, tuple[str, ...]] = field(default_factory=dict)

    def start_util(self, totals: Sequence[int], ctx: int) -> Decimal | None:
        key = (tuple(totals), ctx)
        if key not in self.starts:
            self.starts[key] = start_util(self.seat, self.rule, totals, ctx)
        return self.starts[key]

    def engine_flags(self, chosen: Decimal | None) -> tuple[str, ...]:
        found = self.flags.get(chosen)
        if found is None:
            seat, rule = self.seat, self.rule
            found = self.flags[chosen] = tuple(
                engine_flags(
                    seat.engine, chosen, kv_bytes(seat), proposed=rule.source != "declared"
                )
            )
        return found


def _judged(
    catalogue: Catalogue,
    snapshot: Snapshot,
    wide: _SeatWide,
    cards: Sequence[int],
    others: Sequence[Placement],
    mode: Mode,
    need_floor: bool,
    state_cache: CardStates | None,
    models: Mapping[CardKey, CardModel] | None,
    prepared: Mapping[int, CardState] | None,
) -> Verdict:
    """`judge`'s body, the seat's overrides put in and its card-independent figures in `wide`."""
    seat, rule = wide.seat, wide.rule
    host = snapshot.host
    ctx = cuda_context_bytes(catalogue, host)
    out = _Judgement(
        reasons=host_reasons(seat, host, cards), warnings=list(rule.warnings), need_floor=need_floor
    )
    usable = _usable_cards(snapshot, cards, mode, out)
    # A host without cuda_context is said once per run, by fit.consistency.check_snapshot.
    states = _states(catalogue, snapshot, seat, usable, others, mode, state_cache, models, prepared)
    chosen = _chosen_util(seat, rule, states, ctx, out, wide)
    # A proposed util makes the request the resident already: only a declared figure can fall short.
    if rule.source != "proposed" or kv_bytes(seat) is not None:
        warning = profile_resident_warning(seat, chosen, states, ctx)
        out.warnings.extend([warning] if warning else [])
    for state in states:
        _judge_card(seat, rule, chosen, state, host, out)
    if mode == "check":
        # Beside an unbounded new seat nothing can count on its room (fit/beside.py); the plan
        # proposes every unbounded seat a util, so none is unbounded there.
        placed = [(p.seat, p.host, p.cards) for p in others]
        out.reasons.extend(unbounded_beside(seat, host, cards, placed))
    gated = requests_util(seat.engine) and rule.gating == "gated"
    if gated:
        flags = wide.engine_flags(chosen)
    elif states and not requests_util(seat.engine):
        # DESIGN.md, Engines: the flags that make it take its declared bytes (its pin).
        flags = engine_of(seat.engine).pin_flags(seat, engine_card(states[0]))
    else:
        flags = ()
    return Verdict(
        verdict="unknown" if out.unknown else ("refuse" if out.reasons else "pass"),
        seat=seat.name,
        host=host,
        cards=tuple(cards),
        reasons=tuple(out.reasons),
        flags=flags,
        warnings=tuple(dict.fromkeys(out.warnings)),
        nearest=tuple(dict.fromkeys(text for _, text in sorted(out.nearest, key=lambda i: i[0]))),
        need_bytes=max((f.need_bytes for f in out.figures), default=seat.resident_bytes),
        util=format_util(chosen) if chosen is not None and rule.gating == "gated" else None,
        figures=tuple(out.figures),
        engine=seat.engine,
    )


def _nearest(
    seat: Seat,
    rule: GateRule,
    util: Decimal | None,
    state: CardState,
    need: int,
    requested: int | None,
    ctx: int,
    reasons: Sequence[Reason],
) -> list[tuple[int, Note]]:
    """Smallest changes that would let the seat onto this card, keyed by bytes to find."""
    index = state.card.index
    rules = {reason.rule for reason in reasons}
    if rules & {"error", "host", "exclusive", "unbounded"}:
        return []
    out: list[tuple[int, Note]] = [(0, fix) for fix in kv_fixes(seat, util, state)]
    kv = kv_bytes(seat)
    room_short = max(0, need - state.room_bytes)
    gate_short = max(0, (requested or 0) - state.gate_free_bytes)
    if util is not None:
        out.extend(_util_hints(seat, rule, util, state, need, rules, room_short, gate_short))
    if "room" in rules and kv is not None and room_short < kv and not gate_short:
        out.append((room_short, note("lower_kv", short_bytes=room_short, card=index)))
    if "reserve" in rules and "room" not in rules and not gate_short:
        out.append((room_short, note("release", reserves=tuple(state.reserve_names))))
    kept = sum(amount for _, amount, _ in state.kept_reserves)
    if "room" in rules and kept >= room_short and not gate_short:
        names = tuple(name for name, _, _ in state.kept_reserves)
        out.append((room_short, note("release", reserves=names)))
    short = max(room_short, gate_short)
    if need > state.cuda_total_bytes - state.margin_bytes:
        # No amount of freeing makes a card hold more than its own total.
        return [(short, note("too_big", need_bytes=need, cuda_total_bytes=state.cuda_total_bytes))]
    # Only what the card's processes hold can be freed: never the bytes a reserve keeps.
    idle_reserve_alone = "reserve" in rules and "room" not in rules
    if short and not idle_reserve_alone and short <= state.freeable_bytes:
        out.append((short, note("free", short_bytes=short, card=index)))
    return out


def _util_hints(
    seat: Seat,
    rule: GateRule,
    util: Decimal,
    state: CardState,
    need: int,
    rules: Collection[str],
    room_short: int,
    gate_short: int,
) -> list[tuple[int, Note]]:
    """A smaller util that would let the seat onto the card (its gate, or its room)."""
    index, ctx, total = state.card.index, state.cuda_context_bytes, state.cuda_total_bytes
    out: list[tuple[int, Note]] = []
    if rules == {"gate"} and rule.source != "proposed":
        limit = largest_util_within(state.gate_free_bytes, total)
        if limit is not None and seat_need(seat, limit, total, ctx, rule) <= state.room_bytes:
            out.append((gate_short, note("smaller_util", card=index, util=format_util(limit))))
    if "room" in rules and kv_bytes(seat) is None and need > seat.resident_bytes:
        # The request sizes this seat: a smaller util shrinks it. Without a start-up check
        # (vLLM ≥ 0.34, util a cap) only the room bounds the util.
        within = state.room_bytes - ctx
        if rule.checks_gate:
            within = min(within, state.gate_free_bytes)
        limit = largest_util_within(within, total)
        if limit is not None and seat.resident_bytes <= state.room_bytes:
            out.append((room_short, note("smaller_util", card=index, util=format_util(limit))))
    return out


def verify_placement(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    placements: Sequence[Placement],
    *,
    mode: Mode = "plan",
    views: Mapping[str, Catalogue] | None = None,
    card_views: Mapping[tuple[str, int], Catalogue] | None = None,
    models: Mapping[CardKey, CardModel] | None = None,
    placed_models: dict[CardKey, CardModel] | None = None,
) -> list[Verdict]:
    """Re-judge every placement as if it started last beside all the others; one verdict each.

    `views`, `card_views`: `host_catalogues(catalogue)` and `card_catalogues(catalogue)`
    when the caller already has them; `models`: the cards' models (see `judge`).
    `placed_models`: filled (where `models` has the card) with each card that takes a placement,
    modelled with every placement there placed as `judge` places them for a seat that is none
    of them (explaining a refused seat beside these placements reads them).
    """
    by_host = {snapshot.host: snapshot for snapshot in snapshots}
    if views is None:
        views = host_catalogues(catalogue)
    # judge reads only the others on the placement's own host: hand it those alone.
    on_host: dict[str, list[Placement]] = defaultdict(list)
    for placement in placements:
        on_host[placement.host].append(placement)
    # Each card's other new seats are placed on its model once per card, not per judged seat.
    prepared = _placed_states(catalogue, by_host, on_host, views, mode, models, placed_models)
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
                    (host_reason(host=placement.host, said="no_snapshot"),),
                    engine=placement.seat.engine,
                )
            )
            continue
        ready = prepared.get(id(placement))
        if mode == "plan" and ready is not None and len(ready) == len(placement.cards):
            others: list[Placement] = []  # judge reads them only for the states prepared here
        else:
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
                models=models,
                prepared=ready,
            )
        )
    return verdicts


def _placed_states(
    catalogue: Catalogue,
    by_host: Mapping[str, Snapshot],
    on_host: Mapping[str, Sequence[Placement]],
    views: Mapping[str, Catalogue],
    mode: Mode,
    models: Mapping[CardKey, CardModel] | None,
    placed_models: dict[CardKey, CardModel] | None = None,
) -> dict[int, dict[int, CardState]]:
    """Per placement (by id), the state of each of its cards beside every other placement there.

    A card at a time: the bytes each new seat on the card takes there (`other_need`, which does
    not depend on the seat judged) are worked out once, and each judged seat's state is the
    card's model with the others placed in the order `judge` places them. Only cards with a
    model in `models` are prepared; `judge` works out the rest itself.
    """
    out: dict[int, dict[int, CardState]] = defaultdict(dict)
    if models is None:
        return out
    for host, here in on_host.items():
        snapshot = by_host.get(host)
        if snapshot is None:
            continue
        view = views.get(host, catalogue)
        cards = {card.index: card for card in snapshot.cards if card.ok}
        for index, seated in _by_card(here, cards).items():
            base = models.get((host, index))
            if base is None:
                continue
            states, whole = _card_states(view, snapshot, cards[index], base, seated, mode)
            for judged, state in states:
                out[id(judged)][index] = state
            if placed_models is not None:
                placed_models[(host, index)] = whole
    return out


def _by_card(placements: Sequence[Placement], cards: Collection[int]) -> dict[int, list[Placement]]:
    """The placements on each of `cards`, in their order."""
    on_card: dict[int, list[Placement]] = defaultdict(list)
    for placement in placements:
        for index in placement.cards:
            if index in cards:
                on_card[index].append(placement)
    return on_card


def _card_states(
    catalogue: Catalogue,
    snapshot: Snapshot,
    card: Card,
    base: CardModel,
    seated: Sequence[Placement],
    mode: Mode,
) -> tuple[list[tuple[Placement, CardState]], CardModel]:
    """Each of `seated` with its state on `card` (the model with every other of them placed),
    and the model with all of them placed."""
    needs = [other_need(catalogue, snapshot, p, card, mode, base.free_bytes) for p in seated]

    def placed(judged: str | None) -> CardModel:
        model = base
        for p, need in zip(seated, needs, strict=True):
            if p.seat.name != judged:
                model = model.with_seat(
                    p.seat.name,
                    need,
                    resident_bytes=p.seat.resident_bytes,
                    exclusive=p.seat.exclusive,
                )
        return model

    states = [
        (judged, card_state(judged.seat, card, placed(judged.seat.name))) for judged in seated
    ]
    return states, placed(None)


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
