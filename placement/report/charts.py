"""What the weekly report's charts show, worked out once for their one drawing (`svg`): colours,
file names, each card's headroom and reference lines, the fleet's order and its tiles' scale.

Every figure here is an int of bytes the report already computed (`ChartSeries`); only the
drawing turns bytes into pixels. Nothing here draws or writes files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from placement.report.rows import ChartSeries
from seats.units import format_bytes

# tab20 without its greys, strong shades first: seats get them in name order.
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
    "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2",
    "#dbdb8d", "#9edae5",
)  # fmt: skip
OTHER_COLOUR = "#7f7f7f"
FREE_COLOUR = "#2e7d32"
PLANNABLE_COLOUR = "#1f4e9e"
TAKEN_COLOUR = "#b22222"
# Free memory above this many GiB is drawn on a log scale: the last few GiB stay readable.
LINEAR_GIB = 4.0

FLEET_FILENAME = "chart-fleet-headroom.svg"


def seat_colours(names: Iterable[str]) -> dict[str, str]:
    """One distinct colour per seat, by sorted name: the same seat has the same colour on every card."""
    ordered = sorted(set(names) - {"other"})
    return {name: _PALETTE[i % len(_PALETTE)] for i, name in enumerate(ordered)}


def chart_filename(series: ChartSeries) -> str:
    """chart-fv-ml1-gpu0.svg: safe in a file name and a URL."""
    host = re.sub(r"[^A-Za-z0-9._-]+", "_", series.host)
    return f"chart-{host}-gpu{series.card}.svg"


# --- headroom figures (computed once, shared by the card chart, the fleet chart, the text) ---


@dataclass(frozen=True)
class Headroom:
    """One card's headroom over the window in bytes per bucket (None where no reading)."""

    free_bytes: tuple[int | None, ...]
    plannable_bytes: tuple[int | None, ...]  # max(0, free − held now − margin), from the figures
    lowest_free_bytes: int | None
    lowest_free_at_s: int | None
    lowest_plannable_bytes: int | None  # the largest new seat that would have fit all window


@lru_cache(maxsize=4096)
def headroom(series: ChartSeries) -> Headroom:
    """Free and plannable per bucket as the report's figures give them, and their lows."""
    seen = [(v, t) for v, t in zip(series.free_min, series.times_s, strict=False) if v is not None]
    low = min(seen) if seen else None
    plannable = [v for v in series.plannable_min if v is not None]
    return Headroom(
        series.free_min,
        series.plannable_min,
        low[0] if low else None,
        low[1] if low else None,
        min(plannable) if plannable else None,
    )


def worst_first(series: Sequence[ChartSeries]) -> list[tuple[str, list[ChartSeries]]]:
    """The hosts, each with its cards, the host with the least free above its margin first."""
    hosts: dict[str, list[ChartSeries]] = {}
    for s in series:
        hosts.setdefault(s.host, []).append(s)

    def key(item: tuple[str, list[ChartSeries]]) -> tuple[float, str]:
        lows = [
            h.lowest_free_bytes - s.margin_bytes
            for s in item[1]
            if (h := headroom(s)).lowest_free_bytes is not None
        ]
        return (min(lows) if lows else math.inf, item[0])

    return sorted(hosts.items(), key=key)


# A fleet's per-card charts: those of the hosts with least headroom only (a page of hundreds of
# cards' charts helps no one; the small multiples show every host).
DETAIL_HOSTS = 8


def detail_series(series: Sequence[ChartSeries]) -> list[ChartSeries]:
    """The cards whose own charts are drawn: all of them, or the DETAIL_HOSTS worst hosts'."""
    hosts = worst_first(series)
    if len(hosts) <= DETAIL_HOSTS:
        return list(series)
    keep = {host for host, _ in hosts[:DETAIL_HOSTS]}
    return [s for s in series if s.host in keep]


@dataclass(frozen=True)
class ReferenceLines:
    """The composition chart's reference figures in bytes, and their legend text."""

    total_bytes: int | None  # the card's CUDA total
    declared_bytes: int | None  # the declared seats' residents together
    held_floor_bytes: int | None  # total − held (reserves, seats down), when anything is held
    total_label: str
    declared_label: str
    # Two lines: in one the label ran past the image's right edge.
    held_label: str


def reference_lines(series: ChartSeries) -> ReferenceLines:
    """CUDA total, declared total and the held band's floor of one card's series."""
    total = series.cuda_total_bytes
    held = bool(series.held_bytes) and total is not None
    return ReferenceLines(
        total_bytes=total,
        declared_bytes=series.declared_bytes or None,
        held_floor_bytes=max(0, (total or 0) - series.held_bytes) if held else None,
        total_label=f"CUDA total {format_bytes(total or 0)}",
        declared_label=f"declared {format_bytes(series.declared_bytes)}",
        held_label=f"held {format_bytes(series.held_bytes)}\n(reserves, seats down)",
    )


# --- the fleet: small multiples ---------------------------------------------------------------

CARD_COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
)  # fmt: skip
# A tile's plot area inside its 1 × 1 cell (the title above it, the scale to its left).
TILE_X = (0.07, 0.98)
TILE_Y = (0.28, 0.86)  # measured down from the cell's top
LOG_SHARE = 0.6  # of a tile's height, for free memory above the last 4 GiB


def tile_scale(top: float) -> list[float]:
    """The values a tile labels: 0, the last 4 GiB's edge, and a power of two near the top."""
    if top <= 4 * LINEAR_GIB:
        return [0.0, round(top / 2, 1)]
    marks = [0.0, LINEAR_GIB]
    high = 2 ** int(math.log2(top))
    return marks + ([float(high)] if high > 2 * LINEAR_GIB else [])


def tile_title(i: int, host: str, worst: tuple[int, int, int] | None) -> str:
    """`1. fv-ml1 · lowest free 1.50 GiB (card 2, Tue 14:02)`; `worst` is (bytes, card, when)."""
    if worst is None:
        return f"{i + 1}. {host} · no free-memory reading"
    at = datetime.fromtimestamp(worst[2], UTC).strftime("%a %H:%M")
    return f"{i + 1}. {host} · lowest free {format_bytes(worst[0])} (card {worst[1]}, {at})"
