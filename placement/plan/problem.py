"""The numbers the placement model sees: cards of every host, new seats, and per (seat, card) needs.

Built from a catalogue and one attributed snapshot per host; fleet-aware (hosts of any size,
seats free to go to any host). The same engine and capacity functions as the verifier.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from operator import attrgetter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from inventory.attribution import attribute_fleet
from inventory.snapshot import Snapshot
from placement.fit.card import CardModel, FleetCards, LoosestRoom
from placement.fit.engines import (
    UTIL_STEP,
    GateRule,
    gate_rule,
    need_bytes,
    requested_bytes,
    requests_util,
)
from placement.fit.verify import card_views, host_views, kv_bytes, start_util
from seats.errors import CatalogueError
from seats.loader import format_loc, read_text_file, read_yaml
from seats.model import Catalogue, Seat

CardKey = tuple[str, int]
PairKey = tuple[str, str, int]  # (seat, host, card)


@dataclass(frozen=True)
class NewSeat:
    """A seat to place: a `planned` catalogue seat or one from an --add file."""

    seat: Seat
    origin: str

    @property
    def name(self) -> str:
        """The seat's name."""
        return self.seat.name


@dataclass(frozen=True)
class Problem:
    """Everything the model needs, and the inputs the verifier re-checks it with."""

    catalogue: Catalogue
    snapshots: tuple[Snapshot, ...]
    seats: tuple[NewSeat, ...]
    cards: tuple[CardModel, ...]
    hosts: dict[str, tuple[CardModel, ...]]
    need: Mapping[PairKey, int]  # eligible (seat, host, card) pairs only (a PairTable)
    gate_bound: Mapping[PairKey, int]  # load on the card must stay ≤ this when the seat is there
    warnings: tuple[str, ...] = ()
    notes: dict[str, list[str]] = field(default_factory=dict)
    # verify.host_catalogues(catalogue), when the builder made it already (verify.host_views:
    # each view cut when first read).
    host_views: Mapping[str, Catalogue] = field(default_factory=dict, repr=False, compare=False)
    # verify.card_catalogues(catalogue), likewise (verify.card_views).
    card_views: Mapping[CardKey, Catalogue] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def _seat_index(self) -> dict[str, NewSeat]:
        # First of a name wins, as the scan it replaces did (names are unique anyway).
        index: dict[str, NewSeat] = {}
        for new in self.seats:
            index.setdefault(new.name, new)
        return index

    @cached_property
    def _snapshot_index(self) -> dict[str, Snapshot]:
        index: dict[str, Snapshot] = {}
        for snapshot in self.snapshots:
            index.setdefault(snapshot.host, snapshot)
        return index

    @cached_property
    def host_catalogues(self) -> Mapping[str, Catalogue]:
        """verify.host_catalogues of the catalogue (build_problem hands over the one it made)."""
        return self.host_views or host_views(self.catalogue)

    @cached_property
    def memo(self) -> dict[str, Any]:
        """What a planner works out once per problem and reads again, under its own key."""
        return {}

    @cached_property
    def models(self) -> dict[CardKey, CardModel]:
        """Every card's model by (host, index): what the verifier judges on."""
        if isinstance(self.need, PairTable) and self.need.hosts is self.hosts:
            return self.need.slots  # the same cards, indexed once already
        return {slot.key: slot for slot in self.cards}

    def seat(self, name: str) -> NewSeat:
        """The new seat called `name`."""
        return self._seat_index[name]

    def snapshot(self, host: str) -> Snapshot:
        """The snapshot of `host`."""
        return self._snapshot_index[host]

    def host_catalogue(self, host: str) -> Catalogue:
        """The catalogue as `host`'s cards see it (verify.host_catalogues): same figures, less to scan."""
        return self.host_catalogues.get(host, self.catalogue)

    @cached_property
    def card_catalogues(self) -> Mapping[CardKey, Catalogue]:
        """verify.card_catalogues of the catalogue (build_problem hands over the one it made)."""
        return self.card_views or card_views(self.catalogue)

    def card_catalogue(self, host: str, index: int) -> Catalogue:
        """The catalogue as card `index` of `host` sees it, for judging that card alone."""
        found = self.card_catalogues.get((host, index))
        return found if found is not None else self.host_catalogue(host)

    def eligible_hosts(self, name: str) -> list[str]:
        """Hosts with at least as many eligible cards as the seat takes."""
        seat = self.seat(name).seat
        hosts: list[str] = list(self.hosts)
        if seat.host is not None:
            # A seat that names its host has no pair anywhere else.
            hosts = [seat.host] if seat.host in self.hosts else []
        return [host for host in hosts if self._eligible_on(name, host) >= seat.card_count]

    def has_eligible_host(self, name: str) -> bool:
        """True when `eligible_hosts(name)` is not empty, asking the fewest hosts.

        Hosts are tried widest first: a card whose free − margin − absent (its own processes
        freed) is under the seat's resident can hold no eligible pair of it (the need is at
        least the resident, the held bytes at least the absent ones), so the search stops at
        the first such host.
        """
        new = self.seat(name)
        if new.seat.host is not None:
            return bool(self.eligible_hosts(name))
        count, resident = new.seat.card_count, new.seat.resident_bytes
        for widest, host in self._hosts_widest_first:
            if widest < resident:
                return False
            if self._eligible_on(name, host) >= count:
                return True
        return False

    def pairs_exceed(self, limit: int) -> bool:
        """len(need) > limit, enumerating no more pairs than it takes to tell."""
        if isinstance(self.need, PairTable):
            return self.need.exceeds(limit)
        return len(self.need) > limit

    def restricted(self, host: str, seats: Sequence[NewSeat]) -> Problem:
        """The part of the problem on `host` alone, for `seats` (which name it): cards as they are."""
        hosts = {host: self.hosts[host]}
        table = PairTable(seats, hosts)
        return Problem(
            catalogue=self.catalogue,
            snapshots=tuple(s for s in self.snapshots if s.host == host),
            seats=tuple(seats),
            cards=hosts[host],
            hosts=hosts,
            need=table,
            gate_bound=table.gate_bounds,
            host_views=self.host_views,
            card_views=self.card_views,
        )

    def least_width(self, name: str) -> int:
        """`PairTable.least_width`: the width below which no card takes `name` (its resident at least)."""
        if isinstance(self.need, PairTable):
            return self.need.least_width(name)
        return self.seat(name).seat.resident_bytes

    def pair(self, name: str, host: str, index: int) -> PairEntry | None:
        """(need, gate bound or None) when `name` may go on card `index` of `host`, else None.

        One lookup for both: the greedy placers ask it for every card they try.
        """
        if isinstance(self.need, PairTable):
            return self.need.entry(name, host, index)
        key = (name, host, index)
        need = self.need.get(key)
        return None if need is None else (need, self.gate_bound.get(key))

    def _eligible_on(self, name: str, host: str) -> int:
        slots = self.hosts[host]
        resident = self.seat(name).seat.resident_bytes
        # Cards too narrow for the resident hold no pair of the seat (see has_eligible_host).
        return sum(
            1
            for slot in slots
            if slot.ok
            and slot.open_bytes + slot.own_bytes.get(name, 0) >= resident
            and (name, host, slot.index) in self.need
        )

    @cached_property
    def _hosts_widest_first(self) -> list[tuple[int, str]]:
        widest = [
            (
                max((c.widest_bytes for c in slots if c.ok), default=-1),
                host,
            )
            for host, slots in self.hosts.items()
        ]
        # Stable: equal widths keep host order.
        return sorted(widest, key=lambda item: -item[0])


