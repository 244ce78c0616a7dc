"""The history `plan --window` and `ledger --window` replay: the ledger's, opened read-only for
the command, each hour of raw moments read once however many replays ask for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from inventory.history.remembered import RememberedHistory


@contextmanager
def ledger_history(ledger_path: str) -> Iterator[RememberedHistory]:
    """The ledger at `ledger_path` as a history (rollups first), open while the block runs."""
    from inventory.history.ledger import LedgerHistory
    from inventory.ledger.store import open_ledger

    with open_ledger(ledger_path, readonly=True) as ledger:
        yield RememberedHistory(LedgerHistory(ledger.connection))
