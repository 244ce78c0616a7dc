"""Every shortcut of the planner is looser than fit's verifier, never stricter (random small cases).

A seat the verifier accepts on some cards, alone, must survive pruning (`PairTable`, the host
filters), be placed by both greedy placers and by the integer program. Each @example is a case
where an earlier pruning was stricter than the verifier.
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import permutations
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from inventory.snapshot import Snapshot
from placement.fit.verify import judge
from placement.plan.greedy import best_fit, first_fit
from placement.plan.model import solve
from placement.plan.problem import NewSeat, build_problem
from seats.model import Catalogue

GIB = 2**30
MIB = 2**20
TAKEN = datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)
# (NVML total, driver reserve): an 80 GB-class card and an H200 (docs/facts.md §1).
KINDS = ((81_559 * MIB, 530 * MIB), (150_754_820_096, 644_939_776))
ENGINES: tuple[dict[str, Any], ...] = (
    {},
    {"kind": "vllm", "version": "0.11.0", "kv_cache_memory": 2 * GIB},
    {"kind": "vllm", "version": "0.11.0", "gpu_memory_utilization": 0.3, "kv_cache_memory": GIB},
    {"kind": "vllm", "version": "0.11.0", "gpu_memory_utilization": 0.4},
    {"kind": "vllm", "version": "0.11.0"},
    {"kind": "vllm", "version": "0.34.0"},
    # No start-up check: the util caps what it grows to, judged by room alone.
    {"kind": "vllm", "version": "0.34.0", "gpu_memory_utilization": 0.4},
)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    """One host of 2–3 cards (mixed sizes), running seats present or absent, foreign processes,
    reserves (`bytes: card` among them) and a new seat, sometimes already running (a redeploy)."""
    n_cards = draw(st.integers(2, 3))
    return {
        "kinds": [draw(st.integers(0, 1)) for _ in range(n_cards)],
        "margin_mib": draw(st.sampled_from([0, 256])),
        "context_mib": draw(st.sampled_from([0, 1280])),
        "running": draw(
            st.lists(
                st.tuples(
                    st.integers(0, n_cards - 1),  # card
                    st.integers(1, 60),  # resident GiB
                    st.booleans(),  # present
                    st.booleans(),  # exclusive
                ),
                max_size=3,
            )
        ),
        "foreign": draw(
            st.lists(st.tuples(st.integers(0, n_cards - 1), st.integers(1, 30)), max_size=2)
        ),
        "reserves": draw(
            st.lists(
                st.tuples(
                    st.integers(0, n_cards - 1),
                    st.one_of(st.just("card"), st.integers(1, 40)),
                    st.sampled_from(["new", "mate", "run0"]),
                ),
                max_size=2,
            )
        ),
        "new": {
            "resident": draw(st.integers(3, 70)),
            "gpus": draw(st.integers(1, 2)),
            "exclusive": draw(st.booleans()),
            "engine": draw(st.integers(0, len(ENGINES) - 1)),
            "redeploy": draw(
                st.one_of(st.none(), st.tuples(st.integers(0, n_cards - 1), st.integers(1, 40)))
            ),
        },
    }


def build(case: dict[str, Any]) -> tuple[Catalogue, Snapshot]:
    kinds = [KINDS[k] for k in case["kinds"]]
    seats: list[dict[str, Any]] = []
    processes: list[list[dict[str, Any]]] = [[] for _ in kinds]
    pid = 100
    for j, (card, resident, present, exclusive) in enumerate(case["running"]):
        name = f"run{j}"
        seats.append(
            {
                "name": name,
                "host": "h",
                "gpus": [card],
                "resident": resident * GIB,
                "state": "running",
                "match": name,
                "exclusive": exclusive,
            }
        )
        if present:
            processes[card].append(
                {"pid": pid, "used_bytes": resident * GIB, "cmdline": name, "seat": name}
            )
            pid += 1
    for card, used in case["foreign"]:
        processes[card].append({"pid": pid, "used_bytes": used * GIB, "cmdline": "other"})
        pid += 1
    new = case["new"]
    seats.append(
        {
            "name": "new",
            "resident": new["resident"] * GIB,
            "gpus": new["gpus"],
            "exclusive": new["exclusive"],
            "engine": ENGINES[new["engine"]],
            "match": "new",
        }
    )
    if new["redeploy"] is not None:
        card, used = new["redeploy"]
        processes[card].append(
            {"pid": pid, "used_bytes": used * GIB, "cmdline": "new", "seat": "new"}
        )
    seats.append({"name": "mate", "resident": 3 * GIB})
    names = {s["name"] for s in seats}
    reserves = [
        {
            "name": f"r{i}",
            "host": "h",
            "gpu": card,
            "bytes": amount if amount == "card" else amount * GIB,
            "for": [who],
        }
        for i, (card, amount, who) in enumerate(case["reserves"])
        if who in names
    ]
    catalogue = Catalogue.model_validate(
        {
            "hosts": {
                "h": {
                    "cards": len(kinds),
                    "margin": case["margin_mib"] * MIB,
                    "cuda_context": case["context_mib"] * MIB,
                }
            },
            "seats": seats,
            "reserves": reserves,
        }
    )
    cards = []
    for i, (total, reserve) in enumerate(kinds):
        used = sum(p["used_bytes"] for p in processes[i])
        cuda_total = total - reserve
        # Processes that would overfill the card are dropped (NVML never shows more than total).
        while used > cuda_total:
            used -= processes[i].pop()["used_bytes"]
        cards.append(
            {
                "index": i,
                "total_bytes": total,
                "reserved_bytes": reserve,
                "used_bytes": used,
                "free_bytes": cuda_total - used,
                "processes": processes[i],
            }
        )
    return catalogue, Snapshot.model_validate({"host": "h", "taken_at": TAKEN, "cards": cards})


def assert_never_stricter(case: dict[str, Any]) -> None:
    catalogue, snapshot = build(case)
    seat = catalogue.seat("new")
    alone = build_problem(catalogue, [snapshot], [NewSeat(seat, "catalogue")], attributed=True)
    both = build_problem(
        catalogue,
        [snapshot],
        [NewSeat(seat, "catalogue"), NewSeat(catalogue.seat("mate"), "catalogue")],
        attributed=True,
    )
    indices = [card.index for card in snapshot.cards]
    accepted = [
        cards
        for cards in permutations(indices, seat.card_count)
        if list(cards) == sorted(cards) and judge(catalogue, snapshot, seat, list(cards)).passed
    ]
    for cards in accepted:
        for index in cards:
            # Pruning keeps every pair the verifier accepts, beside other new seats or alone.
            assert ("new", "h", index) in alone.need, (cards, index)
            assert ("new", "h", index) in both.need, (cards, index)
    if not accepted:
        return
    assert alone.has_eligible_host("new")
    assert both.has_eligible_host("new")
    assert "new" in first_fit(alone)
    assert "new" in best_fit(alone)
    assert "new" in solve(alone, solver="cbc", time_limit=5.0).assignment


def case_of(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kinds": [0, 0],
        "margin_mib": 0,
        "context_mib": 1280,
        "running": [],
        "foreign": [],
        "reserves": [],
        "new": {"resident": 10, "gpus": 1, "exclusive": False, "engine": 0, "redeploy": None},
    }
    new = changes.pop("new", {})
    base.update(changes)
    base["new"].update(new)
    return base


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
# An exclusive seat whose own process is already on the card: that card is not occupied for it.
@example(case_of(new={"exclusive": True, "redeploy": (0, 10)}))
# A redeploy: its own observed bytes are freed first (70 GiB on a 79 GiB card holding 40 GiB of it).
@example(case_of(new={"resident": 70, "redeploy": (0, 40)}, foreign=[(1, 30)]))
# Mixed card sizes: a two-card seat on the two H200s of a host with an 80 GB-class card too;
# its util covers the cards it is put on, not the host's smallest.
@example(case_of(kinds=[0, 1, 1], new={"resident": 100, "gpus": 2, "engine": 4}))
# Every card held whole for the seat itself: the model's largest hole is negative, not infeasible.
@example(
    case_of(margin_mib=256, new={"resident": 3}, reserves=[(0, "card", "new"), (1, "card", "new")])
)
def test_pruning_and_placers_are_never_stricter_than_the_verifier(case: dict[str, Any]) -> None:
    assert_never_stricter(case)
