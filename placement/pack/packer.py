"""`gpuplan pack`: the fewest cards of one size that hold every non-retired seat of a catalogue.

Bounds and first-fit-decreasing first; the arc-flow integer program only when they differ
(DESIGN.md, `pack`). Reserves and gates play no part: it answers "how many cards to buy".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from placement.fit.engines import (
    need_bytes,
    requests_util,
    unbounded_as_declared,
    util_decimal,
)
from placement.fit.engines.note import Said, fact_json
from placement.fit.kv import need_floored, seat_cuda_context
from placement.pack.bounds import l2_bound
from placement.pack.greedy import first_fit_decreasing, is_valid_packing
from seats.errors import Exit, GpuplanError
from seats.model import Catalogue, Seat
from seats.units import format_bytes

DEFAULT_TIME_LIMIT = 60.0


class SeatTooLargeError(GpuplanError):
    """A seat needs more than one card's room: no number of cards holds it (exit 1)."""

    exit_code = Exit.REFUSED


@dataclass(frozen=True)
class PackItem:
    """One card's worth of one seat: a multi-card seat gives one item per card."""

    seat: str
    need_bytes: int
    whole_card: bool  # exclusive or unbounded: a card of its own
    why_whole: str | None = None


@dataclass(frozen=True)
class PackCard:
    """One card of the answer and the seats on it."""

    card: int
    seats: tuple[str, ...]
    used_bytes: int
    free_bytes: int  # room − used
    whole: str | None = None  # "exclusive" or "unbounded" when one seat owns it


@dataclass(frozen=True)
class PackResult:
    """The packing, its proven lower bound, and how it was reached."""

    card_bytes: int
    margin_bytes: int
    cards: tuple[PackCard, ...]
    lower_bound: int
    optimal: bool
    method: str  # "first-fit-decreasing", "arc-flow" or "assignment"
    solver: str | None  # None when no integer program ran
    status: str  # "bound met", "optimal", "time limit" …
    greedy_cards: int
    seconds: float
    seats: int
    notes: tuple[Said, ...] = ()

    @property
    def room_bytes(self) -> int:
        """What seats share on one card: the card less the margin."""
        return self.card_bytes - self.margin_bytes

    @property
    def cards_needed(self) -> int:
        """How many cards the answer uses."""
        return len(self.cards)

    def to_json(self) -> dict[str, Any]:
        """DESIGN.md's `pack` shape, plus the figures the table shows."""
        return {
            "schema": 1,
            "cards_needed": self.cards_needed,
            "lower_bound": self.lower_bound,
            "optimal": self.optimal,
            "card_bytes": self.card_bytes,
            "margin_bytes": self.margin_bytes,
            "room_bytes": self.room_bytes,
            "seats": self.seats,
            "method": self.method,
            "solver": self.solver,
            "status": self.status,
            "greedy_cards": self.greedy_cards,
            "seconds": round(self.seconds, 4),
            "notes": [fact_json(n) for n in self.notes],
            "cards": [{**asdict(c), "seats": list(c.seats)} for c in self.cards],
        }


def pack_margin(catalogue: Catalogue) -> int:
    """The margin kept on every card: the catalogue's largest."""
    return max((host.margin_bytes for host in catalogue.hosts.values()), default=0)


def seat_items(catalogue: Catalogue, seat: Seat, card_bytes: int) -> list[PackItem]:
    """The per-card items of one seat, each with its need on a card of `card_bytes`.

    The need is the resident, or for a vLLM seat that declares a util and no kv_cache_memory,
    the larger of it and ceil(util × card) + cuda_context (its KV cache grows to its request).
    A seat without a declared util is sized by its resident: `plan` proposes the util that
    covers it. Unbounded seats (`unbounded_as_declared`: vLLM ≥ 0.34 with neither util nor
    kv_cache_memory, or an unpinned share-of-free engine such as SGLang) and exclusive seats take
    a card each: `plan` and `check` refuse either beside anything.
    """
    context = seat_cuda_context(catalogue, seat)
    seat, _ = need_floored(seat, context)
    engine = seat.engine
    util = (
        util_decimal(engine.gpu_memory_utilization)
        if requests_util(engine) and engine.gpu_memory_utilization is not None
        else None
    )
    need = need_bytes(seat.resident_bytes, engine.kv_cache_bytes, util, card_bytes, context)
    why = "exclusive" if seat.exclusive else "unbounded" if unbounded_as_declared(engine) else None
    return [PackItem(seat.name, need, why is not None, why) for _ in range(seat.card_count)]


def pack_seats(
    catalogue: Catalogue,
    card_bytes: int,
    *,
    solver: str = "highs",
    time_limit: float = DEFAULT_TIME_LIMIT,
) -> PackResult:
    """Pack every non-retired seat of `catalogue` onto the fewest cards of `card_bytes`."""
    seats = [seat for seat in catalogue.seats if seat.state != "retired"]
    margin = pack_margin(catalogue)
    # Each seat raised to its need floor once: its items are sized on it, its warning is a note.
    floored = [need_floored(seat, seat_cuda_context(catalogue, seat)) for seat in seats]
    items = [item for seat, _ in floored for item in seat_items(catalogue, seat, card_bytes)]
    result = pack_items(
        items, card_bytes, margin, solver=solver, time_limit=time_limit, seats=len(seats)
    )
    floors = [warning for _, warning in floored if warning]
    return replace(result, notes=(*floors, *result.notes)) if floors else result


