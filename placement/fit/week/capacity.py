"""The planner's capacity over a window: each card's model with its room lowered to the room the
window saw at the percentile (DESIGN.md "The week": `plan --window`'s solver capacity).

The gate stays as at the window's end (a deploy starts now); only the room shrinks, by what the
co-tenants took at the card's worst allowed moment beyond what they take now. Looser than the
replay for a multi-card seat (the union by moment), never stricter: the replay has the last word.
"""

from __future__ import annotations

from dataclasses import replace

from placement.fit.card import CardModel
from placement.fit.week.model import CardWindow


def lowered_bytes(window: CardWindow) -> int:
    """How much less room the window saw at the percentile than now (0 when not less)."""
    if window.percentile_room_bytes is None:
        return 0
    return max(0, window.room_now_bytes - window.percentile_room_bytes)


def window_model(model: CardModel, window: CardWindow) -> CardModel:
    """`model` with its room lowered by `lowered_bytes(window)`: held back like a margin, which
    every room (and no gate) counts."""
    lower = lowered_bytes(window)
    if not model.ok or not lower:
        return model
    return replace(model, margin_bytes=model.margin_bytes + lower)
