"""A daily fleet of 64 × 8 cards planned whole: `plan --json` and `plan()`'s answer stay byte for
byte what they were before the card models were built in one pass over the snapshots.

The goldens under tests/placement/golden/ were written by the code before that change (a
`GPUPLAN_WRITE_GOLDEN=1` run). The fleet is `bench.bench_plan.synthetic_fleet` with what the
fast paths must not skip: reserves (idle, in use, for a new seat), a running seat that is down,
processes no catalogue seat explains (one an added seat's), a card in error, and ledger holds.
"""

from __future__ import annotations

import gc
import json
import os
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.bench_plan import synthetic_fleet
from inventory.attribution import attribute
from inventory.holds import Hold
from inventory.snapshot import Snapshot, save_snapshot, with_holds
from placement.cli.main import main
from placement.cli.notes_text import worded_notes
from placement.fit.card import CardModel, FleetCards, card_model
from placement.fit.verify import card_catalogues, card_views, host_catalogues, host_views
from placement.plan.planner import plan
from placement.plan.problem import FEW_COLLECTIONS, few_collections
from seats.model import Catalogue, Seat

GIB = 2**30
GOLDEN = Path(__file__).resolve().parent.parent / "golden"
WRITE = os.environ.get("GPUPLAN_WRITE_GOLDEN") == "1"
MADE = datetime(2026, 9, 16, 13, 50, tzinfo=UTC)


def daily_fleet() -> tuple[Catalogue, list[Snapshot], list[tuple[str, Seat]]]:
    """64 × 8 cards, 300 running seats, 24 new ones, and the states a card model may be in."""
    catalogue, snapshots, adds = synthetic_fleet(64, 8, 300, 24, seed=35)
    data = catalogue.model_dump(mode="json", by_alias=True)
    seats = data["seats"]
    on = {(s["host"], s["gpus"][0]): s["name"] for s in seats}
    data["reserves"] = [
        # Idle: nothing it is for runs here (it blocks every other seat).
        {"name": "idle-r", "host": "h03", "gpu": 1, "bytes": 6 * GIB, "for": ["later"]},
        # In use: its own running seat consumes part of it.
        {"name": "used-r", "host": "h05", "gpu": 2, "bytes": 44 * GIB, "for": [on[("h05", 2)]]},
        # For a new seat: that seat meets less held here than any other.
        {"name": "new-r", "host": "h07", "gpu": 0, "bytes": 12 * GIB, "for": ["later2"]},
        # The whole card.
        {"name": "card-r", "host": "h09", "gpu": 4, "bytes": "card", "for": ["later2"]},
    ]
    data["seats"] = [
        *seats,
        {"name": "later", "resident": 5 * GIB, "state": "planned", "host": "h03", "gpus": [1]},
        {"name": "later2", "resident": 70 * GIB, "state": "planned"},
    ]
    catalogue = Catalogue.model_validate(data)
    down = on[("h11", 3)]  # its process is gone: absent, it keeps its place
    out: list[Snapshot] = []
    for snap in snapshots:
        raw = snap.to_json_dict()
        for card in raw["cards"]:
            key = (snap.host, card["index"])
            if key == ("h11", 3):
                gone = [p for p in card["processes"] if p["cmdline"].endswith(_port(seats, down))]
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
            if key == ("h15", 6):  # an added seat's process: only catalogue seats attribute
                card["processes"].append(
                    {"pid": 99_002, "used_bytes": 4 * GIB, "cmdline": "srv --port 7005$"}
                )
                card["used_bytes"] += 4 * GIB
                card["free_bytes"] -= 4 * GIB
            if key == ("h17", 7):
                for figure in ("total_bytes", "reserved_bytes", "used_bytes", "free_bytes"):
                    card[figure] = None
                card["processes"] = []
                card["error"] = "GPU is lost"
        out.append(Snapshot.model_validate(raw))
    new: list[tuple[str, Seat]] = []
    for origin, seat in adds:
        extra: dict[str, Any] = {}
        if seat.name == "new5":
            extra = {"match": "--port 7005[$]", "resident": 6 * GIB}
        if seat.name == "new6":
            extra = {"resident": 90 * GIB}  # more than any card: refused, explained
        if seat.name == "new7":
            extra = {"host": "h19", "exclusive": True}
        raw_seat = {**seat.model_dump(mode="json", by_alias=True, exclude_unset=True), **extra}
        new.append((origin, Seat.model_validate(raw_seat)))
    return catalogue, out, new


def _port(seats: list[dict[str, Any]], name: str) -> str:
    """The `--port N` a running seat's process line ends with."""
    match = next(s["match"] for s in seats if s["name"] == name)
    return str(match).removesuffix("$")


def _holds(snapshots: list[Snapshot]) -> list[Snapshot]:
    """Two ledger holds: one plain, one gated (its own gate judged beside each new seat)."""
    until = MADE + timedelta(minutes=30)
    holds = [
        Hold("held-a", "h21", (2,), 20 * GIB, MADE, until, "ci"),
        Hold("held-b", "h23", (0,), 30 * GIB, MADE, until, "ci", requested_bytes=28 * GIB),
    ]
    return with_holds(snapshots, holds)


