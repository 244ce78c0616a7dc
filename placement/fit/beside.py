"""Rule `unbounded` seen from a neighbour: a seat that shares a card with an unbounded vLLM.

DESIGN.md "What fits": an unbounded vLLM (≥ 0.34 with neither util nor kv_cache_memory, or no
version and neither) takes nearly all free memory once up. It is refused on a card that holds or
will hold another seat; each seat that would start beside it is refused there too, on its own
line, since whichever starts second finds the card taken (the issue 26 reproduction: a neighbour
read PASS with 68.65 GiB "to spare" beside one).
"""

from __future__ import annotations

from collections.abc import Sequence

from placement.fit.engines import engine_of, unbounded_as_declared
from placement.fit.verdict import Reason
from seats.model import Seat


def is_unbounded(seat: Seat) -> bool:
    """True for a seat judged `unbounded` as declared (check's reading: no util proposed)."""
    return not seat.exclusive and unbounded_as_declared(seat.engine)


def unbounded_beside(
    seat: Seat, host: str, cards: Sequence[int], others: Sequence[tuple[Seat, str, Sequence[int]]]
) -> list[Reason]:
    """One `unbounded` reason per card of `seat` that an unbounded other new seat shares."""
    reasons: list[Reason] = []
    for card in cards:
        for other, other_host, other_cards in others:
            if other.name == seat.name or other_host != host or card not in other_cards:
                continue
            if not is_unbounded(other):
                continue
            rule = engine_of(other.engine)
            why = rule.unbounded_why(other.engine)
            reasons.append(
                Reason(
                    rule="unbounded",
                    card=card,
                    need_bytes=None,
                    room_bytes=None,
                    short_bytes=None,
                    text=f"{other.name} beside it on card {card} is unbounded ({why}): it grows "
                    f"into nearly all free memory, so {seat.name} has no room it can count on; "
                    f"pin {other.name} with {rule.pin_hint()}",
                    host=host,
                )
            )
            break
    return reasons
