"""The one model of a card: what every seat meets there, and copies with seats placed or taken off.

Built once per card from the catalogue and an attributed snapshot card (with the ledger's holds
attached), as kube-scheduler's NodeInfo is built once per node. Everything that asks what a card
offers reads it: the verifier's per-seat `CardState` (`placement.fit.state`), the planner's
pruning, greedy placers, integer-program rows, bound and moves, the ledger view and the report.
In exact integer bytes, for a seat s and the new seats P placed on the card (DESIGN.md "What fits
means"):

    held(s, P)     = Σ_{r on c, s ∉ for(r)} max(0, reserve_bytes(r) − Σ_{u ∈ for(r), u ≠ s, u running or in P} resident_u)
                   + Σ_{a absent running seat on c, a ≠ s} resident_a
                   + Σ_{h active hold on c, seat(h) ≠ s, seat(h) ∉ P} held_h
    room(s, P)     = free − held(s, P) − margin − Σ_{p ∈ P} need_p
    gate_free(s,P) = free − cuda_context − Σ_{p ∈ P} need_p − Σ_{h ∉ {s} ∪ P} held_h
    hold_free(h)   = free + seen_h − cuda_context − Σ_{p ∈ P} need_p − Σ_{h' ≠ h, h' ∉ {s} ∪ P} held_h'
                     (h's own gate, judged again with s placed: h passes iff hold_free(h) − need_s ≥ requested_h)
    held_h         = max(0, need_h − seen_h)   seen_h: what seat(h)'s processes hold on c now

An active hold is an approved new seat that has not started: it counts in room and in every gate,
and its own gate request is judged beside each later seat (rule `hold`). A redeploy's hold
replaces the bytes its seat's processes hold on the card, never adds to them: those bytes are in
`free` already, so the hold counts only what the approved seat takes beyond them (`held_h`), and
its own gate reads them freed (the old process stops before the new one starts). An absent
running seat with a hold on the card keeps its place at max(resident, need), not their sum.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from functools import cached_property

from inventory.holds import Hold
from inventory.snapshot import Card, Snapshot
from placement.fit.engines import passes_gate
from placement.fit.room import (
    engine_free_bytes,
    exclusive_binds,
    fits_room,
    reserve_left_bytes,
    room_bytes,
)
from seats.model import Catalogue, Host, Reserve, Seat

CardKey = tuple[str, int]


def cuda_total(card: Card) -> int:
    """What a CUDA process on `card` calls total (docs/facts.md §1); 0 for a card in error."""
    return card.cuda_total_bytes or 0


def fixed_reserve_bytes(reserve: Reserve) -> int | None:
    """A reserve's amount in bytes; None for `bytes: card`, whose bytes depend on the card read."""
    return None if reserve.amount_bytes == "card" else int(reserve.amount_bytes)


def reserve_bytes(reserve: Reserve, card: Card) -> int:
    """Bytes a reserve holds on its card; `card` means the whole CUDA total."""
    fixed = fixed_reserve_bytes(reserve)
    return cuda_total(card) if fixed is None else fixed


@dataclass(frozen=True)
class ReserveShare:
    """A reserve on one card: what it holds, for whom, and what its running seats already use."""

    name: str
    reserve_bytes: int
    for_: frozenset[str]
    running_own_bytes: int  # Σ residents of its own seats declared running on the card
    residents: Mapping[str, int] = field(default_factory=dict, compare=False)  # of its for: seats

    @property
    def idle_bytes(self) -> int:
        """What the reserve holds with none of its own seats placed anew: reserve − running own."""
        return reserve_left_bytes(
            reserve_bytes=self.reserve_bytes, own_bytes=self.running_own_bytes
        )


@dataclass(frozen=True)
class HeldPart:
    """One contribution to `held`: a reserve's unconsumed bytes, an absent seat's resident, or a hold."""

    kind: str  # "reserve", "absent" or "hold"
    name: str
    bytes: int
    note: str = ""  # a hold's approval: who, when, until when
    # A reserve some of whose own seats run or are placed on the card: what is left of it is
    # theirs (counted in held), but it does not stand between another seat and the card, its
    # seats do; and a seat is never told its own reserve blocks it.
    in_use: bool = False
    requested_bytes: int = 0  # a hold's own gate request (0: none)
    # A hold's seat already runs here (a redeploy): what its processes hold, which the hold
    # replaces. `bytes` is then the approved need beyond them; its own gate reads them freed.
    seen_bytes: int = 0
    need_bytes: int = 0  # a hold's approved need on the card (its `bytes` before `seen_bytes`)


