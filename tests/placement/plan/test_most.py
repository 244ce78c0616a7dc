"""The smallest-seats-first search: more seats than first and best fit where not all fit, never a
placement the verifier refuses, and strict priority kept."""

from __future__ import annotations

import random

import pytest

import placement.plan.planner as planner
from placement.cli.plan_text import render_plan
from placement.plan.greedy import best_fit, first_fit
from placement.plan.most import most_seats
from placement.plan.problem import build_problem, new_seats, split_by_host
from placement.plan.score import priority_weights, score
from seats.units import GiB
from tests.placement.plan.test_model import adds, assert_verified, make_fleet, run_plan, seat


def test_keeps_the_small_seats_where_the_large_one_would_crowd_them_out() -> None:
    # One card of 10 GiB: decreasing order takes 6 + 3 (two seats); 3 + 3 + 3 are three.
    catalogue, snapshots = make_fleet({"h": [10 * GiB]})
    seats = [seat("big", 6 * GiB), *(seat(f"s{i}", 3 * GiB) for i in range(3))]
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
    assert len(first_fit(problem)) == len(best_fit(problem)) == 2
    assert sorted(most_seats(problem)) == ["s0", "s1", "s2"]


def test_a_higher_priority_seat_is_never_given_up_for_more_small_ones() -> None:
    catalogue, snapshots = make_fleet({"h": [10 * GiB]})
    seats = [seat("big", 6 * GiB, priority=1), *(seat(f"s{i}", 3 * GiB) for i in range(3))]
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
    found = most_seats(problem)
    assert "big" in found and len(found) == 2


