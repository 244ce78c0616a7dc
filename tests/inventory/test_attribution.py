"""A fleet's snapshots attributed in one pass (`attribute_fleet`) name every process as
`attribute` does host by host: the same seats, the same copies, the cards with no new name kept."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from inventory.attribution import attribute, attribute_fleet
from inventory.snapshot import Snapshot
from seats.model import Catalogue

GIB = 2**30


def _catalogue() -> Catalogue:
    return Catalogue.model_validate(
        {
            "hosts": {h: {"cards": 2, "card_total": 80 * GIB} for h in ("a", "b", "c")},
            "seats": [
                # Hostless and first: it takes `--port 1$` on every host, ahead of b's own.
                {"name": "anywhere", "resident": GIB, "match": "--port 1$"},
                {"name": "a-own", "resident": GIB, "host": "a", "gpus": [0], "match": "--port 2$"},
                {"name": "b-own", "resident": GIB, "host": "b", "gpus": [0], "match": "--port 1$"},
                {"name": "b-late", "resident": GIB, "host": "b", "match": "--port 3$"},
                # Retired: its match names nothing any more.
                {"name": "gone", "resident": GIB, "host": "a", "state": "retired", "match": "old"},
                # Hostless and after b's: on b, b-late's `--port 3$` is found first.
                {"name": "later", "resident": GIB, "match": "--port 3$|--port 4$"},
            ],
        }
    )


def _snapshot(host: str, processes: list[list[dict[str, Any]]]) -> Snapshot:
    return Snapshot.model_validate(
        {
            "host": host,
            "taken_at": datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC),
            "cards": [
                {
                    "index": i,
                    "total_bytes": 80 * GIB,
                    "reserved_bytes": GIB,
                    "used_bytes": sum(p["used_bytes"] for p in procs),
                    "free_bytes": 79 * GIB - sum(p["used_bytes"] for p in procs),
                    "processes": procs,
                }
                for i, procs in enumerate(processes)
            ],
        }
    )


def _process(pid: int, cmdline: str | None, **extra: Any) -> dict[str, Any]:
    return {"pid": pid, "used_bytes": GIB, "cmdline": cmdline, **extra}


def test_attribute_fleet_names_every_process_as_attribute_does() -> None:
    catalogue = _catalogue()
    snapshots = [
        _snapshot(
            "a",
            [
                [_process(1, "srv --port 2"), _process(2, "srv --port 1"), _process(3, "old")],
                [_process(4, "VLLM::EngineCore", parents=["python", "srv --port 4"])],
            ],
        ),
        _snapshot(
            "b",
            [
                [_process(5, "srv --port 1"), _process(6, "srv --port 3")],
                [_process(7, None), _process(8, "srv --port 9", seat="kept")],
            ],
        ),
        _snapshot("c", [[], []]),
        # A host the catalogue does not describe: the hostless seats alone.
        _snapshot("z", [[_process(9, "srv --port 4"), _process(10, "srv --port 2")], []]),
    ]
    fleet = attribute_fleet(snapshots, catalogue)
    one_by_one = [attribute(snapshot, catalogue) for snapshot in snapshots]
    assert list(fleet) == one_by_one
    named = {p.pid: p.seat for s in fleet for card in s.cards for p in card.processes}
    assert named == {
        1: "a-own",
        2: "anywhere",
        3: None,
        4: "later",
        5: "anywhere",
        6: "b-late",
        7: None,
        8: "kept",
        9: "later",
        10: None,
    }
    # Copies as pydantic makes them: the fields set grows by the seat; nothing gained, nothing copied.
    for got, want in zip(fleet, one_by_one, strict=True):
        for card, other in zip(got.cards, want.cards, strict=True):
            for process, twin in zip(card.processes, other.processes, strict=True):
                assert process.model_fields_set == twin.model_fields_set
    assert fleet[0].cards[0].processes[0].model_fields_set == {
        "pid",
        "used_bytes",
        "cmdline",
        "seat",
    }
    assert fleet[2] is snapshots[2]
    assert fleet[1].cards[1] is snapshots[1].cards[1]
    assert fleet[3].cards[1] is snapshots[3].cards[1]