def split_by_host(problem: Problem) -> list[Problem] | None:
    """One part per host when every new seat names its host (and seats name two hosts or more).

    A seat that names its host has no pair anywhere else, so each host's seats and cards form a
    problem of their own. None when some seat may go to any host (then every host is one part),
    or when there would be one part. Seats naming a host with no snapshot belong to no part.
    """
    by_host: dict[str, list[NewSeat]] = {}
    for new in problem.seats:
        if new.seat.host is None:
            return None
        by_host.setdefault(new.seat.host, []).append(new)
    parts = [
        problem.restricted(host, seats) for host, seats in by_host.items() if host in problem.hosts
    ]
    return parts if len(parts) > 1 else None


def _refuse_a_catalogue(data: Any, name: str) -> None:
    """A catalogue passed to --add by mistake: "hosts: unknown key" would not say why."""
    if isinstance(data, dict) and ("hosts" in data or "reserves" in data):
        raise CatalogueError(
            name,
            "",
            f"this is a catalogue (it has {'hosts' if 'hosts' in data else 'reserves'}:); "
            "--add wants a seat file: one seat mapping or a list of seats (pass a catalogue "
            "with --catalogue)",
        )


def load_add_file(path: str | Path) -> list[Seat]:
    """Seats from an --add YAML file: one seat mapping or a list of them, validated like the catalogue's."""
    name = str(path)
    text = read_text_file(path, "a seat file")
    data = read_yaml(text, name)
    items: list[Any]
    _refuse_a_catalogue(data, name)
    if isinstance(data, dict) and "seats" in data and len(data) == 1:
        items, prefix = list(data["seats"] or []), "seats"
    elif isinstance(data, dict):
        items, prefix = [data], ""
    elif isinstance(data, list):
        items, prefix = data, ""
    else:
        raise CatalogueError(name, "", "a seat file holds one seat mapping or a list of seats")
    if not items:
        raise CatalogueError(name, "", "the file names no seat")
    seats: list[Seat] = []
    for i, item in enumerate(items):
        at: tuple[int | str, ...] = (
            (prefix, i) if prefix else ((i,) if isinstance(data, list) else ())
        )
        if not isinstance(item, dict):
            raise CatalogueError(name, format_loc(at), "a seat is a mapping with name and resident")
        try:
            seat = Seat.model_validate(item)
        except ValidationError as exc:
            errors = exc.errors()
            # A misspelt key also shows as a missing one: name the spelling, the cause.
            first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
            loc = [p for p in first["loc"] if not (isinstance(p, str) and "[" in p)]
            msg = str(first["msg"]).removeprefix("Value error, ")
            if first["type"] == "extra_forbidden":
                msg = "unknown key (check its spelling against `gpuplan schema`)"
            raise CatalogueError(name, format_loc(at + tuple(loc)), msg) from exc
        if seat.state != "planned":
            raise CatalogueError(
                name, format_loc((*at, "state")), f"an added seat is planned, not {seat.state!r}"
            )
        seats.append(seat)
    return seats


