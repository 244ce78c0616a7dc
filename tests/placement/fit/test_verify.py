"""The verifier on fv-ml1 (the operators' log) and on each rule of DESIGN.md "What fits means"."""

from __future__ import annotations

from typing import Any

import pytest

from inventory.attribution import attribute
from inventory.snapshot import Snapshot
from placement.cli.notes_text import note_texts
from placement.cli.reasons_text import reason_text
from placement.fit.verify import Placement, judge, verify_placement
from seats.model import Catalogue, Seat
from seats.units import GiB, MiB

CUDA_TOTAL = 101_972_967_424


@pytest.fixture
def snap(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> Snapshot:
    return attribute(fv_ml1_snapshot, fv_ml1)


@pytest.fixture
def before(fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot) -> Snapshot:
    return attribute(fv_ml1_before_voices, fv_ml1)


def seat(name: str, resident: str, **extra: Any) -> Seat:
    return Seat.model_validate({"name": name, "resident": resident, **extra})


def vllm(name: str, resident: str, **engine: Any) -> Seat:
    return seat(name, resident, engine={"kind": "vllm", "version": "0.11.0", **engine})


def rules(verdict: Any) -> list[tuple[str, int | None]]:
    return [(reason.rule, reason.card) for reason in verdict.reasons]


def test_flash_next_fits_card_3_only(fv_ml1: Catalogue, snap: Snapshot) -> None:
    flash = fv_ml1.seat("flash-next")
    verdict = judge(fv_ml1, snap, flash, [3])
    assert verdict.passed
    # util proposed so that request + context covers 93 GiB.
    assert verdict.flags[:2] == ("--gpu-memory-utilization", "0.968")
    for card in (0, 1, 2):
        assert not judge(fv_ml1, snap, flash, [card]).passed


def test_nothing_else_may_use_card_3(fv_ml1: Catalogue, snap: Snapshot) -> None:
    verdict = judge(fv_ml1, snap, seat("tiny", "1 GiB"), [3])
    assert rules(verdict) == [("reserve", 3)]
    assert note_texts(verdict.nearest) == ["release flash-next-hold"]


def test_4gib_other_fits_card_1(fv_ml1: Catalogue, snap: Snapshot) -> None:
    verdict = judge(fv_ml1, snap, seat("new-4gib", "4 GiB"), [1])
    assert verdict.passed
    assert verdict.flags == ()


def test_6gib_refused_card_1_short_696_mib(fv_ml1: Catalogue, snap: Snapshot) -> None:
    six = seat("new-6gib", "6 GiB")
    verdict = judge(fv_ml1, snap, six, [1])
    assert rules(verdict) == [("room", 1)]
    reason = verdict.reasons[0]
    # 5,704 MiB free − 256 MiB margin = 5,448 MiB room; 6,144 − 5,448 = 696 MiB short.
    assert reason.room_bytes == 5_448 * MiB
    assert reason.need_bytes == 6 * GiB
    assert reason.short_bytes == 696 * MiB
    assert "free 696.00 MiB on card 1" in note_texts(verdict.nearest)
    shorts = {c: judge(fv_ml1, snap, six, [c]).reasons[0].short_bytes for c in (0, 2)}
    assert all(short is not None and short > 696 * MiB for short in shorts.values())
    assert rules(judge(fv_ml1, snap, six, [3])) == [("reserve", 3)]


def test_5gib_vllm_with_kv_gets_largest_passing_util_and_a_warning(
    fv_ml1: Catalogue, snap: Snapshot
) -> None:
    five = vllm("new-5gib-vllm", "5 GiB", kv_cache_memory="1 GiB")
    verdict = judge(fv_ml1, snap, five, [1])
    assert verdict.passed
    assert verdict.util == "0.046"
    assert verdict.flags == (
        "--gpu-memory-utilization",
        "0.046",
        "--kv-cache-memory-bytes",
        str(GiB),
    )
    assert any(
        "no longer covers the whole seat" in warning for warning in note_texts(verdict.warnings)
    )


def test_vllm_with_kv_where_gate_covers_gets_covering_util(
    fv_ml1: Catalogue, snap: Snapshot
) -> None:
    three = vllm("three", "3 GiB", kv_cache_memory="1 GiB")
    verdict = judge(fv_ml1, snap, three, [1])
    assert verdict.passed
    # smallest 3-decimal util with ceil(util × 94.97 GiB) ≥ 3 GiB is 0.032.
    assert verdict.util == "0.032"
    assert not note_texts(verdict.warnings)


def test_before_voices_gate_refuses_012_and_passes_011(fv_ml1: Catalogue, before: Snapshot) -> None:
    voices = fv_ml1.seat("vllm-voices")
    refused = judge(fv_ml1, before, voices, [0], mode="check", util=0.12)
    assert refused.verdict == "refuse"
    assert rules(refused) == [("gate", 0)]
    gate = refused.reasons[0]
    assert gate.room_bytes == (12_611 - 1_183) * MiB
    assert gate.need_bytes == 12_236_756_091  # ceil(0.12 × 101,972,967,424)
    assert "11.16 GiB" in reason_text(gate) and "11.40 GiB" in reason_text(gate)
    assert "fits on card 0 with util ≤ 0.117" in note_texts(refused.nearest)
    passed = judge(fv_ml1, before, voices, [0], mode="check")
    assert passed.passed
    assert passed.flags[:2] == ("--gpu-memory-utilization", "0.11")


def test_check_of_a_running_seat_frees_its_own_bytes(fv_ml1: Catalogue, snap: Snapshot) -> None:
    # vllm-voices runs on card 0 (1,871 MiB free): a redeploy check counts its own 10,740 MiB back.
    assert judge(fv_ml1, snap, fv_ml1.seat("vllm-voices"), [0], mode="check").passed


def test_others_count_as_if_started_last(fv_ml1: Catalogue, snap: Snapshot) -> None:
    three_a, three_b = seat("a", "3 GiB"), seat("b", "3 GiB")
    alone = judge(fv_ml1, snap, three_a, [1])
    assert alone.passed
    beside = judge(fv_ml1, snap, three_b, [1], others=[Placement(three_a, "fv-ml1", (1,))])
    assert rules(beside) == [("room", 1)]
    assert beside.reasons[0].room_bytes == 5_448 * MiB - 3 * GiB


def test_gate_counts_other_new_seats_but_not_margin(fv_ml1: Catalogue, snap: Snapshot) -> None:
    # card 1: 5,704 MiB free; the gate reads 5,704 − 1,183 = 4,521 MiB.
    one = seat("one", "1 GiB")
    gated = vllm("g", "1 GiB", gpu_memory_utilization=0.045, kv_cache_memory="512 MiB")
    alone = judge(fv_ml1, snap, gated, [1])
    assert alone.passed  # 0.045 × 94.97 GiB = 4.27 GiB ≤ 4.41 GiB
    beside = judge(fv_ml1, snap, gated, [1], others=[Placement(one, "fv-ml1", (1,))])
    assert rules(beside) == [("gate", 1)]
    assert beside.reasons[0].room_bytes == (5_704 - 1_183) * MiB - GiB


def test_reserve_consumed_by_its_own_seat_is_not_counted_twice(
    fv_ml1: Catalogue, snap: Snapshot
) -> None:
    # flash-next-hold as 50 GiB (not the whole card), its seat a 40 GiB non-exclusive one.
    flash = seat("flash-next", "40 GiB", host="fv-ml1")
    hold = fv_ml1.reserves[0].model_copy(update={"amount_bytes": 50 * GiB})
    catalogue = fv_ml1.model_copy(
        update={
            "seats": tuple(s if s.name != "flash-next" else flash for s in fv_ml1.seats),
            "reserves": (hold,),
        }
    )
    small = seat("small", "1 GiB")
    verdict = judge(catalogue, snap, small, [3], others=[Placement(flash, "fv-ml1", (3,))])
    assert verdict.passed
    figures = verdict.figures[0]
    # held = 50 − 40 GiB: the part flash-next does not consume; others = flash-next's 40 GiB.
    assert figures.held_bytes == 10 * GiB
    assert figures.others_bytes == 40 * GiB
    assert figures.room_bytes == CUDA_TOTAL - 10 * GiB - 256 * MiB - 40 * GiB
    # Without flash-next placed, the whole 50 GiB is held.
    assert judge(catalogue, snap, small, [3]).figures[0].held_bytes == 50 * GiB


def test_exclusive_refuses_shared_cards(fv_ml1: Catalogue, snap: Snapshot) -> None:
    flash = fv_ml1.seat("flash-next")
    verdict = judge(
        fv_ml1, snap, flash, [3], others=[Placement(seat("x", "1 GiB"), "fv-ml1", (3,))]
    )
    assert ("exclusive", 3) in rules(verdict)
    # and a seat beside an exclusive one is refused too
    neighbour = judge(
        fv_ml1, snap, seat("x", "1 GiB"), [3], others=[Placement(flash, "fv-ml1", (3,))]
    )
    assert ("exclusive", 3) in rules(neighbour)


def test_unbounded_refused_on_a_shared_card(fv_ml1: Catalogue, snap: Snapshot) -> None:
    wild = seat("wild", "1 GiB", engine={"kind": "vllm", "version": "0.34.0"})
    verdict = judge(fv_ml1, snap, wild, [1], mode="check")
    assert ("unbounded", 1) in rules(verdict)
    assert verdict.flags == ()
    # plan proposes bounding flags instead
    planned = judge(fv_ml1, snap, wild, [1], mode="plan")
    assert planned.passed
    assert planned.flags[0] == "--gpu-memory-utilization"
    assert any("unbounded" in warning for warning in note_texts(planned.warnings))


def test_a_seat_beside_an_unbounded_new_seat_is_refused_in_check_only(
    fv_ml1: Catalogue, snap: Snapshot
) -> None:
    # The judge itself says it (a hold or another service of the deploy alike): whichever starts
    # second finds the card taken. The plan proposes the unbounded seat a util: nothing to say.
    wild = Placement(
        seat("wild", "1 GiB", engine={"kind": "vllm", "version": "0.34.0"}), "fv-ml1", (1,)
    )
    small = vllm("small", "1 GiB", kv_cache_memory="256 MiB")
    checked = judge(fv_ml1, snap, small, [1], others=[wild], mode="check")
    assert ("unbounded", 1) in rules(checked) and not checked.passed
    (reason,) = [r for r in checked.reasons if r.rule == "unbounded"]
    assert reason_text(reason).startswith("wild beside it on card 1 is unbounded")
    assert "unbounded" not in [
        r for r, _ in rules(judge(fv_ml1, snap, small, [2], others=[wild], mode="check"))
    ]
    assert "unbounded" not in [
        r for r, _ in rules(judge(fv_ml1, snap, small, [1], others=[wild], mode="plan"))
    ]


def test_unbounded_exclusive_on_an_empty_card_passes(fv_ml1: Catalogue, snap: Snapshot) -> None:
    wild = seat("flash-next", "1 GiB", exclusive=True, engine={"kind": "vllm", "version": "0.34.0"})
    assert judge(fv_ml1, snap, wild, [3], mode="check").passed


def test_card_in_error(fv_ml1: Catalogue, snap: Snapshot) -> None:
    cards = list(snap.cards)
    cards[1] = cards[1].model_copy(
        update={
            "error": "GpuIsLost",
            "total_bytes": None,
            "reserved_bytes": None,
            "used_bytes": None,
            "free_bytes": None,
            "processes": (),
        }
    )
    broken = snap.model_copy(update={"cards": tuple(cards)})
    planned = judge(fv_ml1, broken, seat("x", "1 GiB"), [1])
    assert planned.verdict == "refuse" and rules(planned) == [("error", 1)]
    checked = judge(fv_ml1, broken, seat("x", "1 GiB"), [1], mode="check")
    assert checked.verdict == "unknown"


def test_host_rules(fv_ml1: Catalogue, snap: Snapshot) -> None:
    elsewhere = seat("x", "1 GiB", host="fv-ml2")
    assert ("host", None) in rules(judge(fv_ml1, snap, elsewhere, [1]))
    assert ("host", 9) in rules(judge(fv_ml1, snap, seat("x", "1 GiB"), [9]))
    assert ("host", None) in rules(judge(fv_ml1, snap, seat("x", "1 GiB", gpus=2), [1]))


def test_absent_seat_keeps_its_place(fv_ml1: Catalogue, snap: Snapshot) -> None:
    cards = list(snap.cards)
    # embed's process on card 1 is gone: its 30,105 MiB show as free but stay held.
    cards[1] = cards[1].model_copy(
        update={
            "processes": cards[1].processes[:1],
            "free_bytes": (cards[1].free_bytes or 0) + 30_105 * MiB,
        }
    )
    down = snap.model_copy(update={"cards": tuple(cards)})
    verdict = judge(fv_ml1, down, seat("new-6gib", "6 GiB"), [1])
    assert rules(verdict) == [("room", 1)]
    assert verdict.reasons[0].room_bytes == 5_448 * MiB


def test_nvml_v1_card_warns(fv_ml1: Catalogue, snap: Snapshot) -> None:
    cards = list(snap.cards)
    cards[1] = cards[1].model_copy(update={"reserved_bytes": None})
    v1 = snap.model_copy(update={"cards": tuple(cards)})
    verdict = judge(fv_ml1, v1, seat("x", "1 GiB"), [1])
    assert any("NVML v1" in warning for warning in note_texts(verdict.warnings))


def test_need_without_kv_grows_with_declared_util(fv_ml1: Catalogue, snap: Snapshot) -> None:
    greedy = vllm("greedy", "1 GiB", gpu_memory_utilization=0.1)
    verdict = judge(fv_ml1, snap, greedy, [1])
    # 0.1 × 94.97 GiB + 1,183 MiB context ≈ 10.65 GiB > 5,448 MiB room
    assert ("room", 1) in rules(verdict)
    assert any(
        text.startswith("fits on card 1 with util ≤") for text in note_texts(verdict.nearest)
    )


def test_lower_kv_is_suggested_when_kv_is_pinned(fv_ml1: Catalogue, snap: Snapshot) -> None:
    big = vllm("big", "6 GiB", gpu_memory_utilization=0.04, kv_cache_memory="2 GiB")
    verdict = judge(fv_ml1, snap, big, [1])
    assert "lower kv_cache_memory by 696.00 MiB (card 1)" in note_texts(verdict.nearest)


def test_verify_placement_judges_each_as_last(fv_ml1: Catalogue, snap: Snapshot) -> None:
    a, b = seat("a", "2 GiB"), seat("b", "2 GiB")
    good = verify_placement(
        fv_ml1, [snap], [Placement(a, "fv-ml1", (1,)), Placement(b, "fv-ml1", (1,))]
    )
    assert [v.seat for v in good] == ["a", "b"] and all(v.passed for v in good)
    c = seat("c", "2 GiB")
    bad = verify_placement(
        fv_ml1,
        [snap],
        [Placement(x, "fv-ml1", (1,)) for x in (a, b, c)],
    )
    assert [v.seat for v in bad] == ["a", "b", "c"] and not any(v.passed for v in bad)


def test_seat_larger_than_any_card_says_so(fv_ml1: Catalogue, snap: Snapshot) -> None:
    verdict = judge(fv_ml1, snap, seat("huge", "100 GiB"), [3])
    assert note_texts(verdict.nearest) == [
        "100.00 GiB is more than a card of 94.97 GiB CUDA total holds"
    ]


def test_vllm_034_with_a_util_and_no_kv_pin_has_no_gate_and_is_refused_by_room(
    fv_ml1: Catalogue, before: Snapshot
) -> None:
    # The seed's card 0 before the voices seat (held for it, as it is declared and down).
    old = vllm("v33", "1 GiB", version="0.33.0", gpu_memory_utilization=0.12)
    assert rules(judge(fv_ml1, before, old, [0], mode="check")) == [("room", 0), ("gate", 0)]

    new = vllm("v34", "1 GiB", version="0.34.0", gpu_memory_utilization=0.12)
    verdict = judge(fv_ml1, before, new, [0], mode="check")
    assert rules(verdict) == [("room", 0)]  # no gate: vLLM 0.34 never checks it
    room = verdict.reasons[0]
    assert room.need_bytes == 12_236_756_091 + 1_183 * MiB  # the util caps, plus its context
    assert "vLLM 0.34.0 would not refuse it" in reason_text(room)
    assert "it would start and take about" in reason_text(room) and "squeezing" in reason_text(room)
    assert verdict.figures[0].requested_bytes is None
    assert not any("gate" in text for text in note_texts(verdict.nearest))
    assert any("fits on card 0 with util ≤" in text for text in note_texts(verdict.nearest))
    assert any("would not refuse v34" in w and "by room" in w for w in note_texts(verdict.warnings))
    # The util hint is the room's alone, and it passes.
    limit = next(t for t in note_texts(verdict.nearest) if "util ≤" in t).rsplit(" ", 1)[1]
    assert judge(fv_ml1, before, new, [0], mode="check", util=float(limit)).passed
