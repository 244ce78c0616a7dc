"""Seat and host names for people: "did you mean" for a misspelt one, and the names to complete.

One helper for every command that takes a SEAT or a host (`check`, `holds`, `learn`, `snapshot`)
and for `gpuplan completion --names`; the suggestion is difflib's close matches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from seats.model import Catalogue

__all__ = ["KINDS", "did_you_mean", "names"]

Kind = Literal["seats", "hosts"]
KINDS: tuple[Kind, ...] = ("seats", "hosts")


def did_you_mean(word: str, names: Sequence[str]) -> str:
    """`; did you mean vllm-voices?` for a misspelt name, else "" (placement.check's, loaded only
    on this error path: `holds` and `learn` start without the checker)."""
    from placement.check.seat import did_you_mean as close

    return close(word, names)


def names(catalogue: Catalogue, kind: Kind) -> list[str]:
    """The catalogue's seat names (retired ones too: `learn` and `holds` take them) or host names."""
    if kind == "seats":
        return [seat.name for seat in catalogue.seats]
    return list(catalogue.hosts)