def new_seats(catalogue: Catalogue, adds: Sequence[tuple[str, Seat]] = ()) -> list[NewSeat]:
    """Every `planned` catalogue seat, then each added seat (names unique, hosts and cards real)."""
    out = [NewSeat(seat, "catalogue") for seat in catalogue.seats if seat.state == "planned"]
    taken = {seat.name: "the catalogue" for seat in catalogue.seats}
    taken.update({r.name: "a reserve" for r in catalogue.reserves})
    for origin, seat in adds:
        if seat.name in taken:
            raise CatalogueError(
                origin, "name", f"seat name {seat.name!r} is already used by {taken[seat.name]}"
            )
        taken[seat.name] = origin
        if seat.host is not None and seat.host not in catalogue.hosts:
            raise CatalogueError(
                origin,
                "host",
                f"host {seat.host!r} is not among hosts ({', '.join(catalogue.hosts)})",
            )
        if seat.pinned_cards is not None:
            if seat.host is None:
                raise CatalogueError(
                    origin, "host", f"seat {seat.name!r} pins cards but names no host"
                )
            count = catalogue.hosts[seat.host].cards
            bad = [c for c in seat.pinned_cards if c >= count]
            if bad:
                raise CatalogueError(
                    origin,
                    "gpus",
                    f"host {seat.host!r} has cards 0–{count - 1}; there is no card {bad[0]}",
                )
        out.append(NewSeat(seat, origin))
    return out


