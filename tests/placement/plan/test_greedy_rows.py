"""The greedy placers over the card models' rows place exactly as the card-by-card placers did
(tests/placement/plan/greedy_reference.py: placement/plan/greedy.py before the rows), and the
rows answer what the card model answers, card by card."""

from __future__ import annotations

import pytest

from bench.bench_plan import synthetic_fleet
from placement.plan import greedy
from placement.plan.most import most_seats
from placement.plan.problem import build_problem, new_seats
from tests.placement.plan import greedy_reference as reference
from tests.placement.plan.test_fleet import random_fleet


def _problems(seed: int):  # type: ignore[no-untyped-def]
    catalogue, snaps, _ = random_fleet(seed)
    return lambda: build_problem(catalogue, snaps, new_seats(catalogue))


@pytest.mark.parametrize("seed", range(12))
def test_rows_place_as_the_card_by_card_placers_on_random_fleets(seed: int) -> None:
    fresh = _problems(seed)
    assert greedy.first_fit(fresh()) == reference.first_fit(fresh())
    assert greedy.best_fit(fresh()) == reference.best_fit(fresh())


@pytest.mark.parametrize("size", [(8, 8, 40, 300), (16, 8, 75, 500)])
def test_rows_place_as_the_card_by_card_placers_on_crowded_fleets(
    size: tuple[int, int, int, int],
) -> None:
    catalogue, snapshots, adds = synthetic_fleet(*size)

    def fresh():  # type: ignore[no-untyped-def]
        return build_problem(catalogue, snapshots, new_seats(catalogue, adds))

    assert greedy.first_fit(fresh()) == reference.first_fit(fresh())
    assert greedy.best_fit(fresh()) == reference.best_fit(fresh())


@pytest.mark.parametrize("seed", range(12))
def test_the_rows_answer_what_the_card_model_answers_card_by_card(seed: int) -> None:
    problem = _problems(seed)()
    cards = greedy._Cards(problem)
    order = greedy.placing_order(problem)
    asked = 0
    for step, new in enumerate(order):
        # Every seat asked on every card, beside the seats placed so far.
        for other in order:
            fit, left = cards.fitting(other), cards.left_after(other)
            for i, (host, index) in enumerate(cards.fleet.keys):
                expected = cards.room_left(other.name, host, index)
                assert (bool(fit[i]), int(left[i]) if fit[i] else None) == (
                    expected is not None,
                    expected,
                ), (other.name, host, index)
                asked += 1
        if step > 12:
            break
        fit = cards.fitting(new)
        hosts = cards.hosts_with(new, fit)
        if hosts.any():
            at = int(hosts.argmax())
            chosen = cards.host_cards(at, fit)[: new.seat.card_count]
            cards.place(new, at, tuple(sorted(int(cards.fleet.index_of[i]) for i in chosen)))
    assert asked > 0


@pytest.mark.parametrize("seed", range(12))
def test_the_rows_say_which_seats_have_an_eligible_host_as_the_problem_does(seed: int) -> None:
    problem = _problems(seed)()
    got = [greedy.has_eligible_host(problem, new) for new in problem.seats]
    assert got == [problem.has_eligible_host(new.name) for new in problem.seats]


@pytest.mark.slow
@pytest.mark.parametrize("size", [(8, 8, 40, 300)])
def test_the_smallest_seats_search_places_as_before_on_a_crowded_fleet(
    size: tuple[int, int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # most_seats over the rows against most_seats over the card-by-card packing.
    import placement.plan.most as most

    catalogue, snapshots, adds = synthetic_fleet(*size)
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds))
    got = most_seats(problem)
    monkeypatch.setattr(most, "BestFitPacking", reference.BestFitPacking)
    monkeypatch.setattr(most, "has_eligible_host", lambda p, new: p.has_eligible_host(new.name))
    before = most_seats(build_problem(catalogue, snapshots, new_seats(catalogue, adds)))
    assert got == before
    assert len(got) > len(greedy.first_fit(problem))


@pytest.mark.parametrize(("walk", "block"), [(0, 32), (1, 1), (4, 2), (256, 3), (10_000, 64)])
def test_best_fit_walking_the_narrowest_cards_places_as_asking_every_card(
    walk: int, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cards asked one by one before every card at once (none, a few, all of them), in
    # blocks of a few cards or many: the same placement as the card-by-card placer, on a fleet
    # whose seats walk past many cards; first fit's blocks likewise.
    catalogue, snapshots, adds = synthetic_fleet(16, 8, 75, 500)

    def fresh():  # type: ignore[no-untyped-def]
        return build_problem(catalogue, snapshots, new_seats(catalogue, adds))

    monkeypatch.setattr(greedy, "_WALK", walk)
    monkeypatch.setattr(greedy, "_BLOCK", block)
    assert greedy.best_fit(fresh()) == reference.best_fit(fresh())
    assert greedy.first_fit(fresh()) == reference.first_fit(fresh())


@pytest.mark.parametrize("block", [1, 3, 32])
def test_each_block_of_narrow_cards_keeps_at_least_its_cards_largest_headroom(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The blocks a one-card seat passes over: in width order, none empty, and each block's top
    # at or above every headroom in it, after seats are placed on the cards.
    monkeypatch.setattr(greedy, "_BLOCK", block)
    catalogue, snapshots, adds = synthetic_fleet(16, 8, 75, 500)
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds))
    packing = greedy.BestFitPacking(problem)
    assert packing.add(greedy.placing_order(problem)) > 0  # crowded: some seats find no card
    narrow, each = packing.cards.narrow, packing.cards.arrays.each
    entries = [entry for part in narrow.blocks for entry in part]
    assert entries == sorted(entries) and len(entries) == len(problem.cards)
    assert all(part for part in narrow.blocks)
    assert narrow.firsts == [part[0] for part in narrow.blocks]
    assert narrow.rows == [[i for _, _, i in part] for part in narrow.blocks]
    width = packing.cards.arrays.width
    assert all(w == width[i] for w, _, i in entries)
    for top, part in zip(narrow.tops, narrow.blocks, strict=True):
        assert top >= max(each.headroom[i] for _, _, i in part)
        assert all(
            each.headroom[i] == min(each.room[i], each.floor[i] - each.load[i]) for _, _, i in part
        )


@pytest.mark.parametrize("seed", range(6))
def test_the_rows_count_the_eligible_pairs_the_pair_table_counts(seed: int) -> None:
    problem = _problems(seed)()
    pairs = len(problem.need)
    for limit in (0, pairs - 1, pairs, pairs + 1):
        assert greedy.pairs_exceed(problem, limit) == (pairs > limit)
    assert greedy.pairs_exceed(_problems(seed)(), pairs - 1)