@dataclass(frozen=True)
class LoosestRoom:
    """One card's room and gate free for a seat that nothing on the card names (most seats)."""

    room_bytes: int  # free − held (every reserve, less its own new seats placed here) − margin
    gate_free_bytes: int  # free − cuda_context − active holds
    named: frozenset[str]  # seats a reserve or a hold here is for: they meet less held
    hold_cap_bytes: int | None  # the most new load that keeps every hold's own gate


# CardModel's worked-out figures that no placed seat changes: a copy keeps them.
_UNPLACED = ("absent_bytes", "hold_bytes", "open_bytes", "widest_bytes", "occupants")


@dataclass(frozen=True)
class CardModel:
    """One card of one host as every consumer sees it (exact bytes); 0 figures for a card in error."""

    host: str
    index: int
    ok: bool
    free_bytes: int
    cuda_total: int
    margin_bytes: int
    cuda_context_bytes: int
    reserves: tuple[ReserveShare, ...] = ()
    absent: tuple[tuple[str, int], ...] = ()  # running seats with a match and no process here
    holds: tuple[Hold, ...] = ()  # active approvals of new seats on this card
    declared: tuple[str, ...] = ()  # running seats the catalogue pins here
    declared_exclusive: tuple[str, ...] = ()
    # Who else is on it: declared seats, then each process's seat or "pid N".
    processes: tuple[tuple[str | None, int], ...] = ()  # (seat, pid) of every process
    # Bytes the processes of each seat hold on it: a redeploy frees its own first.
    own_bytes: Mapping[str, int] = field(default_factory=dict, compare=False)
    # Bytes the processes of every seat hold on it, declared seats included: a redeploy's hold
    # replaces them (DESIGN.md "Holds": a redeploy's hold never counts on top of them).
    seen_bytes: Mapping[str, int] = field(default_factory=dict, compare=False)
    anonymous_bytes: int = 0  # what the processes no seat is attributed to hold on it
    # New seats placed on this copy (name → need): every figure below meets them as load.
    placed: Mapping[str, int] = field(default_factory=dict, compare=False)
    placed_bytes: int = 0  # Σ of `placed`
    # Their declared residents (name → bytes): what a reserve's own seats consume of it.
    placed_residents: Mapping[str, int] = field(default_factory=dict, compare=False)
    placed_exclusive: frozenset[str] = frozenset()
    # The smallest gate bound of the seats placed (the most load each one's gate allows).
    gate_floor_bytes: int | None = None

    @property
    def key(self) -> CardKey:
        """(host, index)."""
        return (self.host, self.index)

    # --- copies (kube-scheduler's AddPod / RemovePod) -------------------------------------

    def with_seat(
        self,
        name: str,
        need_bytes: int,
        *,
        resident_bytes: int | None = None,
        exclusive: bool = False,
        gate_bound_bytes: int | None = None,
        running: bool = False,
    ) -> CardModel:
        """A copy with seat `name` placed on it, taking `need_bytes` (its hold, if any, is it).

        A new seat (the default) is load: with P' = P ∪ {name},

            placed_bytes' = placed_bytes − placed[name] + need     (placing a name again replaces it)
            room(s, P')   = room(s, P) − need                      (and its reserve share, below)
            gate_free'    = gate_free − need,  hold_free'(h) = hold_free(h) − need
            gate_floor'   = min(gate_floor, gate_bound_bytes)

        and it consumes `resident_bytes` (default: its need) of a reserve it is for. Nothing that
        does not depend on the placed seats is worked out again: the copy shares this model's
        figures and costs one small dict copy per placed seat, so a placer may call it per step.

        `running=True`: the seat has started here (a move done, a moment replayed): its bytes
        leave free and it counts as a running seat the catalogue pins here, as a snapshot taken
        after it started shows it: free' = free − need, seen'[name] = seen[name] + need, and its
        catalogue resident (not `resident_bytes`) consumes a reserve it is for, as a running
        seat's does.
        """
        if running:
            return self._started(name, need_bytes, exclusive)
        floor = self.gate_floor_bytes
        if gate_bound_bytes is not None:
            floor = gate_bound_bytes if floor is None else min(floor, gate_bound_bytes)
        # A frozen copy without dataclasses.replace: __init__ and its checks are not run again,
        # and the worked-out figures no placed seat changes (_UNPLACED) come along.
        copy = object.__new__(CardModel)
        fields = copy.__dict__
        fields.update(self.__dict__)
        fields["placed"] = {**self.placed, name: need_bytes}
        fields["placed_bytes"] = self.placed_bytes - self.placed.get(name, 0) + need_bytes
        fields["placed_residents"] = {
            **self.placed_residents,
            name: need_bytes if resident_bytes is None else resident_bytes,
        }
        if exclusive:
            fields["placed_exclusive"] = self.placed_exclusive | {name}
        fields["gate_floor_bytes"] = floor
        return copy

    def _started(self, name: str, bytes_: int, exclusive: bool) -> CardModel:
        """`with_seat(..., running=True)`: `name` runs here, holding `bytes_`."""
        return replace(
            self,
            free_bytes=self.free_bytes - bytes_,
            seen_bytes={**self.seen_bytes, name: self.seen_bytes.get(name, 0) + bytes_},
            declared=(*self.declared, name),
            declared_exclusive=(*self.declared_exclusive, name)
            if exclusive
            else self.declared_exclusive,
            reserves=tuple(
                replace(r, running_own_bytes=r.running_own_bytes + r.residents.get(name, 0))
                if name in r.for_
                else r
                for r in self.reserves
            ),
        )

    def without_seat(self, name: str) -> CardModel:
        """A copy with seat `name` taken off the card, wholly:

            free'    = free + seen[name]          (its processes' bytes, running or redeployed)
            placed'  = placed − {name},  placed_bytes' = placed_bytes − placed[name]
            held'    : its absent place, its holds and its share of a reserve it is for go
                       (a reserve it is for holds again what it no longer consumes)

        and it is no longer among the card's running, declared or exclusive seats.
        """
        freed = self.seen_bytes.get(name, 0)
        declared = name in self.declared
        placed = {k: v for k, v in self.placed.items() if k != name}
        return replace(
            self,
            free_bytes=self.free_bytes + freed,
            own_bytes={k: v for k, v in self.own_bytes.items() if k != name},
            seen_bytes={k: v for k, v in self.seen_bytes.items() if k != name},
            processes=tuple(p for p in self.processes if p[0] != name),
            holds=tuple(h for h in self.holds if h.seat != name),
            absent=tuple(a for a in self.absent if a[0] != name),
            declared=tuple(n for n in self.declared if n != name),
            declared_exclusive=tuple(n for n in self.declared_exclusive if n != name),
            reserves=tuple(
                replace(r, running_own_bytes=r.running_own_bytes - r.residents.get(name, 0))
                if declared and name in r.for_
                else r
                for r in self.reserves
            ),
            placed=placed,
            placed_bytes=sum(placed.values()),
            placed_residents={k: v for k, v in self.placed_residents.items() if k != name},
            placed_exclusive=self.placed_exclusive - {name},
        )

    # --- what is held, and against whom ---------------------------------------------------

    def held_parts(
        self, seat: str | None = None, placed: Mapping[str, int] | None = None
    ) -> list[HeldPart]:
        """What is held here against `seat` (None: against any seat), part by part.

        `placed`: new seats put on the card, name → declared resident (a reserve's own among
        them consume it; their holds are those seats, not counted twice). Defaults to this
        copy's placed seats.
        """
        here = self.placed_residents if placed is None else placed
        parts: list[HeldPart] = []
        declared = set(self.declared)
        for reserve in self.reserves:
            if seat is not None and seat in reserve.for_:
                continue
            own_names = [n for n in reserve.for_ if n != seat and (n in declared or n in here)]
            own = sum(reserve.residents.get(n, here.get(n, 0)) for n in own_names)
            left = reserve_left_bytes(reserve_bytes=reserve.reserve_bytes, own_bytes=own)
            if left:
                parts.append(HeldPart("reserve", reserve.name, left, in_use=bool(own_names)))
        for name, resident in self.absent:
            if name != seat and self.absent_part_bytes(name, resident):
                parts.append(HeldPart("absent", name, self.absent_part_bytes(name, resident)))
        for hold in self.counted_holds(seat, here):
            parts.append(
                HeldPart(
                    "hold",
                    hold.seat,
                    self.hold_part_bytes(hold),
                    hold.note(),
                    requested_bytes=hold.requested_bytes,
                    seen_bytes=self.seen_bytes.get(hold.seat, 0),
                    need_bytes=hold.need_bytes,
                )
            )
        return parts

    def hold_part_bytes(self, hold: Hold) -> int:
        """What `hold` counts here: its need beyond what its seat's processes hold now (a
        redeploy's hold replaces them, never adds to them)."""
        return max(0, hold.need_bytes - self.seen_bytes.get(hold.seat, 0))

    def absent_part_bytes(self, name: str, resident_bytes: int) -> int:
        """What absent seat `name` keeps here: its resident, less a hold of its own that counts
        its approved restart (together max(resident, need), never their sum)."""
        held = max((h.need_bytes for h in self.holds if h.seat == name), default=0)
        return max(0, resident_bytes - held)

    def counted_holds(self, seat: str | None, placed: Collection[str] = ()) -> list[Hold]:
        """Active holds that stand as other new seats for `seat`: not its own, not a placed seat's."""
        return [h for h in self.holds if h.seat != seat and h.seat not in placed]

    def held_bytes(self, seat: str | None = None, placed: Mapping[str, int] | None = None) -> int:
        """Σ of `held_parts`: bytes on the card that `seat` may not plan into."""
        if not self.reserves and not self.absent and not self.holds:
            return 0
        return sum(part.bytes for part in self.held_parts(seat, placed))

    @cached_property
    def absent_bytes(self) -> int:
        """Σ residents of the running seats that are down here (they keep their place)."""
        if not self.absent:
            return 0
        return sum(self.absent_part_bytes(name, resident) for name, resident in self.absent)

    @cached_property
    def hold_bytes(self) -> int:
        """Σ of what the active holds here count, as any seat that holds none of them meets them."""
        if not self.holds:
            return 0
        return sum(self.hold_part_bytes(hold) for hold in self.holds)

    def hold_gates(self, seat: str | None = None) -> list[tuple[Hold, int]]:
        """Each gated hold that stands as another new seat for `seat`, and what its own gate reads
        with everything placed here, as if it started last:

            hold_free(h) = free + seen_h − cuda_context − placed_bytes − Σ_{h' ≠ h} held_h'
        """
        holds = self.counted_holds(seat, self.placed)
        if not holds:
            return []
        total = sum(self.hold_part_bytes(h) for h in holds)
        return [
            (
                h,
                engine_free_bytes(
                    free_bytes=self.free_bytes + self.seen_bytes.get(h.seat, 0),
                    cuda_context_bytes=self.cuda_context_bytes,
                    load_bytes=self.placed_bytes + total - self.hold_part_bytes(h),
                ),
            )
            for h in holds
            if h.requested_bytes
        ]

    def hold_cap_bytes(self, seat: str | None = None) -> int | None:
        """The most new load the card may take and keep every hold's own gate (None: no gated
        hold): min over gated holds h of hold_free(h) − requested_h."""
        return min((free - h.requested_bytes for h, free in self.hold_gates(seat)), default=None)

    def freeable_bytes(self, seat: str) -> int:
        """What the card's processes hold, `seat`'s own aside: all that freeing could give it.

        A reserve's own seats free nothing for a seat it is not for (the reserve keeps it).
        """
        kept = {n for r in self.reserves if seat not in r.for_ for n in r.for_}
        return self.anonymous_bytes + sum(
            used for n, used in self.seen_bytes.items() if n != seat and n not in kept
        )

    @property
    def plannable_bytes(self) -> int:
        """free − held − margin − what this copy places (may be negative)."""
        return self.room_for()

    @property
    def fixed_held_bytes(self) -> int:
        """absent + holds: what every seat meets held here, whatever is placed beside it."""
        return self.absent_bytes + self.hold_bytes

    @cached_property
    def open_bytes(self) -> int:
        """free − absent − holds − margin: no seat meets less held (may be negative)."""
        return room_bytes(
            free_bytes=self.free_bytes,
            held_bytes=self.fixed_held_bytes,
            margin_bytes=self.margin_bytes,
        )

    @cached_property
    def widest_bytes(self) -> int:
        """The most room any one seat may meet here with nothing new placed: its own freed."""
        # A seat meets its own processes, its own hold and its own absent place freed at once.
        if not self.holds:
            # No hold: a seat's own bytes are its processes' (one absent here runs nowhere here).
            return self.open_bytes + max(self.own_bytes.values(), default=0)
        absent = dict(self.absent)
        own = (
            self.own_bytes.get(name, 0)
            + sum(self.hold_part_bytes(h) for h in self.holds if h.seat == name)
            + self.absent_part_bytes(name, absent.get(name, 0))
            for name in set(self.own_bytes) | {h.seat for h in self.holds}
        )
        return self.open_bytes + max(own, default=0)

    def gate_free_bytes(self, seat: str | None = None) -> int:
        """free − cuda_context − what this copy places − Σ holds not `seat`'s: what a gate reads."""
        holds = (
            sum(self.hold_part_bytes(h) for h in self.counted_holds(seat, self.placed))
            if self.holds
            else 0
        )
        return engine_free_bytes(
            free_bytes=self.free_bytes,
            cuda_context_bytes=self.cuda_context_bytes,
            load_bytes=self.placed_bytes + holds,
        )

    def room_for(self, seat: str | None = None) -> int:
        """free − held(seat, placed) − margin − placed: the room `seat` meets beside what this
        copy places (may be negative); its own processes count as they are."""
        if not self.reserves and not self.absent and not self.holds:
            # Nothing held here (most cards): held_bytes is 0 whoever asks.
            return room_bytes(
                free_bytes=self.free_bytes,
                held_bytes=0,
                margin_bytes=self.margin_bytes,
                load_bytes=self.placed_bytes,
            )
        return room_bytes(
            free_bytes=self.free_bytes,
            held_bytes=self.held_bytes(seat, self.placed_residents),
            margin_bytes=self.margin_bytes,
            load_bytes=self.placed_bytes,
        )

    @property
    def capacity_bytes(self) -> int:
        """free − margin: the room of a card nothing holds and nothing is placed on."""
        return room_bytes(free_bytes=self.free_bytes, held_bytes=0, margin_bytes=self.margin_bytes)

    @property
    def width_bytes(self) -> int:
        """`widest_bytes` less what this copy places: the most room any one seat meets now."""
        return self.widest_bytes - self.placed_bytes

    def open_after(self, *, freed_bytes: int = 0, placed_bytes: int = 0) -> int:
        """`open_bytes` once `freed_bytes` leave the card and `placed_bytes` arrive on it."""
        return self.open_bytes + freed_bytes - placed_bytes

    def may_take(self, need_bytes: int, *, freed_bytes: int = 0, placed_bytes: int = 0) -> bool:
        """A necessary condition in plain sums, reserves left out (a seat may be one they are
        for): `need_bytes` within the open room once `freed_bytes` leave and `placed_bytes` arrive."""
        return fits_room(
            need_bytes, self.open_after(freed_bytes=freed_bytes, placed_bytes=placed_bytes)
        )

    def gate_floor_excludes(self, resident_bytes: int) -> bool:
        """A cheap first test: a seat adding at least `resident_bytes` less its own bytes here
        would carry the load past the gate bound of a seat placed on this copy."""
        floor = self.gate_floor_bytes
        return floor is not None and (
            self.placed_bytes + resident_bytes - (self.widest_bytes - self.open_bytes) > floor
        )

    def exclusive_refuses(self, name: str, exclusive: bool) -> bool:
        """Rule `exclusive` between `name` and the seats placed on this copy."""
        if not self.placed or (not exclusive and not self.placed_exclusive):
            return False
        others = [n for n in self.placed if n != name]
        return bool(others) and exclusive_binds(
            exclusive=exclusive,
            occupied=True,
            exclusive_neighbour=any(n in self.placed_exclusive for n in others),
        )

    def left_after(self, name: str, need_bytes: int, gate_bound_bytes: int | None) -> int | None:
        """Room left on this copy once `name` is placed taking `need_bytes`; None where its room
        or a gate bound (its own, or a placed seat's) refuses it."""
        room = self.room_for(name)
        if not fits_room(need_bytes, room):
            return None
        after = self.placed_bytes + need_bytes
        floor = self.gate_floor_bytes
        if (floor is not None and after > floor) or (
            gate_bound_bytes is not None and after > gate_bound_bytes
        ):
            return None
        return room - need_bytes

    # --- pruning: the loosest a seat could meet here, alone -------------------------------

    def loosest(self, new_residents: Mapping[str, int]) -> LoosestRoom:
        """This card's room and gate free for a seat nothing here names (most seats), with every
        reserve's own new seats (`new_residents`) placed here too: the least held it could meet."""
        if not self.reserves and not self.holds:
            # Nothing here is for any seat (most cards): held is the absent seats' alone, so the
            # room is `open_bytes`, no hold caps the load, and no seat meets less held.
            loose = object.__new__(LoosestRoom)
            loose.__dict__.update(
                {
                    "room_bytes": self.open_bytes,
                    "gate_free_bytes": engine_free_bytes(
                        free_bytes=self.free_bytes,
                        cuda_context_bytes=self.cuda_context_bytes,
                        load_bytes=self.placed_bytes,
                    ),
                    "named": _NONE_EXCLUSIVE,
                    "hold_cap_bytes": None,
                }
            )
            return loose
        return LoosestRoom(
            room_bytes=room_bytes(
                free_bytes=self.free_bytes,
                held_bytes=self.held_bytes(None, new_residents),
                margin_bytes=self.margin_bytes,
            ),
            gate_free_bytes=self.gate_free_bytes(),
            named=frozenset(name for r in self.reserves for name in r.for_)
            | {hold.seat for hold in self.holds},
            hold_cap_bytes=self.hold_cap_bytes(),
        )

    def pair_bound(
        self,
        name: str,
        *,
        exclusive: bool,
        need_bytes: int,
        requested_bytes: int | None,
        loosest: LoosestRoom,
        new_residents: Mapping[str, int],
    ) -> tuple[int, int | None] | None:
        """(need net of its own bytes here, gate bound or None) when seat `name` could go on the
        card alone, else None (pruned).

        Looser than the verifier, never stricter: the least held it could meet (`loosest`),
        its own processes freed (a redeploy), the loosest util (`need_bytes`, `requested_bytes`:
        None when its gate requests nothing). The bound is the most load the card may carry
        (this seat's net need included) for every gate there, as if started last; None where
        the room already implies it.
        """
        if (exclusive or self.exclusive_running) and exclusive_binds(
            exclusive=exclusive,
            occupied=self.occupied_for(name),
            exclusive_neighbour=self.exclusive_running,
        ):
            return None
        own = self.own_bytes.get(name, 0) if self.own_bytes else 0
        room_left, gate_free, cap = (
            loosest.room_bytes,
            loosest.gate_free_bytes,
            loosest.hold_cap_bytes,
        )
        if own or name in loosest.named:
            # A redeploy frees its own processes; a reserve's (or a hold's) own seat meets less held.
            room_left = room_bytes(
                free_bytes=self.free_bytes + own,
                held_bytes=self.held_bytes(name, new_residents),
                margin_bytes=self.margin_bytes,
            )
            gate_free = self.gate_free_bytes(name) + own
            cap = self.hold_cap_bytes(name)
        if not fits_room(need_bytes, room_left):
            return None
        # Every gated hold here judged again, as if it started last: the card's new load (this
        # seat's net need included) ≤ free − ctx − the other holds − its request.
        if cap is not None and need_bytes - own > cap:
            return None  # alone, it would leave an approved seat's gate short
        bound = cap
        if requested_bytes is not None:
            if not passes_gate(gate_free, requested_bytes):
                return None  # fails its gate alone
            # The most load the card may carry (this seat's net need included) for its gate, as
            # if started last: others + need − own ≤ free − ctx − holds + need − requested.
            own_gate = gate_free - own + need_bytes - requested_bytes
            bound = own_gate if bound is None else min(bound, own_gate)
        # Where the room constraint already implies the gates, no bound is kept.
        return need_bytes - own, bound if bound is not None and bound < self.open_bytes else None

    @cached_property
    def occupants(self) -> frozenset[str]:
        """Declared seats and every process's seat or "pid N"."""
        return frozenset(self.declared) | {
            f"pid {pid}" if seat is None else seat for seat, pid in self.processes
        }

    @property
    def exclusive_running(self) -> bool:
        """A running exclusive seat is on it."""
        return bool(self.declared_exclusive)

    def occupied_for(self, name: str) -> bool:
        """Something other than seat `name` is on the card."""
        return bool(self.occupants - {name})


