"""Each rule of what fits on its own: a card state in, a reason (with its bytes) or None out.

Figures from the seed (fv-ml1): 94.97 GiB cards, the 0.12 refusal at 11.16 GiB free, the
10,740 MiB seat, GPU 3 held whole for flash-next.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

from inventory.snapshot import Card, Snapshot
from placement.cli.reasons_text import reason_text
from placement.fit.engines import GateRule, requested_bytes
from placement.fit.room import engine_free_bytes, fits_room, reserve_left_bytes, room_bytes
from placement.fit.rules import (
    card_reasons,
    error_reason,
    exclusive_reason,
    gate_reason,
    host_reasons,
    reserve_reason,
    room_reason,
    unbounded_reason,
)
from placement.fit.state import CardState
from seats.model import Seat

MIB = 2**20
GIB = 2**30
TOTAL = int(Decimal("94.97") * GIB)  # the seed's CUDA total per card
SEAT = 10_740 * MIB  # the voices seat, resident as measured


def card(index: int = 1, *, error: str | None = None) -> Card:
    data: dict[str, object] = {"index": index}
    if error is None:
        data |= {
            "total_bytes": TOTAL,
            "reserved_bytes": 0,
            "used_bytes": TOTAL - 5_700 * MIB,
            "free_bytes": 5_700 * MIB,
        }
    else:
        data |= {"error": error}
    snapshot = Snapshot.model_validate(
        {"host": "fv-ml1", "taken_at": datetime(2026, 9, 16, tzinfo=UTC), "cards": [data]}
    )
    return snapshot.cards[0]


def state(free: int = 5_700 * MIB, **changes: object) -> CardState:
    held = int(changes.pop("held_bytes", 0))  # type: ignore[call-overload]
    base = CardState(
        card=card(),
        cuda_total_bytes=TOTAL,
        free_bytes=free,
        held_bytes=held,
        reserve_held_bytes=0,
        reserve_names=(),
        reserve_for=(),
        hold_held_bytes=0,
        hold_notes=(),
        others_bytes=0,
        margin_bytes=256 * MIB,
        cuda_context_bytes=0,
        room_bytes=room_bytes(free_bytes=free, held_bytes=held, margin_bytes=256 * MIB),
        gate_free_bytes=engine_free_bytes(free_bytes=free, cuda_context_bytes=0),
        occupants=("cyberprev",),
        exclusive_neighbours=(),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def seat(**data: object) -> Seat:
    return Seat.model_validate({"name": "voices", "resident": SEAT, **data})


def test_room_is_free_less_held_margin_and_load() -> None:
    assert room_bytes(free_bytes=100, held_bytes=30, margin_bytes=5, load_bytes=15) == 50
    assert engine_free_bytes(free_bytes=100, cuda_context_bytes=7, load_bytes=15) == 78
    assert reserve_left_bytes(reserve_bytes=TOTAL, own_bytes=93 * GIB) == TOTAL - 93 * GIB
    assert reserve_left_bytes(reserve_bytes=GIB, own_bytes=2 * GIB) == 0
    assert fits_room(50, 50)
    assert not fits_room(51, 50)


def test_the_voices_seat_does_not_fit_gpu_1_with_5_7_gib_free() -> None:
    here = state()
    reason = room_reason(need_bytes=SEAT, state=here, host="fv-ml1")
    assert reason is not None
    assert reason.rule == "room"
    assert reason.room_bytes == 5_700 * MIB - 256 * MIB
    assert reason.short_bytes == SEAT - (5_700 - 256) * MIB
    assert "256.00 MiB margin" in reason_text(reason)
    assert room_reason(need_bytes=5_444 * MIB, state=here, host="fv-ml1") is None  # equal fits


def test_the_seeds_first_bring_up_is_refused_by_the_gate() -> None:
    # "Free memory on device cuda:0 (11.16/94.97 GiB) is less than desired GPU memory
    # utilization (0.12, 11.4 GiB)".
    free = int(Decimal("11.16") * GIB)
    asked = requested_bytes(Decimal("0.12"), TOTAL)
    reason = gate_reason(
        requested_bytes=asked, util=Decimal("0.12"), state=state(free), host="fv-ml1"
    )
    assert reason is not None
    assert reason.rule == "gate"
    assert (reason.need_bytes, reason.room_bytes) == (asked, free)
    assert reason.short_bytes == asked - free
    assert "util 0.12" in reason_text(reason)
    # The util that asks no more than is free passes; no gate without a request.
    fits = requested_bytes(Decimal("0.11"), TOTAL)
    assert (
        gate_reason(requested_bytes=fits, util=Decimal("0.11"), state=state(free), host="h") is None
    )
    assert gate_reason(requested_bytes=None, util=None, state=state(free), host="h") is None


def test_a_reserve_binds_alone_when_releasing_it_would_make_room() -> None:
    # GPU 3 held whole for flash-next: releasing it would make room, so only `reserve` binds.
    held = state(
        free=TOTAL,
        held_bytes=TOTAL,
        reserve_held_bytes=TOTAL,
        reserve_names=("flash-next-hold",),
        reserve_for=("flash-next",),
    )
    reserve = reserve_reason(need_bytes=SEAT, state=held, host="fv-ml1")
    assert reserve is not None
    assert reserve.rule == "reserve"
    assert "held for flash-next (flash-next-hold)" in reason_text(reserve)
    assert room_reason(need_bytes=SEAT, state=held, host="fv-ml1") is None
    # More than the card holds even released: `room` binds too.
    both = card_reasons(
        seat=seat(),
        rule=GateRule("none", None, "none", None),
        util=None,
        state=held,
        need_bytes=TOTAL,
        requested_bytes=None,
        host="fv-ml1",
    )
    assert [r.rule for r in both] == ["reserve", "room"]
    assert reserve_reason(need_bytes=SEAT, state=state(), host="fv-ml1") is None  # nothing held


def test_exclusive_binds_either_way_round() -> None:
    mine = exclusive_reason(seat=seat(exclusive=True), state=state(), host="fv-ml1")
    assert mine is not None
    assert reason_text(mine) == "voices is exclusive; card 1 holds cyberprev"
    theirs = exclusive_reason(
        seat=seat(), state=state(exclusive_neighbours=("flash-next",)), host="fv-ml1"
    )
    assert theirs is not None
    assert reason_text(theirs) == "card 1 holds exclusive flash-next"
    assert exclusive_reason(seat=seat(), state=state(), host="fv-ml1") is None
    assert exclusive_reason(seat=seat(exclusive=True), state=state(occupants=()), host="h") is None


def test_unbounded_binds_on_a_shared_card_unless_exclusive() -> None:
    rule = GateRule("unbounded", None, "default", None)
    shared = unbounded_reason(seat=seat(), rule=rule, state=state(), host="fv-ml1")
    assert shared is not None
    assert "would take what cyberprev need" in reason_text(shared)
    assert unbounded_reason(seat=seat(exclusive=True), rule=rule, state=state(), host="h") is None
    assert unbounded_reason(seat=seat(), rule=rule, state=state(occupants=()), host="h") is None
    gated = GateRule("gated", Decimal("0.11"), "declared", None)
    assert unbounded_reason(seat=seat(), rule=gated, state=state(), host="h") is None


def test_error_and_host_rules() -> None:
    broken = error_reason(card(2, error="GpuIsLost"), "fv-ml1")
    assert broken is not None
    assert (broken.rule, broken.card) == ("error", 2)
    assert error_reason(card(), "fv-ml1") is None
    reasons = host_reasons(seat(host="fv-ml2", gpus=2), "fv-ml1", [1, 1])
    assert [r.rule for r in reasons] == ["host", "host"]
    assert reason_text(reasons[0]) == "voices names host fv-ml2, not fv-ml1"
    assert reason_text(reasons[1]) == "card list [1, 1] names a card twice"
    assert host_reasons(seat(), "fv-ml1", [1]) == []
    assert [reason_text(r) for r in host_reasons(seat(), "fv-ml1", [0, 1])] == [
        "voices takes 1 card(s); 2 given"
    ]
