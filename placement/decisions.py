"""A decision as the ledger keeps it: the digest of what it rests on, and its row from a verdict.

Shared by `plan`, `check` and the demo ledger, so every recorded decision is written one way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from inventory.ledger.store import Approval, Ledger
    from inventory.snapshot import Snapshot
    from placement.fit.verdict import Verdict

Kind = Literal["plan", "check"]


def inputs_digest(inputs: Mapping[str, Any]) -> str:
    """sha256 (hex) of the inputs as JSON with sorted keys: equal inputs, equal digests."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def record_decision(
    ledger: Ledger | Approval,
    kind: Kind,
    verdict: Verdict,
    *,
    inputs_digest: str,
    snapshot_id: int | None,
    decided_at: datetime,
    host: str | None = None,
) -> int:
    """Append one verdict with its reasons to the ledger's decisions; return the decision's id.

    `host` defaults to the verdict's (a refusal on every host has none).
    """
    return ledger.record_decision(
        kind=kind,
        host=host if host is not None else verdict.host,
        seat=verdict.seat,
        cards=list(verdict.cards),
        verdict=verdict.verdict,
        reasons=[reason.to_json() for reason in verdict.reasons],
        inputs_digest=inputs_digest,
        snapshot_id=snapshot_id,
        decided_at=decided_at,
    )


@dataclass(frozen=True)
class Decision:
    """A verdict to record, the digest of its inputs, and the snapshot it was judged on (if any).

    `host`: where to file it when the verdict names none (default: the verdict's host).
    """

    verdict: Verdict
    inputs_digest: str
    snapshot: Snapshot | None
    host: str | None = None


def record_decisions(
    ledger: Ledger | Approval, kind: Kind, decisions: Sequence[Decision], decided_at: datetime
) -> list[int]:
    """Record each decision beside its snapshot (stored once: `append` finds one already there)."""
    return [
        record_decision(
            ledger,
            kind,
            decision.verdict,
            inputs_digest=decision.inputs_digest,
            snapshot_id=None if decision.snapshot is None else ledger.append(decision.snapshot),
            decided_at=decided_at,
            host=decision.host,
        )
        for decision in decisions
    ]
