"""The per-level upper bound: never below what an optimal placement places, and tight where it can tell."""

from __future__ import annotations

import random

import pytest

from placement.plan.bound import level_bounds
from placement.plan.problem import build_problem, new_seats
from seats.model import Seat
from seats.units import GiB, MiB
from tests.placement.plan import bound_reference
from tests.placement.plan.test_model import adds, make_fleet, placed, run_plan, seat


def test_two_cards_of_room_bound_a_two_card_seat_and_a_third() -> None:
    # Two cards of 9 GiB: a 2-card seat of 8 GiB takes both; with it placed first (priority 1),
    # no 8 GiB seat of priority 0 can be placed, whatever the placement.
    catalogue, snapshots = make_fleet({"h": [9 * GiB, 9 * GiB]})
    seats = [seat("pair", 8 * GiB, gpus=2, priority=1), seat("one", 8 * GiB)]
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
    top, low = level_bounds(problem, ["pair"])
    assert (top.priority, top.bound, top.placed, top.gap) == (1, 1, 1, 0.0)
    assert (low.priority, low.bound, low.placed) == (0, 0, 0)


def test_fragmented_room_is_not_counted_as_whole() -> None:
    # 3 + 3 GiB of room on two cards, seats of 4 GiB: room adds up to 6, yet none fits.
    catalogue, snapshots = make_fleet({"h": [3 * GiB, 3 * GiB]})
    seats = [seat("a", 4 * GiB), seat("b", 2 * GiB)]
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
    (level,) = level_bounds(problem, ["b"])
    assert level.bound == 1 and level.gap == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_no_optimal_placement_places_more_than_the_bound(seed: int) -> None:
    rng = random.Random(seed)
    rooms = {f"h{h}": [rng.randint(4, 16) * GiB for _ in range(3)] for h in range(2)}
    catalogue, snapshots = make_fleet(rooms)
    seats = [
        seat(
            f"s{i}",
            rng.randint(1, 9) * GiB,
            priority=rng.choice([0, 1]),
            **({"gpus": 2} if rng.random() < 0.2 else {}),
        )
        for i in range(9)
    ]
    result = run_plan(catalogue, snapshots, seats, solver="highs")
    assert result.status == "optimal"
    placed = {v.seat for v in result.verdicts if v.passed}
    for level in result.bounds:
        got = sum(1 for s in seats if s.priority == level.priority and s.name in placed)
        assert level.placed == got
        assert level.bound >= got, (level, placed)
    assert result.to_json()["bounds"][0]["priority"] == max(s.priority for s in seats)


def _gated(name: str, resident: int, util: float, **extra: object) -> Seat:
    """A vLLM seat with a declared util and a pinned KV cache: its gate asks util × total."""
    engine = {
        "kind": "vllm",
        "version": "0.11.0",
        "gpu_memory_utilization": util,
        "kv_cache_memory": GiB,
    }
    return seat(name, resident, engine=engine, **extra)