@contextmanager
def few_collections() -> Iterator[None]:
    """The cyclic garbage collector run less often while a fleet's models are built.

    Building a model per card allocates hundreds of thousands of small objects, none in a
    cycle; at the default threshold each few hundred allocations start a collection, and every
    collection walks the young objects so far: a tenth of a daily fleet's plan (4,096 × 8
    cards). As mypy does for its build, the first generation's threshold is raised for the
    while, then put back as it was. What is still alive when the outermost of these ends (the
    models and the answer) lives long: it goes to the oldest generation as it is
    (`gc.freeze` then `gc.unfreeze`), not walked again as young on the way out (0.2-0.35 s of
    CPU on 4,096 × 8). Only where nothing else is frozen: a process that froze objects of its
    own (the `gpuplan` command freezes its start-up) keeps them frozen, and what the plan
    leaves is walked once as young, as before.
    """
    global _DEPTH
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], FEW_COLLECTIONS), *before[1:])
    _DEPTH += 1
    try:
        yield
    finally:
        _DEPTH -= 1
        if _DEPTH == 0 and gc.isenabled() and gc.get_freeze_count() == 0:
            # Nothing else is frozen, so unfreezing moves only what this just froze.
            gc.freeze()
            gc.unfreeze()
        gc.set_threshold(*before)


# Allocations between two young-generation collections while a fleet's models are built.
FEW_COLLECTIONS = 1_000_000
_DEPTH = 0  # few_collections blocks open now (they nest: a plan builds its problem)


def build_problem(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    seats: Sequence[NewSeat],
    *,
    attributed: bool = False,
    models: Mapping[CardKey, CardModel] | None = None,
) -> Problem:
    """The model's numbers for placing `seats` on the cards of `snapshots` (one per host).

    `models`: the cards' models where the caller simulates on them (seats moved: placed on one
    card, taken off another); a card missing there is modelled from its snapshot.
    """
    with few_collections():
        return _built(catalogue, snapshots, seats, attributed, models)


def _built(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    seats: Sequence[NewSeat],
    attributed: bool,
    models: Mapping[CardKey, CardModel] | None,
) -> Problem:
    # Attribution reads the seats that may run on the host: those naming it or none.
    snaps = tuple(snapshots) if attributed else attribute_fleet(snapshots, catalogue)
    cards: list[CardModel] = []
    hosts: dict[str, tuple[CardModel, ...]] = {}
    # Every card's model in one pass over the snapshots, the catalogue indexed once.
    fleet = FleetCards(catalogue)
    for snapshot in snaps:
        if models:
            slots = tuple(
                models.get((snapshot.host, card.index)) or fleet.model(snapshot.host, card)
                for card in snapshot.cards
            )
        else:
            slots = fleet.host(snapshot)
        hosts[snapshot.host] = slots
        cards.extend(slots)
    table = PairTable(seats, hosts)
    return Problem(
        catalogue=catalogue,
        snapshots=snaps,
        seats=tuple(seats),
        cards=tuple(cards),
        hosts=hosts,
        need=table,
        gate_bound=table.gate_bounds,
        # The verifier and the explanations read the same views, each cut when first read.
        host_views=host_views(catalogue),
        card_views=card_views(catalogue),
    )


PairEntry = tuple[int, int | None]  # (need, gate bound or None)
# What a card's size class and its least offset read of it, in one call per card.
_SIZE_FIGURES = attrgetter("ok", "cuda_total", "cuda_context_bytes", "margin_bytes", "absent_bytes")