def card_model(catalogue: Catalogue, host: str, card: Card) -> CardModel:
    """`card` of `host` (attributed, holds attached) under `catalogue`: the one model of it."""
    if not card.ok:
        return CardModel(host, card.index, False, 0, 0, 0, 0)
    return _modelled(
        host,
        card,
        catalogue.hosts.get(host),
        catalogue.pinned_on(host, card.index),
        [r for r in catalogue.reserves if r.host == host and r.gpu == card.index],
        lambda name: resident_of(catalogue, name),
    )


def _modelled(
    host: str,
    card: Card,
    described: Host | None,
    declared: Sequence[Seat],
    card_reserves: Sequence[Reserve],
    resident: Callable[[str], int | None],
) -> CardModel:
    """The model of a readable card from what the catalogue says of it: its host's figures,
    the running seats pinned to it, its reserves (catalogue order each), and seats' residents."""
    declared_names = {seat.name for seat in declared}
    reserves: list[ReserveShare] = []
    for r in card_reserves:
        found = {n: resident(n) for n in r.for_}
        residents = {n: size for n, size in found.items() if size is not None}
        reserves.append(
            ReserveShare(
                r.name,
                reserve_bytes(r, card),
                frozenset(r.for_),
                sum(residents.get(n, 0) for n in r.for_ if n in declared_names),
                residents,
            )
        )
    own: dict[str, int] = {}
    seen: dict[str, int] = {}
    anonymous = 0
    processes: list[tuple[str | None, int]] = []
    for process in card.processes:
        seat = process.seat
        processes.append((seat, process.pid))
        if seat is None:
            anonymous += process.used_bytes or 0
            continue
        seen[seat] = seen.get(seat, 0) + (process.used_bytes or 0)
        # Seats declared here are running, never placed anew: only a new seat's own count.
        if seat not in declared_names:
            own[seat] = seen[seat]
    names: tuple[str, ...] = ()
    exclusive: tuple[str, ...] = ()
    absent: tuple[tuple[str, int], ...] = ()
    for running in declared:
        names += (running.name,)
        if running.exclusive:
            exclusive += (running.name,)
        if running.match is not None and running.name not in seen:
            absent += ((running.name, running.resident_bytes),)
    # A frozen dataclass built without its __init__ (one field at a time through
    # object.__setattr__, a fleet's largest cost here): every field, in its declared order.
    model = object.__new__(CardModel)
    fixed = model.__dict__
    fixed.update(
        {
            "host": host,
            "index": card.index,
            "ok": True,
            "free_bytes": card.free_bytes or 0,
            "cuda_total": cuda_total(card),
            "margin_bytes": described.margin_bytes if described is not None else 0,
            "cuda_context_bytes": described.cuda_context_bytes if described is not None else 0,
            "reserves": tuple(reserves) if reserves else (),
            "absent": absent,
            "holds": card.holds,
            "declared": names,
            "declared_exclusive": exclusive,
            "processes": tuple(processes),
            "own_bytes": own,
            "seen_bytes": seen,
            "anonymous_bytes": anonymous,
            "placed": {},
            "placed_bytes": 0,
            "placed_residents": {},
            "placed_exclusive": _NONE_EXCLUSIVE,
            "gate_floor_bytes": None,
        }
    )
    # The figures every placer and bound reads of every card, worked out now by their own
    # definitions (cached_property takes a lock per first read); `occupants` stays lazy.
    if absent or card.holds:
        for name, figure in _PREFILLED:
            fixed[name] = figure(model)
    else:
        # Nothing down and nothing held (most cards): their sums are empty.
        fixed["absent_bytes"] = fixed["hold_bytes"] = 0
        fixed["open_bytes"] = room_bytes(
            free_bytes=fixed["free_bytes"], held_bytes=0, margin_bytes=fixed["margin_bytes"]
        )
        fixed["widest_bytes"] = _WIDEST(model)
    return model