def test_the_gate_lowers_the_bound_where_each_card_holds_one_gated_seat() -> None:
    # Two cards of 10 GiB free, 1 GiB of CUDA context, seats of 5 GiB asking 5 GiB (16 GiB × 0.3125).
    # Room takes two a card; the gate (5 + 5 > 10 − 1) one: a gated card holds 9 GiB, so 5 GiB
    # of seats. The same seats without a gate are bounded by room alone: 4.
    catalogue, snapshots = make_fleet({"h": [10 * GiB, 10 * GiB]}, ctx=GiB)
    gated = [_gated(f"g{i}", 5 * GiB, 0.3125) for i in range(4)]
    result = run_plan(catalogue, snapshots, gated, solver="highs")
    assert result.optimal and len(placed(result)) == 2
    assert [level.bound for level in result.bounds] == [2]
    plain = [seat(f"p{i}", 5 * GiB) for i in range(4)]
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*plain)))
    assert [level.bound for level in level_bounds(problem, [])] == [4]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_no_optimal_placement_of_gated_seats_places_more_than_the_bound(seed: int) -> None:
    rng = random.Random(100 + seed)
    rooms = {f"h{h}": [rng.randint(4, 16) * GiB for _ in range(3)] for h in range(2)}
    catalogue, snapshots = make_fleet(rooms, ctx=GiB // 2, margin=GiB // 4)
    seats: list[Seat] = []
    for i in range(9):
        resident = rng.randint(1, 7) * GiB
        priority = rng.choice([0, 1])
        if rng.random() < 0.6:
            util = round(resident / (16 * GiB) + rng.choice([0.0, 0.02, 0.05]), 3)
            seats.append(_gated(f"s{i}", resident, util, priority=priority))
        else:
            seats.append(seat(f"s{i}", resident, priority=priority))
    result = run_plan(catalogue, snapshots, seats, solver="highs")
    assert result.status == "optimal"
    got = {v.seat for v in result.verdicts if v.passed}
    for level in result.bounds:
        count = sum(1 for s in seats if s.priority == level.priority and s.name in got)
        assert level.bound >= count, (level, got)


def _oracle(catalogue: object, snapshots: list, seats: list[Seat]) -> dict[int, int]:
    """The exhaustive optimum: every assignment of single-card seats to a card or to none,
    each judged by the exact verifier; the best by strict priority (most top-level seats first).
    Per priority, the seats that best placement places."""
    from itertools import product

    from placement.fit.verify import Placement, verify_placement

    cards = [(s.host, c.index) for s in snapshots for c in s.cards]
    levels = sorted({s.priority for s in seats}, reverse=True)
    best: tuple[int, ...] = tuple(-1 for _ in levels)
    best_counts: dict[int, int] = {}
    for choice in product([None, *cards], repeat=len(seats)):
        placements = [
            Placement(s, where[0], (where[1],))
            for s, where in zip(seats, choice, strict=True)
            if where is not None
        ]
        verdicts = verify_placement(catalogue, snapshots, placements)  # type: ignore[arg-type]
        if not all(v.passed for v in verdicts):
            continue
        names = {p.seat.name for p in placements}
        key = tuple(sum(1 for s in seats if s.priority == p and s.name in names) for p in levels)
        if key > best:
            best = key
            best_counts = dict(zip(levels, key, strict=True))
    return best_counts


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_the_bound_and_the_plan_against_an_exhaustive_oracle(seed: int) -> None:
    # Small enough to try every assignment (5 cards + none, 5 seats: 7,776 placements), with
    # gated seats among them: the oracle does not use the planner, only the verifier.
    rng = random.Random(500 + seed)
    rooms = {
        "h0": [rng.randint(3, 8) * GiB for _ in range(3)],
        "h1": [rng.randint(3, 8) * GiB for _ in range(2)],
    }
    catalogue, snapshots = make_fleet(rooms, ctx=GiB // 2)
    seats: list[Seat] = []
    for i in range(5):
        resident = rng.randint(3, 8) * GiB
        priority = rng.choice([0, 1])
        if rng.random() < 0.5:
            util = round(resident / (16 * GiB) + rng.choice([0.0, 0.03]), 3)
            seats.append(_gated(f"s{i}", resident, util, priority=priority))
        else:
            seats.append(seat(f"s{i}", resident, priority=priority))
    oracle = _oracle(catalogue, list(snapshots), seats)
    result = run_plan(catalogue, snapshots, seats, solver="highs")
    got = {v.seat for v in result.verdicts if v.passed}
    for level in result.bounds:
        count = sum(1 for s in seats if s.priority == level.priority and s.name in got)
        assert count == oracle[level.priority], (level, got, oracle)
        assert level.bound >= oracle[level.priority], (level, oracle)
    # Not vacuous: each case leaves some seat out, so the bound had something to bound.
    assert sum(oracle.values()) < len(seats), oracle


@pytest.mark.parametrize("seed", range(12))
def test_the_bound_on_arrays_is_the_reference_bound(seed: int) -> None:
    # Gated and plain seats at three levels, cards from full to empty (g_c = 0 on some), small
    # seats so that the fleet's whole room (less what gates lose) binds on the even seeds, and
    # larger ones on the odd: every level's bound equals the list-based reference.
    rng = random.Random(900 + seed)
    rooms = {
        f"h{h}": [rng.choice([0, 1, rng.randint(2, 16)]) * GiB for _ in range(4)] for h in range(3)
    }
    catalogue, snapshots = make_fleet(rooms, ctx=GiB, margin=GiB // 4)
    seats: list[Seat] = []
    for i in range(24):
        resident = rng.randint(17, 50 if seed % 2 == 0 else 190) * 64 * MiB
        priority = rng.choice([0, 1, 2])
        if rng.random() < 0.7:
            util = round(min(1.0, resident / (16 * GiB) + rng.choice([0.0, 0.02, 0.3])), 3)
            seats.append(_gated(f"s{i}", resident, util, priority=priority))
        else:
            extra = {"gpus": 2} if rng.random() < 0.2 else {}
            seats.append(seat(f"s{i}", resident, priority=priority, **extra))
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
    done = [s.name for s in seats if rng.random() < 0.4]
    got = level_bounds(problem, done)
    want = bound_reference.level_bounds(problem, done)
    assert [(b.priority, b.seats, b.bound, b.placed) for b in got] == [
        (b.priority, b.seats, b.bound, b.placed) for b in want
    ]
    assert all(type(b.bound) is int for b in got)