@dataclass(frozen=True)
class _SeatFacts:
    """What pruning reads of a seat, read off the pydantic model once per table."""

    seat: Seat
    name: str
    host: str | None
    card_count: int
    pinned: tuple[int, ...] | None
    exclusive: bool
    rule: GateRule


@dataclass(frozen=True)
class _SizedNeed:
    """A seat's need on cards of one CUDA total and context, and what its gate then requests."""

    util: Decimal | None
    need_bytes: int
    requested_bytes: int | None  # None: no gate (not vLLM, or no util)


def sized_need(seat: Seat, rule: GateRule, util: Decimal | None, slot: CardModel) -> _SizedNeed:
    """The seat's need and gate request on cards like `slot` (pure: cached per card size)."""
    if not requests_util(seat.engine) or rule.gating != "gated" or util is None:
        return _SizedNeed(util, seat.resident_bytes, None)
    need = need_bytes(
        seat.resident_bytes, kv_bytes(seat), util, slot.cuda_total, slot.cuda_context_bytes
    )
    if not rule.checks_gate:
        return _SizedNeed(util, need, None)  # vLLM ≥ 0.34 capped by util: room alone judges it
    if rule.source == "proposed" and kv_bytes(seat) is not None:
        # The plan falls back to the largest util that passes: the least it can ask is 0.001.
        requested = requested_bytes(UTIL_STEP, slot.cuda_total)
    else:
        requested = requested_bytes(util, slot.cuda_total)
    return _SizedNeed(util, need, requested)