def _compare(name: str, got: str) -> None:
    path = GOLDEN / name
    if WRITE:
        path.write_text(got)
    assert got == path.read_text()


@pytest.mark.slow
def test_plan_json_of_the_daily_fleet_is_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue, snapshots, adds = daily_fleet()
    (tmp_path / "fleet.yaml").write_text(
        yaml.safe_dump(catalogue.model_dump(mode="json", by_alias=True, exclude_unset=True))
    )
    argv = ["plan", "--catalogue", str(tmp_path / "fleet.yaml"), "--json", "--explain", "all"]
    for snap in snapshots:
        save_snapshot(snap, tmp_path / f"{snap.host}.json")
        argv += ["--snapshot", str(tmp_path / f"{snap.host}.json")]
    (tmp_path / "new.yaml").write_text(
        yaml.safe_dump(
            [seat.model_dump(mode="json", by_alias=True, exclude_unset=True) for _, seat in adds]
        )
    )
    argv += ["--add", str(tmp_path / "new.yaml")]
    code = main(argv)
    captured = capsys.readouterr()
    out = captured.out
    assert "error" not in captured.err
    assert code == 1  # new6 has no card that holds 90 GiB
    data = json.loads(out)
    _compare("plan_daily_64x8.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
    # 24 of 26 seats placed: the answer is the fleet's, not an empty one.
    assert sum(seat["verdict"] == "pass" for seat in data["seats"]) == 24
    assert len(data["cards"]) == 512


@pytest.mark.slow
def test_plan_with_holds_of_the_daily_fleet_is_unchanged() -> None:
    catalogue, snapshots, adds = daily_fleet()
    result = plan(catalogue, _holds(snapshots), adds)
    got = json.dumps(worded_notes(result.to_json("all")), indent=1, sort_keys=True) + "\n"
    _compare("plan_daily_64x8_holds.json", got)
    held = [c for c in result.cards if (c.host, c.index) in {("h21", 2), ("h23", 0)}]
    assert [c.held for c in held] == [("held-a",), ("held-b",)]


def test_fleet_cards_model_every_card_as_card_model_does() -> None:
    catalogue, snapshots, _ = daily_fleet()
    snaps = [attribute(s, catalogue) for s in _holds(snapshots)]
    fleet = FleetCards(catalogue)
    views = card_catalogues(catalogue)
    for snap in snaps:
        for card, fast in zip(snap.cards, fleet.host(snap), strict=True):
            slow = card_model(views[(snap.host, card.index)], snap.host, card)
            assert fast == slow
            # The fields equality leaves out, and the figures worked out in advance.
            assert (fast.own_bytes, fast.seen_bytes) == (slow.own_bytes, slow.seen_bytes)
            assert fast.anonymous_bytes == slow.anonymous_bytes
            plain = CardModel(**{f.name: getattr(slow, f.name) for f in fields(CardModel)})
            assert (fast.open_bytes, fast.widest_bytes) == (plain.open_bytes, plain.widest_bytes)
            assert fast.occupants == plain.occupants
    held = fleet.model("h23", snaps[23].cards[0])
    assert (held.hold_bytes, held.open_bytes) == (30 * GIB, 72_080_162_816 - 30 * GIB - 256 * 2**20)
    down = fleet.model("h11", snaps[11].cards[3])
    assert down.absent_bytes == 40_802_189_312
    assert fleet.model("h15", snaps[15].cards[6]).anonymous_bytes == 4 * GIB


def test_lazy_views_are_the_eager_ones() -> None:
    catalogue, _, _ = daily_fleet()
    for lazy, eager in (
        (card_views(catalogue), card_catalogues(catalogue)),
        (host_views(catalogue), host_catalogues(catalogue)),
        (host_views(catalogue, hostless=True), host_catalogues(catalogue, hostless=True)),
    ):
        assert list(lazy) == list(eager)
        assert all(lazy[key] == view for key, view in eager.items())
    assert card_views(catalogue)[("h05", 2)].reserves[0].name == "used-r"
    with pytest.raises(KeyError):
        card_views(catalogue)[("h05", 8)]


def test_few_collections_raises_the_threshold_and_keeps_what_survives_old() -> None:
    before = gc.get_threshold()
    with few_collections():
        assert gc.get_threshold() == (max(before[0], FEW_COLLECTIONS), *before[1:])
        with few_collections():
            kept = [[i] for i in range(10)]
        # The inner block ends inside the outer: nothing is moved yet, the threshold stays.
        assert gc.get_threshold()[0] == max(before[0], FEW_COLLECTIONS)
        assert any(o is kept for o in gc.get_objects(generation=0))
    assert gc.get_threshold() == before
    assert any(o is kept for o in gc.get_objects(generation=2))
    assert gc.get_count()[0] < 100  # what the block left is not counted as young


def test_few_collections_leaves_what_a_process_froze_frozen() -> None:
    own = [[1], [2]]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with few_collections():
            made = [[i] for i in range(10)]
        assert gc.get_freeze_count() == frozen  # nothing unfrozen, nothing more frozen
        assert any(o is made for o in gc.get_objects(generation=0))
        assert not any(o is own for o in gc.get_objects())  # still frozen: no generation has it
    finally:
        gc.unfreeze()
