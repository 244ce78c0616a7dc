"""Cards of another host or card that would take a refused seat: one line of `check`'s `nearest`.

Found by placement.check.nearest; kept apart so a CheckResult can carry them without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from seats.units import format_bytes


@dataclass(frozen=True)
class Elsewhere:
    """Cards of one host that would take the seat: what it needs there and the room left after."""

    host: str
    cards: tuple[int, ...]
    need_bytes: int
    room_after_bytes: int
    util: str | None = None
    # The seat's resident is unknown: `need_bytes` is a lower bound of what it takes.
    need_floor: bool = False

    def to_json(self) -> dict[str, Any]:
        """{host, cards, need_bytes, room_after_bytes, util}, raw byte ints."""
        return {
            "host": self.host,
            "cards": list(self.cards),
            "need_bytes": self.need_bytes,
            "room_after_bytes": self.room_after_bytes,
            "util": self.util,
        }

    def text(self) -> str:
        """`fv-ml1:3 takes it: need 10.49 GiB per card, 12.20 GiB room left after`."""
        cards = ",".join(map(str, self.cards))
        need = ("at least " if self.need_floor else "") + format_bytes(self.need_bytes)
        return (
            f"{self.host}:{cards} takes it: need {need} per card, "
            f"{format_bytes(self.room_after_bytes)} room left after"
        )