def pack_items(
    items: Sequence[PackItem],
    card_bytes: int,
    margin_bytes: int,
    *,
    solver: str = "highs",
    time_limit: float = DEFAULT_TIME_LIMIT,
    seats: int | None = None,
) -> PackResult:
    """Pack per-card items onto the fewest cards; see `pack_seats`.

    Whole-card items take a card each; the rest are packed by first-fit-decreasing, and by
    the integer program only when that count exceeds the L2 bound.
    """
    started = time.perf_counter()
    room = card_bytes - margin_bytes
    _refuse_too_large(items, card_bytes, margin_bytes)
    whole = [item for item in items if item.whole_card]
    shared = [item for item in items if not item.whole_card]
    sizes = [item.need_bytes for item in shared]
    groups = [item.seat for item in shared]
    greedy = first_fit_decreasing(sizes, room, groups=groups)
    # L2 ignores that parts of one seat need different cards: it bounds a relaxation of the
    # problem, so it is still a proven bound.
    bound = l2_bound(sizes, room) if sizes else 0
    answer = _Answer(greedy, bound, len(greedy) == bound, "first-fit-decreasing", None, "bound met")
    if not answer.proven:
        answer = _solved(answer, sizes, room, groups, solver, time_limit)
    return PackResult(
        card_bytes=card_bytes,
        margin_bytes=margin_bytes,
        cards=_cards(whole, shared, answer.bins, room),
        lower_bound=len(whole) + answer.bound,
        optimal=answer.proven,
        method=answer.method,
        solver=answer.solver,
        status=answer.status,
        greedy_cards=len(whole) + len(greedy),
        seconds=time.perf_counter() - started,
        seats=seats if seats is not None else len({item.seat for item in items}),
        notes=answer.notes,
    )


def _refuse_too_large(items: Sequence[PackItem], card_bytes: int, margin_bytes: int) -> None:
    """SeatTooLargeError naming every seat whose need passes one card's room."""
    room = card_bytes - margin_bytes
    too_large = [item for item in items if item.need_bytes > room]
    if not too_large:
        return
    named = sorted({(i.seat, i.need_bytes) for i in too_large})
    raise SeatTooLargeError(
        "no number of cards holds "
        + "; ".join(
            f"{seat}: needs {format_bytes(need)} ({need} B) on a card, a card has room for "
            f"{format_bytes(room)} ({card_bytes} B less {format_bytes(margin_bytes)} margin), "
            f"{format_bytes(need - room)} short"
            for seat, need in named
        )
    )


@dataclass(frozen=True)
class _Answer:
    """The shared items' packing so far: bins of item indices, the bound, and how it was reached."""

    bins: Sequence[Sequence[int]]
    bound: int
    proven: bool
    method: str
    solver: str | None
    status: str
    notes: tuple[str, ...] = ()


def _solved(
    greedy: _Answer,
    sizes: list[int],
    room: int,
    groups: list[str],
    solver: str,
    time_limit: float,
) -> _Answer:
    """The integer program's answer where it is valid and no worse; else the greedy one, said so."""
    from placement.pack.models import solve_bin_packing

    solution = solve_bin_packing(
        sizes,
        room,
        groups=groups,
        solver=solver,
        time_limit=time_limit,
        lower_bound=greedy.bound,
        upper_bound=len(greedy.bins),
        start=greedy.bins,
    )
    if solution is None:
        note = (
            f"the solver found no packing within {time_limit:g} s (or the model was too large "
            "to start): first-fit-decreasing's answer is shown, not proven optimal"
        )
        return replace(greedy, solver=solver, status="time limit, no solution", notes=(note,))
    if not is_valid_packing(solution.bins, sizes, room, groups):
        # The verifier decides, not the solver: an invalid answer is never shown.
        note = f"the {solver} answer failed re-verification; first-fit-decreasing shown"
        return replace(greedy, solver=solver, status="solver answer invalid", notes=(note,))
    notes = [solution.note] if solution.note else []
    bins, method = greedy.bins, greedy.method
    if len(solution.bins) <= len(greedy.bins):
        bins, method = solution.bins, solution.model
    proven = solution.proven or len(bins) == greedy.bound
    status = "bound met" if proven and not solution.proven else solution.status
    bound = max(greedy.bound, solution.lower_bound)
    if not proven:
        notes.append(
            f"time limit of {time_limit:g} s reached: best answer found is shown; "
            f"between {bound} and {len(bins)} cards"
        )
    return _Answer(bins, bound, proven, method, solver, status, tuple(notes))


def _cards(
    whole: list[PackItem], shared: list[PackItem], bins: Sequence[Sequence[int]], room: int
) -> tuple[PackCard, ...]:
    """Whole-card items first (largest first), then the bins, fullest first."""
    cards: list[PackCard] = []
    for item in sorted(whole, key=lambda i: (-i.need_bytes, i.seat)):
        cards.append(
            PackCard(
                len(cards), (item.seat,), item.need_bytes, room - item.need_bytes, item.why_whole
            )
        )
    sizes = [item.need_bytes for item in shared]
    ordered = sorted(bins, key=lambda b: -sum(sizes[i] for i in b))
    for members in ordered:
        load = sum(sizes[i] for i in members)
        names = tuple(
            shared[i].seat for i in sorted(members, key=lambda i: (-sizes[i], shared[i].seat))
        )
        cards.append(PackCard(len(cards), names, load, room - load))
    return tuple(cards)