class PairTable(Mapping[PairKey, int]):
    """need[(seat, host, card)] for the eligible pairs, each worked out when first asked.

    A fleet has seats × cards pairs and most callers ask a few per seat (the greedy placer,
    `has_eligible_host`); the model iterates them all. Each pair is a pure function of the
    seat and the card (`_pair`), so the answer does not depend on when it is asked, and
    iterating gives the pairs in the order a seat-by-host-by-card loop would (the model's
    variable order). What depends on the seat alone, on the card alone, or on the seat and
    the card's size is worked out once and kept.
    """

    def __init__(self, seats: Sequence[NewSeat], hosts: dict[str, tuple[CardModel, ...]]) -> None:
        self._seats = tuple(seats)
        self._by_name = {new.name: new.seat for new in reversed(self._seats)}
        self._hosts = hosts
        self._slots = {(host, slot.index): slot for host, slots in hosts.items() for slot in slots}
        self._ok_count = {
            host: sum(1 for slot in slots if slot.ok) for host, slots in hosts.items()
        }
        self._residents = {new.name: new.seat.resident_bytes for new in self._seats}
        self._memo: dict[PairKey, PairEntry | None] = {}
        self._facts: dict[str, _SeatFacts] = {}
        self._sized: dict[tuple[str, int, int], _SizedNeed] = {}
        self._rooms: dict[CardKey, LoosestRoom] = {}
        self._all: dict[PairKey, int] | None = None
        self._least_width: dict[str, int] = {}

    @property
    def gate_bounds(self) -> _GateBounds:
        """gate_bound[(seat, host, card)] read off this table (the table keeps no reference
        back: no cycle, so a plan's models are freed as soon as it is done with them)."""
        return _GateBounds(self)

    @property
    def hosts(self) -> dict[str, tuple[CardModel, ...]]:
        """The cards the table was built over, by host."""
        return self._hosts

    @property
    def slots(self) -> dict[CardKey, CardModel]:
        """Those cards by (host, index)."""
        return self._slots

    def entry(self, name: str, host: str, index: int) -> PairEntry | None:
        """(need, gate bound) when `name` could go on card `index` of `host` alone, else None."""
        key = (name, host, index)
        try:
            return self._memo[key]
        except KeyError:
            pass
        found = self._compute(name, host, index)
        self._memo[key] = found
        return found

    def _seat_facts(self, name: str) -> _SeatFacts | None:
        facts = self._facts.get(name)
        if facts is None:
            seat = self._by_name.get(name)
            if seat is None:
                return None
            rule = gate_rule(seat.engine, propose=True)
            facts = _SeatFacts(
                seat, name, seat.host, seat.card_count, seat.pinned_cards, seat.exclusive, rule
            )
            self._facts[name] = facts
        return facts

    def _compute(self, name: str, host: str, index: int) -> PairEntry | None:
        facts = self._facts.get(name) or self._seat_facts(name)
        card = (host, index)
        slot = self._slots.get(card)
        if facts is None or slot is None or not slot.ok:
            return None
        if facts.host is not None and facts.host != host:
            return None
        if self._ok_count[host] < facts.card_count:
            return None
        if facts.pinned is not None and index not in facts.pinned:
            return None
        sized = self._sized_need(facts, slot)
        room = self._rooms.get(card)
        if room is None:
            room = self._rooms[card] = slot.loosest(self._residents)
        return _fit_pair(facts, sized, slot, room, self._residents)

    def _sized_need(self, facts: _SeatFacts, slot: CardModel) -> _SizedNeed:
        """The seat's need and request on cards like `slot`.

        The loosest util the seat may start with on this card: a multi-card seat's util covers
        its chosen cards, at least this card's (mixed card sizes on a host). Cached per card
        size and context: a fleet has few card sizes.
        """
        sized_key = (facts.name, slot.cuda_total, slot.cuda_context_bytes)
        sized = self._sized.get(sized_key)
        if sized is None:
            util = start_util(facts.seat, facts.rule, [slot.cuda_total], slot.cuda_context_bytes)
            sized = self._sized[sized_key] = sized_need(facts.seat, facts.rule, util, slot)
        return sized

    def sized(self, name: str, slot: CardModel) -> tuple[int, int | None] | None:
        """(need, gate request or None) of `name` on cards like `slot`, as every pair of it on
        such a card starts from (`pair_bound` then nets its own bytes); None: no such seat."""
        facts = self._facts.get(name) or self._seat_facts(name)
        if facts is None:
            return None
        sized = self._sized_need(facts, slot)
        return sized.need_bytes, sized.requested_bytes

    def least_width(self, name: str) -> int:
        """A width (free − absent − margin + own − load) every card must keep to take `name`.

        Its resident; for a seat whose gate requests bytes, also requested + cuda_context −
        margin − absent on the loosest card of each size (the gate, load ≤ free − context −
        requested, rewritten in width). Placers start their scans there: no card narrower
        takes the seat, so skipping them changes no answer.
        """
        found = self._least_width.get(name)
        if found is not None:
            return found
        facts = self._facts.get(name) or self._seat_facts(name)
        if facts is None:
            return 0
        least = facts.seat.resident_bytes
        gated: list[int] = []
        for slot, offset in self._size_classes.values():
            requested = self._sized_need(facts, slot).requested_bytes
            if requested is None:
                gated = []
                break
            gated.append(requested + offset)
        if gated:
            least = max(least, min(gated))
        self._least_width[name] = least
        return least

    @cached_property
    def _size_classes(self) -> dict[tuple[int, int], tuple[CardModel, int]]:
        """Per (CUDA total, context): one card of that size, and the least context − margin − absent."""
        out: dict[tuple[int, int], tuple[CardModel, int]] = {}
        slots = list(self._slots.values())
        for slot, (ok, total, context, margin, absent) in zip(
            slots, map(_SIZE_FIGURES, slots), strict=True
        ):
            if not ok:
                continue
            key = (total, context)
            offset = context - margin - absent
            found = out.get(key)
            if found is None or offset < found[1]:
                out[key] = (slot, offset)
        return out

    def size_slots(self) -> list[CardModel]:
        """One readable card of each (CUDA total, context) the fleet has, in the order first met:
        what depends on a card's size alone is asked of these."""
        return [slot for slot, _ in self._size_classes.values()]

    def gate_slack(self, name: str, slot: CardModel) -> int | None:
        """need − requested of `name` on cards like `slot`; None when its gate requests nothing.

        Where the seat is, the card's load (its need included) stays within
        free − cuda_context + need − requested: the gate as if started last.
        """
        facts = self._facts.get(name) or self._seat_facts(name)
        if facts is None:
            return None
        sized = self._sized_need(facts, slot)
        if sized.requested_bytes is None:
            return None
        return sized.need_bytes - sized.requested_bytes

    def _keys(self) -> Iterator[PairKey]:
        """Every (seat, host, card) that could be eligible, in the model's order."""
        for new in self._seats:
            for host, slots in self._hosts.items():
                for slot in slots:
                    yield (new.name, host, slot.index)

    def _every(self) -> dict[PairKey, int]:
        if self._all is None:
            table: dict[PairKey, int] = {}
            for key in self._keys():
                found = self.entry(*key)
                if found is not None:
                    table[key] = found[0]
            self._all = table
        return self._all

    @property
    def worked_out(self) -> int:
        """How many pairs have been worked out so far (eligible or not)."""
        return len(self._memo)

    def exceeds(self, limit: int) -> bool:
        """More than `limit` eligible pairs (stops counting once there are)."""
        if self._all is not None:
            return len(self._all) > limit
        count = 0
        for key in self._keys():
            if self.entry(*key) is not None:
                count += 1
                if count > limit:
                    return True
        return False

    def __getitem__(self, key: PairKey) -> int:
        found = self.entry(*key) if len(key) == 3 else None
        if found is None:
            raise KeyError(key)
        return found[0]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 3:
            return False
        return self.entry(*key) is not None

    def __iter__(self) -> Iterator[PairKey]:
        return iter(self._every())

    def __len__(self) -> int:
        return len(self._every())

    def __repr__(self) -> str:
        return f"PairTable({len(self._seats)} seats, {len(self._slots)} cards)"


