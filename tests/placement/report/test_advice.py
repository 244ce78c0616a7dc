"""The headline's advice rules, one at a time and in their order, on rows built by hand."""

from __future__ import annotations

from typing import Any

import pytest

from placement.report.advice import (
    RULES,
    HostFacts,
    advice,
    down_now,
    drift_advice,
    no_room_for_a_gib,
    reserves_text,
)
from placement.report.rows import CardFit, CardRow, MissingSeat, ReserveRow, SeatRow
from seats.loader import parse_catalogue
from seats.model import Catalogue
from seats.units import GiB, MiB

CATALOGUE: dict[str, Any] = {
    "hosts": {"h1": {"cards": 2}},
    "seats": [
        {"name": "plain", "host": "h1", "gpus": [0], "resident": 10 * GiB, "state": "running"},
        {
            "name": "vl",
            "host": "h1",
            "gpus": [1],
            "resident": 20 * GiB,
            "state": "running",
            "engine": {"kind": "vllm", "version": "0.11.0"},
        },
    ],
}


@pytest.fixture
def catalogue() -> Catalogue:
    return parse_catalogue(CATALOGUE, "advice.yaml")


def facts(catalogue: Catalogue, **rows: Any) -> HostFacts:
    empty: dict[str, Any] = {
        "fits": (),
        "cards": (),
        "seats": (),
        "missing": (),
        "absent_now": (),
        "reserves": (),
        "decisions": (),
        "loras": (),
    }
    return HostFacts(host="h1", catalogue=catalogue, **(empty | rows))


def reserve(violations: int = 0, now: bool = False) -> ReserveRow:
    return ReserveRow(
        name="hold",
        host="h1",
        card=1,
        for_seats=("big",),
        reserve_bytes=None,
        violations=violations,
        first_at="2026-09-14T08:00:00Z" if violations else None,
        last_at="2026-09-14T09:00:00Z" if violations else None,
        worst_bytes=GiB if violations else None,
        worst_at="2026-09-14T08:30:00Z" if violations else None,
        holders=("python notebook.py (1.00 GiB)",) if violations else (),
        violated_now=now,
    )


def card(unexplained_now: int | None) -> CardRow:
    return CardRow(
        host="h1",
        card=0,
        uuid=None,
        samples=10,
        error_samples=0,
        total_bytes=None,
        reserved_bytes=None,
        declared_bytes=0,
        held_bytes=0,
        used_p50_bytes=None,
        used_p95_bytes=None,
        used_max_bytes=None,
        min_free_bytes=None,
        min_free_at=None,
        unexplained_now_bytes=unexplained_now,
        unexplained_max_bytes=None,
        unexplained_max_at=None,
        free_now_bytes=None,
        plannable_now_bytes=0,
        nvml_v1=False,
    )


def seat(name: str, drift: int, *, flagged: bool, growth: int | None = None) -> SeatRow:
    declared = 10 * GiB
    return SeatRow(
        seat=name,
        host="h1",
        card=0,
        declared_bytes=declared,
        samples=10,
        p50_bytes=declared + drift,
        p95_bytes=declared + drift,
        max_bytes=declared + drift,
        drift_bytes=drift,
        drift_percent=None,
        flagged=flagged,
        first_p50_bytes=None,
        last_p50_bytes=None,
        growth_bytes=growth,
        grew=growth is not None and growth > 0,
    )


def fit(largest: int) -> CardFit:
    return CardFit(0, largest, largest, None, "room")


def test_each_rule_speaks_in_order_of_urgency(catalogue: Catalogue) -> None:
    said = advice(
        facts(
            catalogue,
            reserves=(reserve(3, now=True),),
            cards=(card(2 * GiB),),
            seats=(seat("small", GiB, flagged=True), seat("big", -3 * GiB, flagged=True)),
            fits=(fit(512 * MiB),),
        )
    )
    assert [s.split(" ")[0] for s in said] == ["free", "card", "big", "small", "no"]
    assert said[0] == (
        "free card 1: python notebook.py (1.00 GiB) holds memory held for big (hold)"
    )
    # The larger drift first; a seat holding less is told to lower its resident.
    assert said[2].endswith("lower its declared resident to free plannable room")


def test_a_quiet_host_has_nothing_to_act_on(catalogue: Catalogue) -> None:
    assert advice(facts(catalogue, cards=(card(0),), fits=(fit(5 * GiB),))) == []
    assert len(RULES) == 10


def test_a_reserve_broken_earlier_is_named_after_the_present_troubles(
    catalogue: Catalogue,
) -> None:
    said = advice(facts(catalogue, reserves=(reserve(2),), cards=(card(GiB),)))
    assert said[1] == (
        "hold (card 1) was broken in 2 snapshot(s) from 2026-09-14T08:00:00Z by "
        "python notebook.py (1.00 GiB): find who used the held card"
    )


def test_a_seat_down_now_is_not_told_twice_when_missing_all_window(catalogue: Catalogue) -> None:
    gone = MissingSeat("plain", "h1", (0,), 10 * GiB, None)
    with_missing = facts(catalogue, missing=(gone,), absent_now=(("plain", 0),))
    assert down_now(with_missing, ("plain", 0)) is None
    alone = facts(catalogue, absent_now=(("plain", 0),))
    assert down_now(alone, ("plain", 0)) == "plain is down on card 0 now and still keeps its place"


def test_no_room_only_when_every_card_is_under_a_gib(catalogue: Catalogue) -> None:
    host = facts(catalogue)
    assert no_room_for_a_gib(host, ()) is None  # no probe: nothing known
    assert no_room_for_a_gib(host, (fit(GiB - 1), fit(0))) is not None
    assert no_room_for_a_gib(host, (fit(GiB - 1), fit(GiB))) is None


def test_drift_advice_by_cause(catalogue: Catalogue) -> None:
    assert drift_advice(catalogue, seat("plain", -GiB, flagged=True)).startswith("lower")
    assert drift_advice(catalogue, seat("renamed", GiB, flagged=True)) == (
        "declare it in the catalogue"
    )
    # The seed: a vLLM seat without a pinned KV cache.
    assert drift_advice(catalogue, seat("vl", GiB, flagged=True)).startswith("pin its KV cache")
    grew = drift_advice(catalogue, seat("plain", GiB, flagged=True, growth=GiB))
    assert (
        grew == "it grew +1.00 GiB in the window: look for a leak, or set its resident to the p95"
    )
    assert (
        drift_advice(catalogue, seat("plain", GiB, flagged=True)) == "set its resident to the p95"
    )


def test_reserves_text() -> None:
    assert reserves_text(()) == "no reserves on this host"
    assert reserves_text((reserve(),)) == "every reserve was honoured in every snapshot"
    assert reserves_text((reserve(), reserve(4, now=True))) == (
        "hold (card 1) broken in 4 snapshot(s), 2026-09-14T08:00:00Z – 2026-09-14T09:00:00Z, and now"
    )