def _crowded(seed: int) -> tuple[object, list[object], list[object]]:
    rng = random.Random(seed)
    rooms = {f"h{h}": [rng.randint(6, 30) * GiB for _ in range(4)] for h in range(6)}
    catalogue, snapshots = make_fleet(rooms, total=32 * GiB, ctx=GiB // 2, margin=GiB // 4)
    seats = []
    for i in range(60):
        resident = rng.randint(2, 14) * GiB
        extra: dict[str, object] = {"priority": rng.choice([0, 0, 1, 2])}
        if rng.random() < 0.15:
            extra["gpus"] = 2
        if rng.random() < 0.4:
            util = round(resident / (32 * GiB) + 0.02, 3)
            extra["engine"] = {
                "kind": "vllm",
                "version": "0.11.0",
                "gpu_memory_utilization": util,
                "kv_cache_memory": GiB,
            }
        seats.append(seat(f"s{i}", resident, **extra))
    return catalogue, snapshots, seats


@pytest.mark.parametrize("seed", range(5))
def test_a_fleet_past_the_solver_limit_gets_at_least_first_and_best_fit_verified(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalogue, snapshots, seats = _crowded(seed)
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
    weights = priority_weights(problem.seats)
    baseline = max(score(first_fit(problem), weights), score(best_fit(problem), weights))
    monkeypatch.setattr(planner, "SOLVER_MAX_PAIRS", 10)
    result = run_plan(catalogue, snapshots, seats)
    assert result.status == "greedy"
    got = [v.seat for v in result.verdicts if v.passed]
    assert score(got, weights) >= baseline
    assert_verified(catalogue, snapshots, result)
    for level in result.bounds:
        assert level.placed <= level.bound
    assert any("integer program is not run" in w for w in result.warnings)


def test_the_text_shows_each_level_against_its_bound_when_no_solver_proved_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalogue, snapshots = make_fleet({"h": [10 * GiB, 10 * GiB]})
    monkeypatch.setattr(planner, "SOLVER_MAX_PAIRS", 1)
    seats = [seat("a", 6 * GiB), seat("b", 6 * GiB), seat("c", 6 * GiB)]
    text = render_plan(run_plan(catalogue, snapshots, seats))
    # Two placed and the sizes allow two (6 + 6 > 10): proven, nothing to add.
    assert "BOUND" not in text
    # Exclusive seats want a card each; the relaxation drops that and lets three share.
    catalogue, snapshots = make_fleet({"h": [10 * GiB, 10 * GiB]})
    seats = [seat(f"x{i}", 2 * GiB, exclusive=True) for i in range(3)]
    text = render_plan(run_plan(catalogue, snapshots, seats))
    assert "  priority 0: placed 2 of 3, bound 3 (gap 33.3%)" in text


def test_seats_that_name_their_hosts_are_solved_host_by_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three hosts, every seat naming its own: 4, 4, 3, 3, 3, 3 GiB onto two 10 GiB cards on
    # each, which first fit cannot pack; each host's own integer program does.
    from placement.plan import model

    rooms = {f"h{h}": [10 * GiB, 10 * GiB] for h in range(3)}
    catalogue, snapshots = make_fleet(rooms)
    seats = [
        seat(f"{host}-s{i}", size * GiB, host=host)
        for host in rooms
        for i, size in enumerate([4, 4, 3, 3, 3, 3])
    ]
    solved: list[list[str]] = []
    real_solve = model.solve

    def spy(problem: object, **kwargs: object) -> object:
        solved.append(sorted(problem.hosts))  # type: ignore[attr-defined]
        return real_solve(problem, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(model, "solve", spy)
    result = run_plan(catalogue, snapshots, seats)
    assert solved == [["h0"], ["h1"], ["h2"]]
    assert result.status == "optimal" and result.verdict == "pass"
    assert_verified(catalogue, snapshots, result)


def test_a_seat_free_to_go_anywhere_keeps_the_fleet_one_problem() -> None:
    rooms = {f"h{h}": [10 * GiB] for h in range(2)}
    catalogue, snapshots = make_fleet(rooms)
    seats = [seat("pinned", 4 * GiB, host="h0"), seat("free", 4 * GiB)]
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
    assert split_by_host(problem) is None
    seats = [seat("a", 4 * GiB, host="h0"), seat("b", 4 * GiB, host="h1")]
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds(*seats)))
    parts = split_by_host(problem)
    assert parts is not None
    assert [(list(p.hosts), [n.name for n in p.seats]) for p in parts] == [
        (["h0"], ["a"]),
        (["h1"], ["b"]),
    ]


@pytest.mark.parametrize("size", [(8, 8, 40, 300), (16, 8, 75, 500)])
def test_the_search_reads_best_fits_levels_and_places_the_same(
    size: tuple[int, int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.bench_plan import synthetic_fleet
    from placement.plan import greedy, most

    catalogue, snapshots, fleet_adds = synthetic_fleet(*size)
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, fleet_adds))
    run = greedy.best_fit_levels(problem)
    # The pass kept level by level is best fit's own.
    assert run.placed == best_fit(problem)
    packed: list[int] = []
    real_add = greedy.BestFitPacking.add

    def counted(self: greedy.BestFitPacking, seats: object, **kwargs: bool) -> int:
        packed.append(1)
        return real_add(self, seats, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(greedy.BestFitPacking, "add", counted)
    alone = most.most_seats(problem)
    packs_alone = len(packed)
    packed.clear()
    read = most.most_seats(problem, run)
    # The same seats on the same cards, with the levels best fit packed whole not packed again.
    assert read == alone
    assert len(read) > len(run.placed)
    # Best fit's levels are read down to the first it leaves eligible seats out of, that one
    # included (its whole pack fails there); below it the search's placement is its own.
    read_levels = 0
    for priority in sorted(run.levels, reverse=True):
        read_levels += 1
        level = run.levels[priority]
        if any(greedy.has_eligible_host(problem, problem.seat(n)) for n in level.missed):
            break
    assert (packs_alone - len(packed), read_levels) == (READ_LEVELS[size], READ_LEVELS[size])


READ_LEVELS = {(8, 8, 40, 300): 3, (16, 8, 75, 500): 3}