class _GateBounds(Mapping[PairKey, int]):
    """gate_bound[(seat, host, card)]: the pairs whose gate is not already implied by room."""

    def __init__(self, table: PairTable) -> None:
        self._table = table

    def __getitem__(self, key: PairKey) -> int:
        found = self._table.entry(*key) if len(key) == 3 else None
        if found is None or found[1] is None:
            raise KeyError(key)
        return found[1]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 3:
            return False
        found = self._table.entry(*key)
        return found is not None and found[1] is not None

    def __iter__(self) -> Iterator[PairKey]:
        return iter([key for key in self._table if key in self])

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _pair(
    seat: Seat,
    rule: GateRule,
    util: Decimal | None,
    slot: CardModel,
    new_residents: dict[str, int],
) -> tuple[int, int | None] | None:
    """(need, gate bound) when the seat could go on the card alone, else None (pruned).

    The pair as `PairTable` works it out, with nothing cached (the reference its caches keep).
    """
    facts = _SeatFacts(
        seat, seat.name, seat.host, seat.card_count, seat.pinned_cards, seat.exclusive, rule
    )
    sized = sized_need(seat, rule, util, slot)
    return _fit_pair(facts, sized, slot, slot.loosest(new_residents), new_residents)


def _fit_pair(
    seat: _SeatFacts,
    sized: _SizedNeed,
    slot: CardModel,
    room: LoosestRoom,
    new_residents: Mapping[str, int],
) -> tuple[int, int | None] | None:
    """(need, gate bound) when the seat could go on the card alone, else None (pruned): the
    card's model answers (`CardModel.pair_bound`), with the seat's loosest util."""
    return slot.pair_bound(
        seat.name,
        exclusive=seat.exclusive,
        need_bytes=sized.need_bytes,
        requested_bytes=sized.requested_bytes,
        loosest=room,
        new_residents=new_residents,
    )
