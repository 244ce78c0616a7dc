"""`plan --allow-moves`: several moves combined, a safe stop/start order or none, priority kept."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inventory.attribution import attribute
from inventory.snapshot import Snapshot
from placement.cli.main import main
from placement.fit.verify import Placement, judge
from placement.plan.planner import PlanResult, plan
from placement.plan.problem import load_add_file
from seats.model import Catalogue, Seat
from seats.units import GiB
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT, ROOT

TAKEN = datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)
TOTAL = 16 * GiB
EXAMPLES = ROOT / "examples"
TWO_SEATS = ROOT / "tests" / "placement" / "data" / "moves-two-seats.yaml"


def host(
    free: list[int], running: dict[str, tuple[int, int]], **extra: Any
) -> tuple[Catalogue, Snapshot]:
    """Host h: card i has free[i] bytes free; running[name] = (card, bytes) is a seat there."""
    cards = []
    for index, room in enumerate(free):
        processes = [
            {"pid": 100 + n, "used_bytes": size, "cmdline": f"serve-{name}"}
            for n, (name, (card, size)) in enumerate(running.items())
            if card == index
        ]
        cards.append(
            {
                "index": index,
                "total_bytes": TOTAL,
                "reserved_bytes": 0,
                "used_bytes": TOTAL - room,
                "free_bytes": room,
                "processes": processes,
            }
        )
    seats = [
        {
            "name": name,
            "host": "h",
            "gpus": [card],
            "resident": size,
            "state": "running",
            "match": f"serve-{name}$",
        }
        for name, (card, size) in running.items()
    ]
    catalogue = Catalogue.model_validate(
        {
            "hosts": {"h": {"cards": len(free), "margin": 0, "cuda_context": 0}},
            "seats": seats,
            **extra,
        }
    )
    snapshot = Snapshot.model_validate({"host": "h", "taken_at": TAKEN, "cards": cards})
    return catalogue, snapshot


def new(name: str, resident: int, **extra: Any) -> tuple[str, Seat]:
    return ("test", Seat.model_validate({"name": name, "resident": resident, **extra}))


def placed(result: PlanResult) -> dict[str, tuple[int, ...]]:
    return {v.seat: v.cards for v in result.verdicts if v.passed}


def replay(
    catalogue: Catalogue, snapshot: Snapshot, adds: list[tuple[str, Seat]], result: PlanResult
) -> list[str]:
    """Walk the steps on plain per-card byte counts, judging every start independently.

    Returns "seat:card" per start; fails the test when a start does not pass or a moved seat
    is not restarted right after its stop.
    """
    snapshot = attribute(snapshot, catalogue)
    added = {s.name: s for _, s in adds}
    free = {c.index: c.free_bytes or 0 for c in snapshot.cards}
    procs = {c.index: list(c.processes) for c in snapshot.cards}
    where = {s.name: s.pinned_cards[0] for s in catalogue.seats if s.pinned_cards}
    started: list[Placement] = []
    out: list[str] = []
    down: str | None = None
    for step in result.moves:
        name, card = step["seat"], step["cards"][0]
        if step["action"] == "stop":
            assert down is None, "one seat down at a time"
            assert where[name] == card
            mine = [p for p in procs[card] if p.seat == name]
            procs[card] = [p for p in procs[card] if p not in mine]
            free[card] += sum(p.used_bytes or 0 for p in mine)
            down, parked = name, mine
            continue
        seats = tuple(
            s.model_copy(update={"gpus": (where[s.name] if s.name != down else card,)})
            if s.name in where
            else s
            for s in catalogue.seats
        )
        state_catalogue = catalogue.model_copy(update={"seats": seats})
        cards = tuple(
            c.model_copy(update={"free_bytes": free[c.index], "processes": tuple(procs[c.index])})
            for c in snapshot.cards
        )
        state = snapshot.model_copy(update={"cards": cards})
        seat = added[name] if name in added else state_catalogue.seat(name)
        verdict = judge(state_catalogue, state, seat, [card], others=started)
        assert verdict.passed, f"step start {name} on card {card}: {verdict.reasons}"
        assert step["need_bytes"] == verdict.need_bytes
        if name == down:
            where[name] = card
            procs[card].extend(parked)
            free[card] -= sum(p.used_bytes or 0 for p in parked)
            down = None
        else:
            started.append(Placement(seat, step["host"], (card,)))
        out.append(f"{name}:{card}")
    assert down is None, "a stopped seat is restarted"
    return out


def run_plan(
    catalogue: Catalogue, snapshot: Snapshot, adds: list[tuple[str, Seat]], **kwargs: Any
) -> PlanResult:
    return plan(catalogue, [snapshot], adds, allow_moves=True, **kwargs)


def two_moves() -> tuple[Catalogue, Snapshot]:
    # card 0: a (4 GiB) leaves room 8; big (12 GiB) needs a gone. a fits neither card 2
    # (3.5 free) nor card 1 (2 free) — unless b (3 GiB) first moves from card 1 to card 2.
    return host([8 * GiB, 2 * GiB, 7 * GiB // 2], {"a": (0, 4 * GiB), "b": (1, 3 * GiB)})


def test_two_moves_where_one_is_not_enough() -> None:
    catalogue, snapshot = two_moves()
    adds = [new("big", 12 * GiB)]
    one = run_plan(catalogue, snapshot, adds, max_moves=1)
    assert one.verdict == "refuse" and one.moves == ()
    assert one.moves_note is not None and "up to 1 move(s)" in one.moves_note
    result = run_plan(catalogue, snapshot, adds)
    assert result.verdict == "pass"
    assert placed(result) == {"big": (0,)}
    assert [(m["action"], m["seat"], m["cards"]) for m in result.moves] == [
        ("stop", "b", [1]),
        ("start", "b", [2]),
        ("stop", "a", [0]),
        ("start", "a", [1]),
        ("start", "big", [0]),
    ]
    assert replay(catalogue, snapshot, adds, result) == ["b:2", "a:1", "big:0"]
    assert result.moves_note is not None and result.moves_note.startswith("2 move(s)")
    # The after-table is the moved state: card 0 holds big in a's place, card 2 holds b.
    rows = {row.index: row for row in result.cards}
    assert rows[0].free_before_bytes == 8 * GiB
    assert rows[0].free_after_bytes == 0
    assert rows[0].new_seats == ("big",)
    assert rows[2].free_after_bytes == GiB // 2
    assert "b" in rows[2].seats and "a" in rows[1].seats


def test_fewest_moves_are_preferred() -> None:
    # One move (a to card 2, 5 GiB free) is enough here; two are never proposed.
    catalogue, snapshot = host([8 * GiB, 2 * GiB, 5 * GiB], {"a": (0, 4 * GiB), "b": (1, 3 * GiB)})
    adds = [new("big", 12 * GiB)]
    result = run_plan(catalogue, snapshot, adds)
    assert result.verdict == "pass"
    assert [(m["action"], m["seat"]) for m in result.moves] == [
        ("stop", "a"),
        ("start", "a"),
        ("start", "big"),
    ]
    assert replay(catalogue, snapshot, adds, result) == ["a:2", "big:0"]


def test_swap_without_a_safe_order_is_refused_and_said() -> None:
    # a (8 GiB, card 0) and b (4 GiB, card 1) swapped would leave 7 GiB on card 0 for the
    # 6 GiB seat, but a cannot start on card 1 (5 free) while b is there, nor b on card 0
    # (3 free) while a is there: with one seat down at a time, no order reaches the swap.
    catalogue, snapshot = host([3 * GiB, 5 * GiB], {"a": (0, 8 * GiB), "b": (1, 4 * GiB)})
    result = run_plan(catalogue, snapshot, [new("six", 6 * GiB)])
    assert result.verdict == "refuse"
    assert result.moves == ()
    note = result.moves_note or ""
    assert "b card 1 → 0 and a card 0 → 1 would place six" in note
    assert "no such order exists" in note


def test_a_move_never_trades_a_placed_seat_for_one_of_equal_priority() -> None:
    # Moving a (4 GiB) to card 1 makes room for y (9 GiB) on card 0 but takes x's room on
    # card 1: one seat for another is no gain, so no move, and x stays placed.
    catalogue, snapshot = host([6 * GiB, 5 * GiB], {"a": (0, 4 * GiB)})
    adds = [new("x", 5 * GiB), new("y", 9 * GiB)]
    result = run_plan(catalogue, snapshot, adds)
    assert result.moves == ()
    assert set(placed(result)) == {"x"}
    # With y first by priority, the move is worth x (strict priority), and every step passes.
    adds = [new("x", 5 * GiB), new("y", 9 * GiB, priority=1)]
    result = run_plan(catalogue, snapshot, adds)
    assert set(placed(result)) == {"y"}
    assert replay(catalogue, snapshot, adds, result) == ["a:1", "y:0"]


def test_moved_seats_are_always_restarted() -> None:
    # Every stop in every plan here is followed by that seat's start (replay checks it) and
    # every running seat is still declared somewhere in the after-table.
    catalogue, snapshot = two_moves()
    adds = [new("big", 12 * GiB), new("small", GiB // 2)]
    result = run_plan(catalogue, snapshot, adds)
    assert result.verdict == "pass"
    replay(catalogue, snapshot, adds, result)
    declared = {name for row in result.cards for name in (*row.seats, *row.new_seats)}
    assert {"a", "b", "big", "small"} <= declared


@pytest.mark.slow
def test_search_is_bounded_and_says_so() -> None:
    # 64 small seats on 8 cards: thousands of two-move sets free 1.5 GiB on a card, but the
    # exclusive seat needs an empty card, so none helps and the search meets its time limit.
    running = {f"s{i}": (i % 8, GiB // 4) for i in range(64)}
    catalogue, snapshot = host([GiB] * 8, running)
    adds = [new("whole", 3 * GiB // 2, exclusive=True)]
    result = run_plan(catalogue, snapshot, adds, time_limit=0.5)
    assert result.verdict == "refuse" and result.moves == ()
    note = result.moves_note or ""
    assert "the search stopped when the plan's time limit ran out" in note
    assert "fewer or better moves may exist" in note


def test_cli_moves_json(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    catalogue, snapshot = two_moves()
    cat_path, snap_path, add_path = (
        tmp_path / "c.json",
        tmp_path / "s.json",
        tmp_path / "big.yaml",
    )
    cat_path.write_text(json.dumps(catalogue.model_dump(mode="json", by_alias=True)))
    snap_path.write_text(json.dumps(snapshot.to_json_dict()))
    add_path.write_text("name: big\nresident: 12 GiB\n")
    base = ["plan", "--catalogue", str(cat_path), "--snapshot", str(snap_path), "--add"]
    code = main([*base, str(add_path), "--allow-moves", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["schema"] == 1 and data["verdict"] == "pass"
    assert [(m["action"], m["seat"], m["host"], m["cards"]) for m in data["moves"]] == [
        ("stop", "b", "h", [1]),
        ("start", "b", "h", [2]),
        ("stop", "a", "h", [0]),
        ("start", "a", "h", [1]),
        ("start", "big", "h", [0]),
    ]
    assert all(isinstance(m["need_bytes"], int) for m in data["moves"] if m["action"] == "start")
    assert data["moves_note"].startswith("2 move(s)")
    code = main([*base, str(add_path), "--allow-moves", "--max-moves", "1"])
    out = capsys.readouterr().out
    assert code == 1
    assert "moves: no set of up to 1 move(s)" in out
    assert main([*base, str(add_path), "--allow-moves", "--max-moves", "0"]) == 2
    assert "--max-moves must be at least 1" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_fv_ml1_6gib_no_move_helps(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "plan",
            "--catalogue",
            str(FV_ML1_CATALOGUE),
            "--snapshot",
            str(FV_ML1_SNAPSHOT),
            "--add",
            str(EXAMPLES / "new-6gib.yaml"),
            "--allow-moves",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert data["moves"] == []
    assert "no such order exists" in data["moves_note"]
    assert {s["seat"]: s["verdict"] for s in data["seats"]} == {
        "flash-next": "pass",
        "new-6gib": "refuse",
    }


def test_fv_ml1_parakeet_moves_so_two_seats_fit(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    # Card 1 takes the 5 GiB seat; 2,200 MiB is 60 MiB more than card 2's room and more than
    # card 0's 1.58 GiB, until parakeet-stt (638 MiB) restarts on card 2.
    adds = [(str(TWO_SEATS), s) for s in load_add_file(TWO_SEATS)]
    without = plan(fv_ml1, [fv_ml1_snapshot], adds)
    assert without.verdict == "refuse"
    result = plan(fv_ml1, [fv_ml1_snapshot], adds, allow_moves=True)
    assert result.verdict == "pass"
    assert placed(result) == {"flash-next": (3,), "new-5gib": (1,), "new-2200mib": (0,)}
    assert [(m["action"], m["seat"], m["cards"]) for m in result.moves[:2]] == [
        ("stop", "parakeet-stt", [0]),
        ("start", "parakeet-stt", [2]),
    ]
    assert replay(fv_ml1, fv_ml1_snapshot, adds, result) == [
        "parakeet-stt:2",
        "flash-next:3",
        "new-2200mib:0",
        "new-5gib:1",
    ]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    free=st.lists(st.integers(0, 8), min_size=2, max_size=3),
    running=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 6)), min_size=1, max_size=4),
    wanted=st.lists(st.tuples(st.integers(1, 12), st.integers(0, 1)), min_size=1, max_size=2),
)
@pytest.mark.slow
def test_every_plan_with_moves_replays_and_never_loses_by_priority(
    free: list[int], running: list[tuple[int, int]], wanted: list[tuple[int, int]]
) -> None:
    seats = {f"r{i}": (card % len(free), size * GiB) for i, (card, size) in enumerate(running)}
    catalogue, snapshot = host([f * GiB for f in free], seats)
    adds = [new(f"n{i}", size * GiB, priority=p) for i, (size, p) in enumerate(wanted)]
    without = plan(catalogue, [snapshot], adds)
    result = run_plan(catalogue, snapshot, adds, max_moves=2)

    def score(r: PlanResult) -> tuple[int, int]:
        names = set(placed(r))
        high, low = (
            sum(1 for _, s in adds if s.priority == level and s.name in names) for level in (1, 0)
        )
        return high, low

    assert score(result) >= score(without)
    if result.moves:
        assert score(result) > score(without)
        starts = replay(catalogue, snapshot, adds, result)
        assert set(placed(result)) <= {s.split(":")[0] for s in starts}
    else:
        assert placed(result) == placed(without)
