"""A crowded fleet of 16 × 8 cards planned whole: what `plan` prints, text and JSON, by default
(the summary) and with `--explain all`, stays byte for byte what it was before refusals were
judged on the card rows and placements verified a card at a time.

The goldens under tests/placement/golden/plan_crowded_16x8.* were written by the code of main at
805a1be, before those changes (a `GPUPLAN_WRITE_GOLDEN=1` run of this file). The fleet is
`bench.bench_plan.synthetic_fleet(16, 8, 75, 500, seed=35)` (dozens of refused seats) with what
an explanation must not skip: reserves (idle, in use, the whole card), a running seat that is
down, a process no catalogue seat explains, a card in error, a seat pinned to a host, an
exclusive one, one larger than any card, and two ledger holds (one gated). One figure was
written again since: the priority-0 bound, 254 → 252, when the level bound learned that a few
seats off the others' size grid open only a few cards, by the pieces each holds
(placement.plan.bound); the seats, cards and words are those of 805a1be.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.bench_plan import synthetic_fleet
from inventory.holds import Hold
from inventory.snapshot import Snapshot, with_holds
from placement.cli.notes_text import worded_notes
from placement.cli.plan_text import render_plan
from placement.fit.verify import Placement, judge, verify_placement
from placement.plan.greedy import greedy_assignment
from placement.plan.planner import PlanResult, plan
from placement.plan.problem import build_problem, new_seats
from seats.model import Catalogue, Seat

GIB = 2**30
GOLDEN = Path(__file__).resolve().parent.parent / "golden"
WRITE = os.environ.get("GPUPLAN_WRITE_GOLDEN") == "1"
MADE = datetime(2026, 9, 16, 13, 50, tzinfo=UTC)


def crowded_fleet() -> tuple[Catalogue, list[Snapshot], list[tuple[str, Seat]]]:
    """16 × 8 cards, 75 running seats, 500 new ones (dozens refused), and the odd cards."""
    catalogue, snapshots, adds = synthetic_fleet(16, 8, 75, 500, seed=35)
    data = catalogue.model_dump(mode="json", by_alias=True)
    seats = data["seats"]
    on = {(s["host"], s["gpus"][0]): s["name"] for s in seats}
    data["reserves"] = [
        {"name": "idle-r", "host": "h03", "gpu": 1, "bytes": 6 * GIB, "for": ["later"]},
        {"name": "used-r", "host": "h05", "gpu": 2, "bytes": 44 * GIB, "for": [on[("h05", 2)]]},
        {"name": "card-r", "host": "h09", "gpu": 4, "bytes": "card", "for": ["later2"]},
    ]
    data["seats"] = [
        *seats,
        {"name": "later", "resident": 5 * GIB, "state": "planned", "host": "h03", "gpus": [1]},
        {"name": "later2", "resident": 70 * GIB, "state": "planned"},
    ]
    catalogue = Catalogue.model_validate(data)
    down = on[("h05", 3)]
    port = str(next(s["match"] for s in seats if s["name"] == down)).removesuffix("$")
    out: list[Snapshot] = []
    for snap in snapshots:
        raw = snap.to_json_dict()
        for card in raw["cards"]:
            key = (snap.host, card["index"])
            if key == ("h05", 3):  # its process is gone: absent, it keeps its place
                gone = [p for p in card["processes"] if p["cmdline"].endswith(port)]
                freed = sum(p["used_bytes"] for p in gone)
                card["processes"] = [p for p in card["processes"] if p not in gone]
                card["used_bytes"] -= freed
                card["free_bytes"] += freed
            if key == ("h13", 5):  # a process no seat's match finds
                card["processes"].append(
                    {"pid": 99_001, "used_bytes": 3 * GIB, "cmdline": "python train.py"}
                )
                card["used_bytes"] += 3 * GIB
                card["free_bytes"] -= 3 * GIB
            if key == ("h14", 7):
                for figure in ("total_bytes", "reserved_bytes", "used_bytes", "free_bytes"):
                    card[figure] = None
                card["processes"] = []
                card["error"] = "GPU is lost"
        out.append(Snapshot.model_validate(raw))
    until = MADE + timedelta(minutes=30)
    holds = [
        Hold("held-a", "h12", (2,), 20 * GIB, MADE, until, "ci"),
        Hold("held-b", "h15", (0,), 30 * GIB, MADE, until, "ci", requested_bytes=28 * GIB),
    ]
    out = with_holds(out, holds)
    new: list[tuple[str, Seat]] = []
    for origin, seat in adds:
        extra: dict[str, Any] = {}
        if seat.name == "new6":
            extra = {"resident": 90 * GIB}  # more than any card
        if seat.name == "new7":
            extra = {"host": "h10", "exclusive": True}
        if seat.name == "new8":
            extra = {"host": "h04"}
        raw_seat = {**seat.model_dump(mode="json", by_alias=True, exclude_unset=True), **extra}
        new.append((origin, Seat.model_validate(raw_seat)))
    return catalogue, out, new


@pytest.fixture(scope="module")
def crowded() -> PlanResult:
    catalogue, snapshots, adds = crowded_fleet()
    return plan(catalogue, snapshots, adds)


def _compare(name: str, got: str) -> None:
    path = GOLDEN / name
    if WRITE:
        path.write_text(got)
    assert got == path.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("explain", ["summary", "all"])
def test_crowded_plan_json_is_unchanged(crowded: PlanResult, explain: str) -> None:
    # Notes in their words, as the edge prints them: the golden holds the words of before.
    document = worded_notes(crowded.to_json(explain))
    _compare(f"plan_crowded_16x8_{explain}.json", json.dumps(document, indent=1) + "\n")
    # Dozens refused, hundreds placed: the answer is the fleet's, not an empty one.
    verdicts = [seat["verdict"] for seat in document["seats"]]
    assert (verdicts.count("pass"), verdicts.count("refuse")) == (PLACED, REFUSED)


@pytest.mark.slow
@pytest.mark.parametrize("explain", ["summary", "all"])
def test_crowded_plan_text_is_unchanged(crowded: PlanResult, explain: str) -> None:
    _compare(f"plan_crowded_16x8_{explain}.txt", render_plan(crowded, explain=explain))


PLACED, REFUSED = 478, 24


def test_verifying_a_card_at_a_time_judges_each_seat_as_alone() -> None:
    """`verify_placement` prepares each card's states once; each verdict is `judge`'s own, asked
    for the seat alone beside every other placement of its host (as before that pass)."""
    catalogue, snapshots, adds = synthetic_fleet(4, 8, 20, 120, seed=35)
    problem = build_problem(catalogue, snapshots, new_seats(catalogue, adds))
    placements = [
        Placement(problem.seat(name).seat, host, cards)
        for name, (host, cards) in greedy_assignment(problem).items()
    ]
    got = verify_placement(problem.catalogue, problem.snapshots, placements, models=problem.models)
    by_host = {s.host: s for s in problem.snapshots}
    alone = [
        judge(
            problem.catalogue,
            by_host[p.host],
            p.seat,
            p.cards,
            others=[o for o in placements if o.host == p.host and o is not p],
        )
        for p in placements
    ]
    assert got == alone
    # Crowded: every seat placed and passed, up to SHARED new seats on one card.
    assert (len(placements), sum(1 for v in got if v.passed)) == (120, 120)
    on_card = Counter((p.host, card) for p in placements for card in p.cards)
    assert max(on_card.values()) == SHARED


SHARED = 9
