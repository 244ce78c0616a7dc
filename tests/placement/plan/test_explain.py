"""Explaining refusals: interchangeable seats explained once per class say what each alone would."""

from __future__ import annotations

import pytest

from placement.cli.reasons_text import reason_text
from placement.fit.verdict import Reason, Verdict
from placement.fit.verify import CardStates, Placement
from placement.plan.explain import ExplainClasses, explain_refusal, summarise
from placement.plan.greedy import greedy_assignment
from placement.plan.problem import build_problem, new_seats
from placement.plan.verified import verified_verdicts
from seats.units import GiB
from tests.placement.plan.test_fleet import GIB, random_fleet
from tests.placement.plan.test_model import make_fleet, run_plan, seat


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_seats_explained_once_per_class_read_as_if_explained_alone(seed: int) -> None:
    catalogue, snaps, _ = random_fleet(seed)
    # Each planned seat of the catalogue gets an --add twin of another name and priority
    # (several twins per class once sizes repeat); reserves and a redeploy's process name
    # some of the catalogue's planned seats, which the catalogue names anyway.
    twins = [
        ("test", s.model_copy(update={"name": f"{s.name}-twin", "priority": s.priority + 1}))
        for s in catalogue.seats
        if s.state == "planned"
    ]
    problem = build_problem(catalogue, snaps, new_seats(catalogue, twins))
    placements, failed, _ = verified_verdicts(problem, greedy_assignment(problem))
    placed = {p.seat.name for p in placements}
    refused = [new for new in problem.seats if new.name not in placed]
    classes = ExplainClasses.of(problem)
    states: CardStates = {}
    for new in refused:
        alone = explain_refusal(problem, new, placements, failed.get(new.name))
        pooled = explain_refusal(problem, new, placements, failed.get(new.name), states, classes)
        assert pooled == alone
    pooled_seats = [new for new in refused if classes.key(new.seat) is not None]
    assert pooled_seats
    assert all(new.name.endswith("-twin") for new in pooled_seats)
    assert len(classes.verdicts) <= len(pooled_seats)


def test_a_class_is_explained_once_for_all_its_seats() -> None:
    catalogue, snaps, _ = random_fleet(0)
    big = next(s for s in catalogue.seats if s.state == "planned" and s.engine.kind == "vllm")
    adds = [
        ("test", big.model_copy(update={"name": f"copy{i}", "exclusive": True})) for i in range(5)
    ]
    problem = build_problem(catalogue, snaps, new_seats(catalogue, adds))
    classes = ExplainClasses.of(problem)
    # Exclusive: the rule's text names the seat, which each copy must read as its own.
    verdicts = [
        explain_refusal(problem, problem.seat(f"copy{i}"), [], None, {}, classes) for i in range(5)
    ]
    assert len(classes.verdicts) == 1
    assert [v.seat for v in verdicts] == [f"copy{i}" for i in range(5)]
    for i, verdict in enumerate(verdicts):
        exclusive = [reason_text(r) for r in verdict.reasons if r.rule == "exclusive"]
        assert exclusive
        assert all(text.startswith(f"copy{i} is exclusive;") for text in exclusive)
        assert verdict == explain_refusal(problem, problem.seat(f"copy{i}"), [])


def _reason(rule: str, host: str, card: int | None, short: int | None) -> Reason:
    return Reason(rule, card, None, None, short, f"{rule} on {host}:{card}", host)  # type: ignore[arg-type]


def test_a_summary_keeps_the_three_tightest_places_and_counts_every_rule() -> None:
    reasons = (
        _reason("room", "a", 0, 5 * GIB),
        _reason("gate", "a", 0, 7 * GIB),  # card a:0 is 7 GiB short: its worst rule
        _reason("exclusive", "a", 1, None),
        _reason("room", "a", 2, 1 * GIB),
        _reason("room", "b", 0, 6 * GIB),
        _reason("reserve", "b", 1, 2 * GIB),
        _reason("host", "c", None, None),
    )
    verdict = Verdict("refuse", "s", None, (), reasons)
    summary = summarise(verdict)
    assert summary is not None
    assert [(r.host, r.card, r.rule) for r in summary.reasons] == [
        ("a", 2, "room"),
        ("b", 0, "room"),
        ("b", 1, "reserve"),
    ]
    assert summary.counts == {"room": 3, "gate": 1, "exclusive": 1, "reserve": 1, "host": 1}
    assert summary.places == 6
    assert summarise(Verdict("refuse", "s", None, (), reasons[:5])) is None  # four places


def test_a_refusal_keeps_no_util_chosen_for_a_card_that_refused_the_seat() -> None:
    # A pinned-KV seat whose covering util the gate cannot honour gets "the largest util that
    # passes" for a card; the card still refuses it (room), so that util advises nothing.
    catalogue, snapshots = make_fleet({"h": [2 * GiB, 3 * GiB]}, ctx=GiB // 4)
    engine = {"kind": "vllm", "version": "0.11.0", "kv_cache_memory": GiB}
    seats = [seat("big", 6 * GiB, engine=engine)]
    result = run_plan(catalogue, snapshots, seats)
    (verdict,) = result.verdicts
    assert not verdict.passed
    assert {r.rule for r in verdict.reasons} == {"room"}
    assert not any("is the largest that passes" in w for w in verdict.warnings), verdict.warnings


@pytest.mark.slow
def test_a_class_refusal_is_summarised_without_writing_its_reasons_out() -> None:
    """A refusal shared by a class keeps its reasons unwritten until read: its summary, read off
    the cards' judgements, is the one its written reasons give, and reading them gives the
    reasons of the seat explained alone."""
    from bench.bench_plan import synthetic_fleet
    from placement.fit.kv import with_need_floors
    from placement.plan.planner import _floored_adds, plan

    catalogue, snapshots, fleet_adds = synthetic_fleet(16, 8, 75, 500)
    result = plan(catalogue, snapshots, fleet_adds)
    refused = [v for v in result.verdicts if not v.passed]
    lazy = [v for v in refused if "reasons" not in v.__dict__]
    summaries = [summarise(v) for v in lazy]
    # Summarising wrote nothing out.
    assert all("reasons" not in v.__dict__ for v in lazy)
    assert summaries == [summarise(v, lazy=False) for v in lazy]
    assert (len(refused), len(lazy), sum(s is not None for s in summaries)) == LAZY_COUNTS
    assert all("reasons" in v.__dict__ for v in lazy)
    # The problem as the planner built it: residents raised to their need floors.
    floored = with_need_floors(catalogue).catalogue
    raised = [(origin, seat) for origin, (seat, _) in _floored_adds(floored, fleet_adds)]
    problem = build_problem(floored, snapshots, new_seats(floored, raised))
    placed = [v for v in result.verdicts if v.passed]
    placements = [Placement(problem.seat(v.seat).seat, v.host, v.cards) for v in placed]
    for verdict in lazy[:3]:
        alone = explain_refusal(problem, problem.seat(verdict.seat), placements)
        assert verdict == alone and alone == verdict
        assert verdict.reasons == alone.reasons


LAZY_COUNTS = (22, 22, 22)
