"""What breaks a reserve and what no seat explains, on one card reading: the one definition.

The ledger's SQL (`inventory.ledger.report_queries`), the report's PromQL
(`inventory.prometheus.range`) and the alert's PromQL (`placement.report.alerts`) each compute
these in their own language; tests/placement/fit/test_reserve_definition.py runs one table of
cases through all of them against this module. In exact integer bytes:

    others(c, r)     = used(c) − Σ bytes of the processes of r's own seats on c
    allowance(c, r)  = 0 for `bytes: card`, else max(0, cuda_total(c) − reserve_bytes(r))
    broken(c, r)     ⇔ others(c, r) > allowance(c, r)
    unexplained(c)   = used(c) − Σ bytes of the processes attributed to some seat
                       (`placement.fit.capacity.unexplained_bytes`)

`used` is the card's (NVML v2: the driver's reserve excluded; v1: included), so memory no process
explains counts against a reserve as it counts in unexplained: a reserve is kept or broken by the
card's bytes, not by what the process list happens to show.
"""

from __future__ import annotations

from collections.abc import Collection

from inventory.snapshot import Card


def reserve_allowance_bytes(cuda_total_bytes: int, reserve_bytes: int | None) -> int:
    """What processes other than a reserve's seats may hold on its card: the CUDA total less the
    reserve, nothing for a whole-card reserve (`reserve_bytes` None). More than this breaks it."""
    if reserve_bytes is None:
        return 0
    return max(0, cuda_total_bytes - reserve_bytes)


def reserve_others_bytes(card: Card, own: Collection[str]) -> int | None:
    """used − the bytes of the processes of the reserve's own seats; None for a card in error."""
    if card.used_bytes is None:
        return None
    mine = sum(p.used_bytes or 0 for p in card.processes if p.seat is not None and p.seat in own)
    return card.used_bytes - mine


def reserve_breach_bytes(card: Card, own: Collection[str], reserve_bytes: int | None) -> int | None:
    """Others' bytes on the card when they break the reserve, else None (also for a card in error)."""
    others = reserve_others_bytes(card, own)
    total = card.cuda_total_bytes
    if others is None or total is None:
        return None
    return others if others > reserve_allowance_bytes(total, reserve_bytes) else None
