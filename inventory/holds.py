"""A hold: the bytes an approved deploy may take on its cards until its seat is seen there.

A `check` that passes against a ledger records one hold per seat it approved. While a hold is
active it is an approved new seat on its cards for every later `check` and `plan` reading that
ledger: its need counts in room and in every later gate, and its own gate request is judged
again beside each later seat; except for the same seat's own check (DESIGN.md "Whole deploys: …
holds").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class Hold:
    """One approval that counts as held: `need_bytes` on each of `cards` of `host`."""

    seat: str
    host: str
    cards: tuple[int, ...]
    need_bytes: int
    created_at: datetime
    expires_at: datetime
    user: str
    decision_id: int | None = None
    # The seat's own gate request on each card (vLLM: ceil(util × CUDA total)); 0 without a gate.
    # A later seat that would leave the held seat's gate short is refused (rule `hold`).
    requested_bytes: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "seat": self.seat,
            "host": self.host,
            "cards": list(self.cards),
            "need_bytes": self.need_bytes,
            "requested_bytes": self.requested_bytes,
            "created_at": _utc(self.created_at),
            "expires_at": _utc(self.expires_at),
            "user": self.user,
        }

    def note(self) -> str:
        """`approved for tts at 14:03Z by ci-deploy, until 14:33Z`: how a refusal names it (the
        end with its date when it is not the day the hold was made: a `--hold-for 2d`)."""
        return (
            f"approved for {self.seat} at {short_time(self.created_at)} by {self.user}, "
            f"until {when(self.expires_at, self.created_at)}"
        )


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def short_time(moment: datetime) -> str:
    """`14:33Z`: the minute a hold was made or ends, as refusals and listings print it."""
    return moment.astimezone(UTC).strftime("%H:%MZ")


def when(moment: datetime, now: datetime) -> str:
    """`14:33Z` on the day of `now` (UTC), `2026-12-04 14:33Z` on any other day."""
    if moment.astimezone(UTC).date() == now.astimezone(UTC).date():
        return short_time(moment)
    return f"{moment.astimezone(UTC):%Y-%m-%d} {short_time(moment)}"
