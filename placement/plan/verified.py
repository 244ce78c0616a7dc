"""A proposed placement re-judged by the verifier, dropping what it refuses (least important first).

Shared by the planner and the move search: the solver and the greedy placers propose, `fit` decides.
"""

from __future__ import annotations

from placement.fit.card import CardKey, CardModel
from placement.fit.verdict import Verdict
from placement.fit.verify import Placement, verify_placement
from placement.plan.problem import Problem

Assignment = dict[str, tuple[str, tuple[int, ...]]]


def verified(
    problem: Problem, assignment: Assignment
) -> tuple[list[Placement], dict[str, Verdict]]:
    """The proposal, less any seat the verifier refuses (lowest priority dropped first)."""
    placements, failed, _ = verified_verdicts(problem, assignment)
    return placements, failed


def verified_verdicts(
    problem: Problem,
    assignment: Assignment,
    placed_models: dict[CardKey, CardModel] | None = None,
) -> tuple[list[Placement], dict[str, Verdict], list[Verdict]]:
    """`verified`, plus the passing verdicts of the placements it keeps.

    `placed_models`: filled with the cards that take a kept placement, modelled with every
    kept placement there placed (`verify_placement`'s last round).
    """
    placements = [
        Placement(problem.seat(name).seat, host, cards)
        for name, (host, cards) in assignment.items()
    ]
    failed: dict[str, Verdict] = {}
    verdicts: list[Verdict] = []
    while placements:
        if placed_models is not None:
            placed_models.clear()
        verdicts = verify_placement(
            problem.catalogue,
            problem.snapshots,
            placements,
            views=problem.host_catalogues,
            card_views=problem.card_catalogues,
            models=problem.models,
            placed_models=placed_models,
        )
        bad = [(p, v) for p, v in zip(placements, verdicts, strict=True) if not v.passed]
        if not bad:
            break
        # The solver's floating point disagreed with exact bytes: drop the least important.
        worst = min(bad, key=lambda item: (item[0].seat.priority, -item[0].seat.resident_bytes))
        failed[worst[0].seat.name] = worst[1]
        placements = [p for p in placements if p is not worst[0]]
    if not placements:
        verdicts = []
        if placed_models is not None:
            placed_models.clear()
    return placements, failed, verdicts
