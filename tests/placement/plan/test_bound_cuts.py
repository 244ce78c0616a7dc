"""The level bound's cuts: never below what any placement places (every placement of tiny fleets
tried), never above the plain bound (tests/placement/plan/bound_reference.py), and tighter where
a few seats have sizes off the others' grid."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest

from inventory.snapshot import Snapshot
from placement.fit.card import CardKey, CardModel
from placement.fit.verify import Placement, verify_placement
from placement.plan.bound import level_bounds
from placement.plan.greedy import greedy_assignment
from placement.plan.problem import NewSeat, Problem, build_problem, new_seats
from seats.model import Catalogue, Seat
from seats.units import GiB, MiB
from tests.placement.plan import bound_reference
from tests.placement.plan.test_bound import _gated
from tests.placement.plan.test_model import adds, make_fleet, seat

Where = tuple[str, tuple[int, ...]]
Family = Callable[[random.Random], tuple[Catalogue, list[Snapshot], list[Seat]]]


def _options(problem: Problem, new: NewSeat) -> list[Where]:
    """Every (host, cards) the seat could be put on, eligible pair by pair."""
    out: list[Where] = []
    count = new.seat.card_count
    for host, slots in problem.hosts.items():
        cards = [slot.index for slot in slots if problem.pair(new.name, host, slot.index)]
        if count == 1:
            out += [(host, (index,)) for index in cards]
        elif count == 2:
            out += [(host, (a, b)) for i, a in enumerate(cards) for b in cards[i + 1 :]]
    return out


def _shape(new: NewSeat) -> str:
    """Seats of one shape are interchangeable: the same need, gate and cards on every card."""
    return new.seat.model_dump_json(exclude={"name"})


def _most_by_level(problem: Problem) -> dict[str, Where]:
    """The best placement by strict priority (most of the top level, then the next …), every
    placement tried: seat by seat, left out or put on each of its options, each card's model
    taking it (`CardModel.with_seat`, the planner's one simulator) or refusing it. Of seats of
    one shape, only placements that give them options in ascending order are tried (any other
    is the same placement with the seats' names swapped)."""
    seats = sorted(problem.seats, key=lambda new: (-new.seat.priority, _shape(new), new.name))
    levels = sorted({new.seat.priority for new in seats}, reverse=True)
    options = [_options(problem, new) for new in seats]
    same = [i > 0 and _shape(seats[i - 1]) == _shape(new) for i, new in enumerate(seats)]
    best: list[tuple[tuple[int, ...], dict[str, Where]]] = [((-1,), {})]

    def walk(i: int, cards: dict[CardKey, CardModel], chosen: dict[str, Where], after: int) -> None:
        if i == len(seats):
            key = tuple(
                sum(1 for new in seats if new.seat.priority == p and new.name in chosen)
                for p in levels
            )
            if key > best[0][0]:
                best[0] = (key, dict(chosen))
            return
        new = seats[i]
        first = after if same[i] else 0
        for k in range(first, len(options[i])):
            host, indexes = options[i][k]
            placed = dict(cards)
            for index in indexes:
                found = problem.pair(new.name, host, index)
                assert found is not None
                need, gate = found
                model = placed[(host, index)]
                if model.left_after(new.name, need, gate) is None:
                    break
                placed[(host, index)] = model.with_seat(
                    new.name, need, resident_bytes=new.seat.resident_bytes, gate_bound_bytes=gate
                )
            else:
                chosen[new.name] = (host, indexes)
                walk(i + 1, placed, chosen, k)
                del chosen[new.name]
        # Left out: every later seat of its shape is left out too.
        walk(i + 1, cards, chosen, len(options[i]))

    walk(0, dict(problem.models), {}, 0)
    return best[0][1]


def _verified(
    catalogue: Catalogue, snapshots: Sequence[Snapshot], seats: list[Seat], where: dict[str, Where]
) -> None:
    """The oracle's placement passes the verifier, seat by seat."""
    placements = [Placement(s, *where[s.name]) for s in seats if s.name in where]
    assert all(v.passed for v in verify_placement(catalogue, snapshots, placements))


def test_a_few_seats_off_the_grid_do_not_open_every_card() -> None:
    # Four cards of 10.875 GiB (174 units of 64 MiB). Twenty-one seats of 2 GiB (32 units) and
    # one of 2 GiB + 192 MiB (35): as sums of 32 and 35, a card reaches 172 units (4 × 35 + 32),
    # so the plain bound counts 4 × 172 = 688 units, room for all twenty-one 2 GiB seats. But
    # only one card can hold the 35-unit seat; the others reach 160 (5 × 32): 3 × 160 + 172 =
    # 652 units, twenty 2 GiB seats, which is what five a card places.
    catalogue, snapshots = make_fleet({"h": [174 * 64 * MiB] * 4})
    seats = [seat(f"s{i:02d}", 2 * GiB) for i in range(21)] + [seat("odd", 35 * 64 * MiB)]
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
    assert [b.bound for b in bound_reference.level_bounds(problem, [])] == [21]
    assert [b.bound for b in level_bounds(problem, [])] == [20]
    assert len(greedy_assignment(problem)) == len(_most_by_level(problem)) == 20


def test_a_two_card_seat_off_the_grid_opens_two_cards() -> None:
    # The same cards; above the 2 GiB seats, one two-card seat of 35 units. The two cards it
    # takes hold 35 + 4 × 32 = 163 units, the others 5 × 32: eighteen 2 GiB seats at most. The
    # plain bound sees 4 × 172 − 70 = 618 units, nineteen; the cut lets two cards reach 172 and
    # the others 160: 2 × 172 + 2 × 160 − 70 = 594 units, eighteen.
    catalogue, snapshots = make_fleet({"h": [174 * 64 * MiB] * 4})
    seats = [seat(f"s{i:02d}", 2 * GiB) for i in range(21)]
    seats.append(seat("odd", 35 * 64 * MiB, gpus=2, priority=1))
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
    plain = bound_reference.level_bounds(problem, ["odd"])
    cut = level_bounds(problem, ["odd"])
    assert [(b.priority, b.bound) for b in plain] == [(1, 1), (0, 19)]
    assert [(b.priority, b.bound) for b in cut] == [(1, 1), (0, 18)]
    best = _most_by_level(problem)
    assert "odd" in best and len(best) == 19


def test_a_card_gains_by_the_rare_pieces_it_holds() -> None:
    # Eight cards of 174 units; six seats of 35 units above forty of 2 GiB. A card reaches 172
    # only with four 35-unit seats on it; with one it holds 35 + 4 × 32 = 163, three more than
    # 5 × 32. Six rare pieces gain 3 units each, not 12: 8 × 160 + 6 × 3 − 6 × 35 = 1,088 units,
    # thirty-four 2 GiB seats, what first fit places (the plain bound: 8 × 172 − 210 = 1,166,
    # thirty-six).
    catalogue, snapshots = make_fleet({"a": [174 * 64 * MiB] * 4, "b": [174 * 64 * MiB] * 4})
    seats = [seat(f"s{i:02d}", 2 * GiB) for i in range(40)]
    seats += [seat(f"odd{i}", 35 * 64 * MiB, priority=1) for i in range(6)]
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
    top = [f"odd{i}" for i in range(6)]
    assert [b.bound for b in bound_reference.level_bounds(problem, top)] == [6, 36]
    assert [b.bound for b in level_bounds(problem, top)] == [6, 34]
    greedy = greedy_assignment(problem)
    assert sum(1 for name in greedy if name.startswith("s")) == 34


def _mixed(rng: random.Random) -> tuple[Catalogue, list[Snapshot], list[Seat]]:
    """Two hosts of two cards; six seats of every kind: whole GiB or off the grid, one or two
    cards, gated or not, over two priorities."""
    rooms = {
        f"h{h}": [rng.randint(4, 11) * GiB + rng.choice([0, 448 * MiB]) for _ in range(2)]
        for h in range(2)
    }
    catalogue, snapshots = make_fleet(rooms, ctx=GiB // 2, margin=GiB // 4)
    seats: list[Seat] = []
    for i in range(6):
        resident = rng.randint(2, 6) * GiB + (192 * MiB if rng.random() < 0.3 else 0)
        extra: dict[str, object] = {"priority": rng.choice([0, 0, 1])}
        if rng.random() < 0.25:
            extra["gpus"] = 2
        if rng.random() < 0.3:
            util = round(resident / (16 * GiB) + rng.choice([0.0, 0.03]), 3)
            seats.append(_gated(f"s{i}", resident, util, **extra))
        else:
            seats.append(seat(f"s{i}", resident, **extra))
    return catalogue, snapshots, seats


def _on_a_grid(rng: random.Random) -> tuple[Catalogue, list[Snapshot], list[Seat]]:
    """Two hosts of two cards of whole GiB and a fraction; more seats of one whole-GiB shape
    (gated or not) than fit, and one or two off the grid above or beside them."""
    fraction = rng.choice([448, 640, 832, 960]) * MiB
    rooms = {f"h{h}": [rng.randint(4, 7) * GiB + fraction for _ in range(2)] for h in range(2)}
    catalogue, snapshots = make_fleet(rooms, ctx=GiB // 2, margin=GiB // 4)
    resident = rng.choice([1, 2]) * GiB
    many = 32 * GiB // resident
    if rng.random() < 0.3:
        seats = [_gated(f"s{i:02d}", resident, 0.125 + resident / (16 * GiB)) for i in range(many)]
    else:
        seats = [seat(f"s{i:02d}", resident) for i in range(many)]
    for i in range(rng.randint(1, 2)):
        odd = rng.randint(1, 2) * GiB + rng.choice([192, 320]) * MiB
        extra = {"gpus": 2} if rng.random() < 0.3 else {}
        seats.append(seat(f"odd{i}", odd, priority=rng.choice([0, 1]), **extra))
    return catalogue, snapshots, seats


@pytest.mark.slow
@pytest.mark.parametrize(("family", "least_tighter"), [(_mixed, 0), (_on_a_grid, 8)])
def test_no_placement_of_a_tiny_fleet_places_more_than_the_bound(
    family: Family, least_tighter: int
) -> None:
    # Every placement of thirty seeded tiny fleets tried: at each level the bound is at least
    # what the best placement by strict priority places there, and at most the plain bound;
    # on a grid, the cut is below the plain bound at some levels (11 of them when written).
    tighter = left_out = 0
    for seed in range(30):
        catalogue, snapshots, seats = family(random.Random(7_000 + seed))
        problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
        best = _most_by_level(problem)
        _verified(catalogue, snapshots, seats, best)
        cut = level_bounds(problem, best)
        plain = bound_reference.level_bounds(problem, best)
        for level, old in zip(cut, plain, strict=True):
            got = sum(1 for s in seats if s.priority == level.priority and s.name in best)
            assert level.placed == got
            assert got <= level.bound <= old.bound, (seed, level, old, best)
            tighter += level.bound < old.bound
        left_out += len(best) < len(seats)
    # Not vacuous: most fleets leave a seat out.
    assert left_out >= 20 and tighter >= least_tighter, (left_out, tighter)