class FleetCards:
    """The models of a fleet's cards, built in one pass: the catalogue indexed once by card
    (running seats pinned there, reserves there, residents by name) instead of scanned per card.

    Each card's model is `card_model(catalogue, host, card)` to the field: both build it with
    `_modelled` from the same facts, which `card_model` looks up in the catalogue each time.
    """

    def __init__(self, catalogue: Catalogue) -> None:
        self.catalogue = catalogue
        # Catalogue.pinned_on's index: running seats by (host, card), catalogue order.
        pinned: dict[CardKey, list[Seat]] = {}
        residents: dict[str, int] = {}
        for seat in catalogue.seats:
            residents.setdefault(seat.name, seat.resident_bytes)
            if seat.state == "running" and seat.host is not None:
                for index in dict.fromkeys(seat.pinned_cards or ()):
                    pinned.setdefault((seat.host, index), []).append(seat)
        reserves: dict[CardKey, list[Reserve]] = {}
        for r in catalogue.reserves:
            reserves.setdefault((r.host, r.gpu), []).append(r)
        self._pinned = pinned
        self._reserves = reserves
        self._residents = residents

    def model(self, host: str, card: Card) -> CardModel:
        """`card_model(self.catalogue, host, card)`."""
        if not card.ok:
            return CardModel(host, card.index, False, 0, 0, 0, 0)
        key = (host, card.index)
        return _modelled(
            host,
            card,
            self.catalogue.hosts.get(host),
            self._pinned.get(key, ()),
            self._reserves.get(key, ()),
            self._residents.get,
        )

    def host(self, snapshot: Snapshot) -> tuple[CardModel, ...]:
        """The models of every card of `snapshot` (attributed, holds attached), in its order.

        A card with no reserve and no hold (most of a fleet) is built by `_plain`, the host's
        figures read once: the same fields and figures as `model` gives it.
        """
        host = snapshot.host
        described = self.catalogue.hosts.get(host)
        margin = described.margin_bytes if described is not None else 0
        context = described.cuda_context_bytes if described is not None else 0
        pinned, reserves = self._pinned, self._reserves
        out: list[CardModel] = []
        for card in snapshot.cards:
            key = (host, card.index)
            if card.error is not None or card.holds or key in reserves:
                out.append(self.model(host, card))
            else:
                out.append(_plain(host, card, margin, context, pinned.get(key, ())))
        return tuple(out)


