"""The command line's one renderer: text tables, byte figures and the words of a refusal's figures.

Every command prints its tables through `table` and its bytes through `b` (seats.units.format_bytes).
Text from outside (a command line, a card's error, a driver string, a user) is shown through
`seats.names.escaped`, the one escaper, so that none prints a line of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

from placement.fit.verdict import Reason
from seats.units import GiB, format_bytes

Align = Literal["left", "right"]
TableStyle = Literal["plain", "ruled", "tight"]


@lru_cache(maxsize=8192)
def b(n: int | None) -> str:
    """`10.49 GiB` (one binary unit), `-` for a figure that is not known."""
    # Cached: tables and refusals print the same card figures over and over.
    return format_bytes(n)


# What a negative figure says: nothing is left, and by how much the card is already over.
_NONE_LEFT = {"room": "no room", "free": "nothing free"}


def figure_text(word: str, n: int) -> str:
    """'room 1.58 GiB'; a negative figure as 'no room (344.03 MiB over)', never 'room -344.03 MiB'."""
    if n >= 0:
        return f"{word} {b(n)}"
    return f"{_NONE_LEFT.get(word, 'no ' + word)} ({b(-n)} over)"


def gib(n: int | None) -> str:
    """`93.14`: a figure in GiB without the unit, for `used / total GiB` cells."""
    return "-" if n is None else f"{n / GiB:.2f}"


def table(
    rows: Sequence[Sequence[object]],
    headers: Sequence[str],
    align: Sequence[Align],
    *,
    style: TableStyle = "plain",
) -> str:
    """Rows under headers, one alignment per column; every cell is shown as `str(cell)`.

    `plain`: columns two spaces apart, a header at least two wider than its text (tabulate's).
    `ruled`: `plain` with a dashed rule under the headers. `tight`: columns exactly as wide as
    their widest cell, two spaces apart, trailing blanks stripped (the `check` figures).
    """
    cells = [[str(cell) for cell in row] for row in rows]
    if style == "tight":
        return _tight(cells, list(headers), align)
    from tabulate import tabulate  # only here: `check`'s tight tables start without it

    return str(
        tabulate(
            cells,
            headers=list(headers),
            tablefmt="plain" if style == "plain" else "simple",
            colalign=tuple(align),
            disable_numparse=True,
        )
    )


def _tight(rows: list[list[str]], headers: list[str], align: Sequence[Align]) -> str:
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]

    def line(values: list[str]) -> str:
        return "  ".join(
            value.ljust(width) if how == "left" else value.rjust(width)
            for value, width, how in zip(values, widths, align, strict=True)
        ).rstrip()

    return "\n".join(line(row) for row in [headers, *rows])


# Each rule's figures in the words of what it compares: the gate is vLLM's request against the
# free memory it reads; every other rule is our need against the room left on the card.
_FIGURE_WORDS: dict[str, tuple[str, str]] = {"gate": ("requested", "free")}
_DEFAULT_WORDS = ("need", "room")


def reason_figures(reason: Reason, *, need_floor: bool = False) -> str | None:
    """`need 6.00 GiB  room 1.58 GiB  short 4.42 GiB` (a gate: `requested … free …`); None without figures.

    `need_floor`: the seat's resident is unknown; its need (not a gate's request) is a lower
    bound, said as its figures table says it.
    """
    if reason.need_bytes is None or reason.room_bytes is None:
        return None
    need, room = _FIGURE_WORDS.get(reason.rule, _DEFAULT_WORDS)
    lower = " (lower bound)" if need_floor and need == "need" else ""
    return (
        f"{need} {b(reason.need_bytes)}{lower}  {figure_text(room, reason.room_bytes)}  "
        f"short {b(reason.short_bytes)}{' at least' if lower else ''}"
    )
