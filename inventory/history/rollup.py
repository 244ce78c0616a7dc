"""Hourly rollups computed from moments: the one computation both sources answer `rollups` with.

A source that stores its rollups (the ledger, once it writes them beside each snapshot) answers
from them instead; what it answers must equal `hourly` of its moments.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from inventory.history.model import CardHour, CommandHour, Moment, Rollups

HOUR_S = 3600


def hour_of(moment: datetime) -> datetime:
    """The UTC hour holding `moment`."""
    seconds = int(moment.timestamp())
    return datetime.fromtimestamp(seconds - seconds % HOUR_S, UTC)


@dataclass
class _Card:
    samples: int = 0
    errors: int = 0
    min_free: int | None = None
    min_free_at: datetime | None = None
    max_used: int | None = None

    def add(self, free: int | None, used: int | None, at: datetime) -> None:
        self.samples += 1
        if free is not None and (self.min_free is None or free < self.min_free):
            self.min_free, self.min_free_at = free, at
        if used is not None and (self.max_used is None or used > self.max_used):
            self.max_used = used


@dataclass
class _Group:
    samples: int
    low: int
    low_at: datetime
    high: int
    high_at: datetime

    def add(self, held: int, at: datetime) -> None:
        self.samples += 1
        if held < self.low:
            self.low, self.low_at = held, at
        if held > self.high:
            self.high, self.high_at = held, at


def hourly(moments: Iterable[Moment]) -> Rollups:
    """Per card and hour, and per (seat, command line) on a card and hour, the bounds of the
    moments given (oldest first; the earliest moment wins a tie)."""
    cards: dict[tuple[datetime, str, int], _Card] = {}
    groups: dict[tuple[datetime, str, int, str, str], _Group] = {}
    for moment in moments:
        hour, at = hour_of(moment.taken_at), moment.taken_at
        for card in moment.cards:
            rollup = cards.setdefault((hour, moment.host, card.card), _Card())
            if not card.ok:
                rollup.errors += 1
                continue
            rollup.add(card.free_bytes, card.used_bytes, at)
            summed: dict[tuple[str, str], int] = {}
            for process in card.processes:
                key = (process.seat or "", process.cmdline or "")
                summed[key] = summed.get(key, 0) + (process.used_bytes or 0)
            for (seat, cmdline), held in summed.items():
                key5 = (hour, moment.host, card.card, seat, cmdline)
                group = groups.get(key5)
                if group is None:
                    groups[key5] = _Group(1, held, at, held, at)
                else:
                    group.add(held, at)
    return Rollups(
        cards=tuple(
            CardHour(host, card, hour, r.samples, r.errors, r.min_free, r.min_free_at, r.max_used)
            for (hour, host, card), r in sorted(cards.items(), key=lambda kv: kv[0])
        ),
        commands=tuple(
            CommandHour(
                host,
                card,
                hour,
                seat or None,
                cmdline or None,
                g.samples,
                g.low,
                g.low_at,
                g.high,
                g.high_at,
            )
            for (hour, host, card, seat, cmdline), g in sorted(groups.items(), key=lambda kv: kv[0])
        ),
    )
