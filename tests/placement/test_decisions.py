"""One digest and one ledger row per decision, for plan, check and the demo ledger alike."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from inventory.ledger.store import open_ledger
from inventory.snapshot import Snapshot
from placement.decisions import Decision, inputs_digest, record_decision, record_decisions
from placement.fit.verdict import Reason, Verdict

AT = datetime(2026, 9, 16, 14, 5, tzinfo=UTC)


def test_digest_is_of_the_content_not_the_key_order() -> None:
    one = inputs_digest({"seat": {"name": "a", "resident": 1}, "cards": [0]})
    same = inputs_digest({"cards": [0], "seat": {"resident": 1, "name": "a"}})
    other = inputs_digest({"seat": {"name": "a", "resident": 1}, "cards": [1]})
    assert one == same != other
    assert len(one) == 64 and int(one, 16) >= 0


def test_a_verdict_is_recorded_with_every_reason(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    reason = Reason("room", 1, 6 * 2**30, 5 * 2**30, 2**30, "need 6 GiB, room 5 GiB", "fv-ml1")
    refused = Verdict("refuse", "new-6gib", "fv-ml1", (), (reason,))
    nowhere = Verdict("refuse", "lost", None, ())
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        snapshot_id = ledger.append(fv_ml1_snapshot)
        first = record_decision(
            ledger, "plan", refused, inputs_digest="d" * 64, snapshot_id=snapshot_id, decided_at=AT
        )
        second = record_decision(
            ledger, "check", nowhere, inputs_digest="e" * 64, snapshot_id=None, decided_at=AT,
            host="fv-ml1",
        )  # fmt: skip
        rows = ledger.decisions()
    assert [row["id"] for row in rows] == [first, second]
    assert rows[0]["kind"] == "plan" and rows[0]["host"] == "fv-ml1"
    assert (rows[0]["seat"], rows[0]["verdict"], rows[0]["cards"]) == ("new-6gib", "refuse", [])
    assert rows[0]["reasons"] == [reason.to_json()]
    assert rows[0]["snapshot_id"] == snapshot_id and rows[0]["inputs_digest"] == "d" * 64
    assert rows[0]["decided_at"] == "2026-09-16T14:05:00Z"
    assert (rows[1]["kind"], rows[1]["host"], rows[1]["reasons"]) == ("check", "fv-ml1", [])


def test_decisions_are_filed_beside_their_snapshot_stored_once(
    tmp_path: Path, fv_ml1_snapshot: Snapshot
) -> None:
    placed = Verdict("pass", "flash-next", "fv-ml1", (3,))
    nowhere = Verdict("refuse", "lost", None, ())
    decisions = [
        Decision(placed, "a" * 64, fv_ml1_snapshot),
        Decision(placed, "b" * 64, fv_ml1_snapshot),
        Decision(nowhere, "c" * 64, None),
    ]
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        ids = record_decisions(ledger, "plan", decisions, AT)
        rows = ledger.decisions()
        assert ledger.count() == 1
    assert [row["id"] for row in rows] == ids
    assert rows[0]["snapshot_id"] == rows[1]["snapshot_id"] is not None
    assert (rows[2]["snapshot_id"], rows[2]["host"]) == (None, None)
    assert [row["inputs_digest"][0] for row in rows] == ["a", "b", "c"]
