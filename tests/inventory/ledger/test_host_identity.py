"""Another machine under the same host name is stored with a warning (issue 32 item 9).

DESIGN.md "Never yes by accident": a snapshot whose card UUIDs differ from the previous snapshot
of its host in the ledger (new UUIDs, another model) was stored under that host with no word,
and then judged and reported as the same cards. Each case here stores the fv-ml1 example, then a
snapshot a minute later through `gpuplan snapshot --from … --ledger`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from inventory.ledger.store import open_ledger
from inventory.snapshot import format_utc, load_snapshot
from placement.cli.main import main
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

TAKEN = load_snapshot(FV_ML1_SNAPSHOT).taken_at
UUIDS = [f"GPU-0f7e1d2c-9a4b-4c3d-8e5f-00000000000{i}" for i in range(4)]


def _later(tmp_path: Path, edit: Any) -> Path:
    """The fv-ml1 example a minute later, with `edit` applied to its cards."""
    raw = json.loads(FV_ML1_SNAPSHOT.read_text(encoding="utf-8"))
    raw["taken_at"] = format_utc(TAKEN + timedelta(minutes=1))
    edit(raw["cards"])
    path = tmp_path / "later.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _store(path: Path, db: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """stderr of `gpuplan snapshot --from PATH --ledger DB` (which must exit 0)."""
    capsys.readouterr()
    words = ["snapshot", "--from", str(path), "--catalogue", str(FV_ML1_CATALOGUE)]
    assert main([*words, "--ledger", str(db)]) == 0
    return capsys.readouterr().err


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "l.sqlite"
    assert "UUIDs differ" not in _store(FV_ML1_SNAPSHOT, path, capsys)  # the first says nothing
    return path


def _count(db: Path) -> int:
    with open_ledger(db, readonly=True) as ledger:
        return ledger.count()


def test_another_machine_under_the_same_name_is_stored_with_a_warning(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def other_machine(cards: list[dict[str, Any]]) -> None:
        for card in cards:
            card["uuid"] = f"GPU-aaaaaaaa-0000-0000-0000-00000000000{card['index']}"
            card["name"] = "NVIDIA A100-SXM4-80GB"

    err = _store(_later(tmp_path, other_machine), db, capsys)
    new = ", ".join(f"GPU-aaaaaaaa-0000-0000-0000-00000000000{i}" for i in range(4))
    assert (
        "warning: host fv-ml1: card UUIDs differ from its previous snapshot in the ledger "
        f"({format_utc(TAKEN)}): new {new}; gone {', '.join(UUIDS)}. another machine under the "
        "same host name? Stored anyway; give each machine its own --host"
    ) in err
    assert _count(db) == 2


def test_one_card_replaced_is_said_as_such(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def replaced(cards: list[dict[str, Any]]) -> None:
        cards[2]["uuid"] = "GPU-bbbbbbbb-0000-0000-0000-000000000002"

    err = _store(_later(tmp_path, replaced), db, capsys)
    assert (
        f"new GPU-bbbbbbbb-0000-0000-0000-000000000002; gone {UUIDS[2]}. a card replaced, or "
        "another machine under the same host name?"
    ) in err


@pytest.mark.parametrize(
    "edit",
    [
        lambda cards: None,
        # Renumbered (another CUDA_VISIBLE_DEVICES order): the same cards.
        lambda cards: [card.update(uuid=UUIDS[3 - card["index"]]) for card in cards],
        # NVML could not read a UUID: unknown, not different.
        lambda cards: cards[1].update(uuid=None),
    ],
    ids=["same", "renumbered", "uuid-unread"],
)
def test_the_same_cards_say_nothing(
    edit: Any, db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "UUIDs differ" not in _store(_later(tmp_path, edit), db, capsys)
    assert _count(db) == 2


def test_a_snapshot_already_stored_is_not_compared_again(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def other_machine(cards: list[dict[str, Any]]) -> None:
        for card in cards:
            card["uuid"] = f"GPU-cccccccc-0000-0000-0000-00000000000{card['index']}"

    later = _later(tmp_path, other_machine)
    assert "UUIDs differ" in _store(later, db, capsys)
    assert "UUIDs differ" not in _store(later, db, capsys)  # already in the ledger: not stored
    assert _count(db) == 2