def _plain(
    host: str, card: Card, margin_bytes: int, context_bytes: int, declared: Sequence[Seat]
) -> CardModel:
    """`_modelled` of a readable card with no reserve and no hold, in fewer steps: no reserve
    shares, and the worked-out figures by their definitions with those sums empty:

        absent_bytes = Σ residents of the absent seats     hold_bytes = 0
        open_bytes   = free − absent_bytes − margin        widest_bytes = open + max own
    """
    fields = _PLAIN.copy()  # every field and figure, in CardModel's order, then set
    own: dict[str, int] = {}
    seen: dict[str, int] = {}
    absent_bytes = 0
    if card.processes or declared:
        anonymous = 0
        processes: list[tuple[str | None, int]] = []
        occupants: set[str] = set()
        declared_names = {seat.name for seat in declared} if declared else ()
        for process in card.processes:
            seat, used = process.seat, process.used_bytes or 0
            processes.append((seat, process.pid))
            if seat is None:
                anonymous += used
                occupants.add(f"pid {process.pid}")
                continue
            occupants.add(seat)
            seen[seat] = seen.get(seat, 0) + used
            # Seats declared here are running, never placed anew: only a new seat's own count.
            if seat not in declared_names:
                own[seat] = seen[seat]
        if declared:
            names = tuple(running.name for running in declared)
            fields["declared"] = names
            fields["declared_exclusive"] = tuple(r.name for r in declared if r.exclusive)
            absent = tuple(
                (r.name, r.resident_bytes)
                for r in declared
                if r.match is not None and r.name not in seen
            )
            if absent:
                fields["absent"] = absent
                absent_bytes = fields["absent_bytes"] = sum(max(0, size) for _, size in absent)
            occupants.update(names)
        fields["processes"] = tuple(processes)
        fields["anonymous_bytes"] = anonymous
        fields["occupants"] = frozenset(occupants)
    free = card.free_bytes or 0
    open_bytes = room_bytes(free_bytes=free, held_bytes=absent_bytes, margin_bytes=margin_bytes)
    total = card.total_bytes
    fields["host"] = host
    fields["index"] = card.index
    fields["free_bytes"] = free
    fields["cuda_total"] = 0 if total is None else total - (card.reserved_bytes or 0)
    fields["margin_bytes"] = margin_bytes
    fields["cuda_context_bytes"] = context_bytes
    fields["own_bytes"] = own
    fields["seen_bytes"] = seen
    fields["placed"] = {}
    fields["placed_residents"] = {}
    fields["open_bytes"] = open_bytes
    fields["widest_bytes"] = open_bytes + max(own.values()) if own else open_bytes
    model = object.__new__(CardModel)
    object.__setattr__(model, "__dict__", fields)
    return model


_PREFILLED = tuple(
    (name, getattr(CardModel, name).func)
    for name in ("absent_bytes", "hold_bytes", "open_bytes", "widest_bytes")
)
_WIDEST = dict(_PREFILLED)["widest_bytes"]
_NONE_EXCLUSIVE: frozenset[str] = frozenset()  # no seat: shared by every model that names none
# A plain card's fields (`_plain`) before its own are set, in CardModel's order: nothing on it,
# nothing held; then its worked-out figures.
_PLAIN: dict[str, object] = {
    **{f.name: None if f.default is MISSING else f.default for f in fields(CardModel)},
    "ok": True,
    "placed_exclusive": _NONE_EXCLUSIVE,
    "absent_bytes": 0,
    "hold_bytes": 0,
    "open_bytes": 0,
    "widest_bytes": 0,
    "occupants": _NONE_EXCLUSIVE,
}


def resident_of(catalogue: Catalogue, name: str) -> int | None:
    """The declared resident of seat `name`; None when the catalogue has no such seat."""
    try:
        return catalogue.seat(name).resident_bytes
    except KeyError:
        return None
