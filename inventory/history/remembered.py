"""A history that reads each thing once: a command that replays one host's window many times
(`plan --window`'s trials, `ledger --window`'s cards) asks the source once per hour of raw moments.

Whatever it answers equals what the history it wraps answers; a source without `moment_times`
(no rollups kept) keeps none here either, so the replay reads every moment, as it would.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from inventory.history.model import Moment, Rollups
from inventory.snapshot import unix_s

HOUR_S = 3600


class RememberedHistory:
    """`history`'s moment times, rollups and raw moments, each read once and kept."""

    def __init__(self, history: Any) -> None:
        self.history = history
        self._times: dict[tuple[str, int, int], list[tuple[int, int | None]] | None] = {}
        self._rollups: dict[tuple[str, int, int], Rollups] = {}
        self._bounds: dict[tuple[str, int, int], Rollups] = {}
        # (host, hour's first second) → every card's moments of that hour, oldest first.
        self._hours: dict[tuple[str, int], list[Moment]] = {}

    def __getattr__(self, name: str) -> Any:
        # Every other read (a fleet's set-wise ones) is the wrapped history's own.
        return getattr(self.history, name)

    def moment_times(
        self, host: str, start: datetime, end: datetime
    ) -> list[tuple[int, int | None]] | None:
        key = (host, unix_s(start), unix_s(end))
        if key not in self._times:
            read = getattr(self.history, "moment_times", None)
            self._times[key] = None if read is None else read(host, start, end)
        return self._times[key]

    def rollups(self, host: str, start: datetime, end: datetime) -> Rollups:
        key = (host, unix_s(start), unix_s(end))
        found = self._rollups.get(key)
        if found is None:
            found = self._rollups[key] = self.history.rollups(host, start, end)
        return found

    def bounds(
        self, host: str, start: datetime, end: datetime, cards: Sequence[int] | None = None
    ) -> Rollups:
        """The wrapped history's undated bounds where it gives them (Prometheus), else its
        rollups (`prune.replay_history` reads either first); of every card, whichever `cards`
        a replay asks for (the next may ask for others)."""
        read = getattr(self.history, "bounds", None)
        if read is None:
            return self.rollups(host, start, end)
        key = (host, unix_s(start), unix_s(end))
        found = self._bounds.get(key)
        if found is None:
            found = self._bounds[key] = read(host, start, end)
        return found

    def moments(
        self, host: str, start: datetime, end: datetime, cards: Sequence[int] | None = None
    ) -> Iterator[Moment]:
        """`History.moments`: those of [start, end), read by whole hours (every card) once."""
        start_s, end_s = unix_s(start), unix_s(end)
        first = start_s - start_s % HOUR_S
        wanted = list(range(first, end_s, HOUR_S))
        missing = [h for h in wanted if (host, h) not in self._hours]
        if missing:
            self._read(host, missing)
        only = None if cards is None else frozenset(cards)
        for hour in wanted:
            for moment in self._hours[(host, hour)]:
                taken = unix_s(moment.taken_at)
                if taken < start_s or taken >= end_s:
                    continue
                if only is None:
                    yield moment
                    continue
                kept = tuple(c for c in moment.cards if c.card in only)
                if kept:
                    yield Moment(moment.host, moment.taken_at, kept, moment.arrived_at)

    def _read(self, host: str, hours: Sequence[int]) -> None:
        """The hours asked for, each run of consecutive ones in one read."""
        run: list[int] = []
        for hour in [*hours, None]:
            if hour is not None and (not run or hour == run[-1] + HOUR_S):
                run.append(hour)
                continue
            if run:
                for h in run:
                    self._hours[(host, h)] = []
                low = datetime.fromtimestamp(run[0], UTC)
                high = datetime.fromtimestamp(run[-1] + HOUR_S, UTC)
                for moment in self.history.moments(host, low, high):
                    t = unix_s(moment.taken_at)
                    self._hours[(host, t - t % HOUR_S)].append(moment)
            run = [] if hour is None else [hour]
