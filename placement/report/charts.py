"""Charts of the weekly report as PNG bytes: per card its headroom, each seat's drift and the
stacked composition of used memory; for a fleet, small multiples of each host's headroom.

matplotlib with the Agg backend only (no display); nothing here writes files.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC
from functools import lru_cache
from typing import Any

from placement.report.rows import ChartSeries
from seats.units import GiB

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

FLEET_FILENAME = "chart-fleet-headroom.png"


def seat_colours(names: Iterable[str]) -> dict[str, str]:
    """One distinct colour per seat, by sorted name: the same seat has the same colour on every card."""
    ordered = sorted(set(names) - {"other"})
    return {name: _PALETTE[i % len(_PALETTE)] for i, name in enumerate(ordered)}


def chart_filename(series: ChartSeries) -> str:
    """chart-fv-ml1-gpu0.png: safe in a file name and a URL."""
    host = re.sub(r"[^A-Za-z0-9._-]+", "_", series.host)
    return f"chart-{host}-gpu{series.card}.png"


# --- headroom figures (computed once, shared by the card chart, the fleet chart, the text) ---


@dataclass(frozen=True)
class Headroom:
    """One card's headroom over the window, in GiB per bucket (None where no reading)."""

    free: tuple[float | None, ...]
    plannable: tuple[float | None, ...]  # max(0, free − held now − margin)
    lowest_free: float | None
    lowest_free_at_s: int | None
    lowest_plannable: float | None  # the largest new seat that would have fit all window


@lru_cache(maxsize=4096)
def headroom(series: ChartSeries) -> Headroom:
    """Free and plannable per bucket, and their lows, from one card's series (kept per series)."""
    taken = (series.held_bytes + series.margin_bytes) / GiB
    free = tuple(None if v is None else v / GiB for v in series.free_min)
    plannable = tuple(None if v is None else max(0.0, v - taken) for v in free)
    seen = [(v, t) for v, t in zip(free, series.times_s, strict=False) if v is not None]
    low = min(seen, key=lambda p: (p[0], p[1])) if seen else None
    plan = [v for v in plannable if v is not None]
    return Headroom(
        free,
        plannable,
        low[0] if low else None,
        low[1] if low else None,
        min(plan) if plan else None,
    )


def worst_first(series: Sequence[ChartSeries]) -> list[tuple[str, list[ChartSeries]]]:
    """The hosts, each with its cards, the host with the least free above its margin first."""
    hosts: dict[str, list[ChartSeries]] = {}
    for s in series:
        hosts.setdefault(s.host, []).append(s)

    def key(item: tuple[str, list[ChartSeries]]) -> tuple[float, str]:
        lows = [
            h.lowest_free - s.margin_bytes / GiB
            for s in item[1]
            if (h := headroom(s)).lowest_free is not None
        ]
        return (min(lows) if lows else float("inf"), item[0])

    return sorted(hosts.items(), key=key)


# A fleet's per-card charts: those of the hosts with least headroom only (each takes a tenth of
# a second or more to draw; the small multiples show every host).
DETAIL_HOSTS = 8


def detail_series(series: Sequence[ChartSeries]) -> list[ChartSeries]:
    """The cards whose own charts are drawn: all of them, or the DETAIL_HOSTS worst hosts'."""
    hosts = worst_first(series)
    if len(hosts) <= DETAIL_HOSTS:
        return list(series)
    keep = {host for host, _ in hosts[:DETAIL_HOSTS]}
    return [s for s in series if s.host in keep]


# --- figures -------------------------------------------------------------------------------

# One figure per kind and dpi, reused chart after chart: building the axes, its ticks and their
# text objects cost more than drawing a card's data, so only the data changes between cards.
_FIGURES: dict[tuple[str, int], Any] = {}
# The card figure's panels: (bottom, height) in figure fractions, top to bottom.
_PANELS = {"headroom": (0.655, 0.295), "drift": (0.395, 0.185), "used": (0.05, 0.265)}
_LEFT, _WIDTH = 0.07, 0.71


def figure_for(dpi: int = 90, *, warm: bool = False) -> Any:
    """The figure card charts of this dpi are drawn on, built on first use (call before forking).

    `warm` draws it once, empty: the font files and text caches load then, not in the first chart.
    """
    figure = _figure(dpi)
    if warm:
        figure.canvas.draw()
    return figure


def _figure(dpi: int) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = _FIGURES.get(("card", dpi))
    if figure is None:
        # A bare Figure (not pyplot) keeps no global state and needs no display.
        figure = Figure(figsize=(10, 8.4), dpi=dpi)
        for name, (bottom, height) in _PANELS.items():
            axes = figure.add_axes((_LEFT, bottom, _WIDTH, height), label=name)
            axes.set_ylabel("GiB")
            # Fixed label places: automatic ones measure every tick label again on each draw.
            axes.yaxis.set_label_coords(-0.058, 0.5)
            axes.xaxis.set_label_coords(0.5, -0.1)
            if name != "used":  # one time axis, under the last panel
                axes.tick_params(axis="x", labelbottom=False)
            axes.grid(axis="y", color="#dddddd", linewidth=0.6)
            # Limits are set per chart: the data limits of earlier cards must not leak into later ones.
            axes.set_autoscale_on(False)
        _FIGURES[("card", dpi)] = figure
    return figure


# A legend entry: (label, rectangle style or None, line style or None).
_Entry = tuple[str, dict[str, Any] | None, dict[str, Any] | None]


def render_chart(
    series: ChartSeries, *, colours: dict[str, str] | None = None, dpi: int = 90
) -> bytes:
    """One card's chart as PNG bytes: headroom, then each seat's drift, then used memory stacked.

    Pass `colours` from `seat_colours` to match other cards.
    """
    import numpy as np

    figure = _figure(dpi)
    head, drift, used = figure.axes
    for axes in figure.axes:
        for artist in [*axes.collections, *axes.lines, *axes.patches, *axes.texts]:
            artist.remove()
    # Days since the epoch, as matplotlib's date axis counts them, straight from unix seconds.
    times = np.asarray(series.times_s, dtype=float) / 86400.0
    palette = colours if colours is not None else seat_colours(n for n, _ in series.layers)
    _legend(head, figure, dpi, _headroom_panel(head, times, series))
    _legend(drift, figure, dpi, _drift_panel(drift, times, series, palette))
    _legend(used, figure, dpi, _used_panel(used, times, series, palette))
    for axes in figure.axes:
        _time_axis(axes, series, times)
    buffer = io.BytesIO()
    # Fast zlib: the charts are flat colours, so level 1 costs little size and a tenth of the time.
    figure.savefig(buffer, format="png", pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


def _nan(values: Sequence[float | None]) -> Any:
    import numpy as np

    return np.asarray([np.nan if v is None else v for v in values], dtype=float)


def _headroom_axis(axes: Any, top_gib: float, *, sparse: bool = False) -> None:
    """0 to `top_gib`: linear, or linear for the last few GiB and logarithmic above them."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    top = max(1.0, top_gib * 1.08)
    if top > 4 * LINEAR_GIB:
        top = top_gib * 1.3  # the log part squeezes the top: leave the highest line room
        axes.set_yscale("symlog", linthresh=LINEAR_GIB, linscale=1.6)
        marks = (0, 2, 4, 16, 64, 256) if sparse else (0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 256)
        ticks = [t for t in marks if t <= top]
        axes.set_yticks(ticks)
        axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    else:
        axes.set_yscale("linear")
        if sparse:
            axes.yaxis.set_major_locator(MaxNLocator(3))
    axes.set_ylim(0, top)


def _headroom_panel(axes: Any, times: Any, series: ChartSeries) -> list[_Entry]:
    """Free and plannable per bucket, what held and the margin take, the lowest plannable."""
    room = headroom(series)
    free, plannable = _nan(room.free), _nan(room.plannable)
    legend: list[_Entry] = []
    if len(times) and room.lowest_free is not None:
        taken = {"facecolor": TAKEN_COLOUR, "alpha": 0.13, "linewidth": 0}
        axes.fill_between(times, plannable, free, **taken)
        free_style = {"color": FREE_COLOUR, "linewidth": 1.2}
        axes.plot(times, free, **free_style)
        plan_style = {"color": PLANNABLE_COLOUR, "linewidth": 1.8}
        axes.plot(times, plannable, **plan_style)
        legend += [
            ("free (lowest per bucket)", None, free_style),
            ("plannable: largest new seat\nthat fits (room alone)", None, plan_style),
            (
                f"held {series.held_bytes / GiB:.2f} GiB + margin\n"
                f"{series.margin_bytes / GiB:.2f} GiB",
                taken,
                None,
            ),
        ]
        if room.lowest_plannable is not None:
            low = {"color": "black", "linewidth": 1.0, "linestyle": "--"}
            axes.axhline(room.lowest_plannable, **low)
            legend.append((f"fits all window:\n{room.lowest_plannable:.2f} GiB", None, low))
        top = max(v for v in room.free if v is not None)
    else:
        axes.text(0.5, 0.5, "no free-memory reading", transform=axes.transAxes, ha="center")
        top = 1.0
    _headroom_axis(axes, top)
    axes.set_title(
        f"{series.host} · card {series.card} · headroom: free and plannable "
        f"(per {series.bucket_s // 60} min; held and margin as now)",
        loc="left",
        # A fixed height: an automatic one measures every tick label again on each draw.
        y=1.01,
    )
    return legend


def _drift_panel(
    axes: Any, times: Any, series: ChartSeries, palette: dict[str, str]
) -> list[_Entry]:
    """Each declared seat's mean bytes per bucket minus its declared resident."""
    import numpy as np

    layers = dict(series.layers)
    legend: list[_Entry] = []
    reach = 0.5
    for name, declared in series.seat_declared:
        layer = layers.get(name)
        if layer is None or not len(times):
            continue
        values = (np.asarray(layer, dtype=float) - declared) / GiB
        style = {"color": palette.get(name, OTHER_COLOUR), "linewidth": 1.3}
        axes.plot(times, values, **style)
        reach = max(reach, float(np.abs(values).max()))
        legend.append((name, None, style))
    if legend:
        axes.axhline(0, color="black", linewidth=0.8)
    else:
        axes.text(
            0.5, 0.5, "no declared seat seen on this card", transform=axes.transAxes, ha="center"
        )
    axes.set_yscale("linear")
    axes.set_ylim(-reach * 1.1, reach * 1.1)
    axes.set_title(
        "drift per seat: observed − declared (above 0: more than planned)", loc="left", y=1.01
    )
    return legend


def _used_panel(
    axes: Any, times: Any, series: ChartSeries, palette: dict[str, str]
) -> list[_Entry]:
    """The composition: used memory stacked by seat, with the CUDA and declared totals."""
    import numpy as np

    names = [name for name, _ in series.layers]
    values = (
        np.asarray([layer for _, layer in series.layers], dtype=float).reshape(
            len(names), len(times)
        )
        / GiB
    )
    legend = _stack(axes, times, values, names, palette)
    legend += _reference_lines(axes, series)
    stacked = float(values.sum(axis=0).max()) if values.size else 0.0
    top = max((series.cuda_total_bytes or 0) / GiB, series.declared_bytes / GiB, stacked)
    axes.set_yscale("linear")
    axes.set_ylim(0, max(1.0, top * 1.06))
    axes.set_title("used memory stacked by seat (means per bucket)", loc="left", y=1.01)
    return legend


def _stack(
    axes: Any, times: Any, values: Any, names: list[str], palette: dict[str, str]
) -> list[_Entry]:
    """The seats' layers stacked (unexplained grey on top); their legend entries."""
    fills = [OTHER_COLOUR if name == "other" else palette.get(name, OTHER_COLOUR) for name in names]
    labels = ["unexplained (no seat)" if name == "other" else name for name in names]
    if len(times):
        # Thin white edges keep neighbouring seats apart where their colours are close.
        axes.stackplot(times, *values, colors=fills, edgecolor="white", linewidth=0.4)
    return [(label, {"facecolor": fill}, None) for label, fill in zip(labels, fills, strict=True)]


@dataclass(frozen=True)
class ReferenceLines:
    """The composition chart's reference figures in GiB (drawing units), and their legend text.

    Both drawings (PNG here, SVG in placement.report.svg) take them from `reference_lines`.
    """

    total: float | None  # the card's CUDA total
    declared: float | None  # the declared seats' residents together
    held_floor: float | None  # total − held (reserves, seats down), when anything is held
    total_label: str
    declared_label: str
    # Two lines: in one the label ran past the image's right edge.
    held_label: str


def reference_lines(series: ChartSeries) -> ReferenceLines:
    """CUDA total, declared total and the held band's floor of one card's series."""
    total = series.cuda_total_bytes
    held = bool(series.held_bytes) and total is not None
    return ReferenceLines(
        total=None if total is None else total / GiB,
        declared=series.declared_bytes / GiB if series.declared_bytes else None,
        held_floor=max(0, (total or 0) - series.held_bytes) / GiB if held else None,
        total_label=f"CUDA total {(total or 0) / GiB:.2f} GiB",
        declared_label=f"declared {series.declared_bytes / GiB:.2f} GiB",
        held_label=f"held {series.held_bytes / GiB:.2f} GiB\n(reserves, seats down)",
    )


def _reference_lines(axes: Any, series: ChartSeries) -> list[_Entry]:
    """CUDA total, declared total and the band reserves and down seats hold; their legend entries."""
    legend: list[_Entry] = []
    ref = reference_lines(series)
    if ref.total is not None:
        style = {"color": "black", "linewidth": 1.4}
        axes.axhline(ref.total, **style)
        legend.append((ref.total_label, None, style))
    if ref.declared is not None:
        style = {"color": "#1f4e9e", "linewidth": 1.2, "linestyle": "--"}
        axes.axhline(ref.declared, **style)
        legend.append((ref.declared_label, None, style))
    if ref.held_floor is not None and ref.total is not None:
        band = {"facecolor": TAKEN_COLOUR, "alpha": 0.12, "linewidth": 0}
        axes.axhspan(ref.held_floor, ref.total, **band)
        axes.axhline(ref.held_floor, color=TAKEN_COLOUR, linewidth=1.0, linestyle=":")
        legend.append((ref.held_label, band, None))
    return legend


def _legend(axes: Any, figure: Any, dpi: int, legend: list[_Entry]) -> None:
    """The legend drawn as plain artists right of the axes, one 15 px row per entry.

    matplotlib's Legend lays its boxes out again on every draw, which cost a third of each chart.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    height_px = figure.get_figheight() * dpi * axes.get_position().height
    row = 15 / height_px
    y = 0.965
    for label, box, line in legend:
        if box is not None:
            axes.add_patch(
                Rectangle(
                    (1.015, y - row * 0.3),
                    0.03,
                    row * 0.6,
                    transform=axes.transAxes,
                    clip_on=False,
                    **box,
                )
            )
        if line is not None:
            axes.add_line(
                Line2D([1.015, 1.045], [y, y], transform=axes.transAxes, clip_on=False, **line)
            )
        if "\n" in label:  # hangs from its handle's top instead of overlapping the row above
            axes.text(1.055, y + row * 0.4, label, transform=axes.transAxes, fontsize=8, va="top")
            y -= row * label.count("\n")
        else:
            axes.text(1.055, y, label, transform=axes.transAxes, fontsize=8, va="center")
        y -= row


def _time_axis(axes: Any, series: ChartSeries, times: Any) -> None:
    """The window as limits; whole days on the time axis for a week (the automatic choice for less)."""
    import matplotlib.dates as mdates

    if len(times) > 1:
        axes.set_xlim(times[0], times[-1])
    elif len(times) == 1:
        axes.set_xlim(times[0] - 1 / 24, times[0] + 1 / 24)
    span_s = (series.times_s[-1] - series.times_s[0]) if series.times_s else 0
    locator = (
        mdates.DayLocator(tz=UTC)  # type: ignore[no-untyped-call]
        if span_s >= 2 * 86400
        else mdates.AutoDateLocator(minticks=4, maxticks=8, tz=UTC)  # type: ignore[no-untyped-call]
    )
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]


# --- the fleet: small multiples ---------------------------------------------------------------

_FLEET_COLUMNS = 4
CARD_COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
)  # fmt: skip
# A tile's plot area inside its 1 × 1 cell (the title above it, the scale to its left).
TILE_X = (0.07, 0.98)
TILE_Y = (0.28, 0.86)  # measured down from the cell's top
LOG_SHARE = 0.6  # of a tile's height, for free memory above the last 4 GiB


def tile_height(values_gib: Any, top_gib: float) -> Any:
    """0..1 up a tile: linear to the top, or linear over the last 4 GiB and logarithmic above.

    Takes and returns numpy arrays (NaN stays NaN: a gap in the line).
    """
    import numpy as np

    value = np.clip(np.asarray(values_gib, dtype=float), 0.0, top_gib)
    if top_gib <= 4 * LINEAR_GIB:
        return value / top_gib
    with np.errstate(divide="ignore", invalid="ignore"):
        high = (1 - LOG_SHARE) + LOG_SHARE * np.log(value / LINEAR_GIB) / np.log(
            top_gib / LINEAR_GIB
        )
    return np.where(value <= LINEAR_GIB, (1 - LOG_SHARE) * value / LINEAR_GIB, high)


def render_fleet(series: Sequence[ChartSeries], *, dpi: int = 72) -> bytes:
    """Free memory of every card, one small tile per host, the host with least room first.

    All tiles share one axes drawn in a few collections: one axes per host cost a second per
    ten hosts, most of it laying out tick labels.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    hosts = worst_first(series)
    rows = max(1, (len(hosts) + _FLEET_COLUMNS - 1) // _FLEET_COLUMNS)
    figure = Figure(figsize=(14, 0.5 + rows * 1.9), dpi=dpi)
    axes = figure.add_axes((0.005, 0.0, 0.99, 1 - 0.5 / figure.get_figheight()))
    axes.set_axis_off()
    axes.set_xlim(0, _FLEET_COLUMNS)
    axes.set_ylim(rows, 0)  # row 0 at the top
    lines: list[Any] = []
    for i, (host, cards) in enumerate(hosts):
        _fleet_tile(axes, lines, i, host, cards)
    from matplotlib.collections import LineCollection

    for segments, style in _group(lines):
        axes.add_collection(LineCollection(segments, **style))
    figure.text(
        0.01,
        1 - 0.3 / figure.get_figheight(),
        "Free memory per card (lowest per bucket), GiB, over the window; dashed: the host's "
        "margin; faint lines: midnight UTC. Card colours:",
        fontsize=9,
        va="center",
    )
    for c, colour in enumerate(CARD_COLOURS):
        figure.text(
            0.68 + c * 0.035, 1 - 0.3 / figure.get_figheight(), f"■ {c}", color=colour,
            fontsize=9, va="center",
        )  # fmt: skip
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


_Line = tuple[Any, tuple[tuple[str, Any], ...]]  # (points, style)


def _group(lines: list[_Line]) -> list[tuple[list[Any], dict[str, Any]]]:
    """Segments of one style together: one collection each."""
    groups: dict[tuple[tuple[str, Any], ...], list[Any]] = {}
    for points, style in lines:
        groups.setdefault(style, []).append(points)
    return [(segments, dict(style)) for style, segments in groups.items()]


def _fleet_tile(axes: Any, lines: list[_Line], i: int, host: str, cards: list[ChartSeries]) -> None:
    """One host's tile: its frame, scale, cards' free memory, margin, and its lowest free."""
    import numpy as np

    column, row = i % _FLEET_COLUMNS, i // _FLEET_COLUMNS
    rooms = [(s, headroom(s)) for s in cards]
    highs = [max((v for v in room.free if v is not None), default=1.0) for _, room in rooms]
    top = max(1.0, max(highs, default=1.0) * 1.05)
    first = min((s.times_s[0] for s in cards if s.times_s), default=0)
    last = max((s.times_s[-1] for s in cards if s.times_s), default=1)
    x0, x1 = column + TILE_X[0], column + TILE_X[1]

    def x(t: Any) -> Any:
        return x0 + (x1 - x0) * (np.asarray(t, dtype=float) - first) / max(1, last - first)

    def y(v: Any) -> Any:
        return row + TILE_Y[1] - (TILE_Y[1] - TILE_Y[0]) * tile_height(v, top)

    def flat(xs: Any, ys: Any) -> Any:
        return np.column_stack((xs, ys))

    bottom, ceiling = float(y(0.0)), float(y(top))
    frame = (("color", "#999999"), ("linewidth", 0.6))
    lines.append((((x0, bottom), (x1, bottom), (x1, ceiling), (x0, ceiling), (x0, bottom)), frame))
    faint = (("color", "#e3e3e3"), ("linewidth", 0.5))
    for mark in tile_scale(top):
        at = float(y(mark))
        lines.append((((x0, at), (x1, at)), faint))
        axes.text(x0 - 0.005, at, f"{mark:g}", fontsize=6, ha="right", va="center")
    for midnight in range((first // 86400 + 1) * 86400, last, 86400):
        at = float(x(midnight))
        lines.append((((at, bottom), (at, ceiling)), faint))
    worst: tuple[float, int, int] | None = None
    for s, room in rooms:
        style = (("color", CARD_COLOURS[s.card % len(CARD_COLOURS)]), ("linewidth", 0.8))
        if len(s.times_s) > 1:
            # NaN where no reading: the line breaks there.
            lines.append((flat(x(s.times_s), y(_nan(room.free))), style))
        if room.lowest_free is not None and (worst is None or room.lowest_free < worst[0]):
            worst = (room.lowest_free, s.card, room.lowest_free_at_s or 0)
    margin = cards[0].margin_bytes / GiB if cards else 0.0
    if margin:
        dashed = (("color", "black"), ("linewidth", 0.7), ("linestyle", "--"))
        at = float(y(margin))
        lines.append((((x0, at), (x1, at)), dashed))
    axes.text(x0, row + TILE_Y[0] - 0.04, tile_title(i, host, worst), fontsize=8, va="bottom")


def tile_scale(top: float) -> list[float]:
    """The values a tile labels: 0, the last 4 GiB's edge, and a power of two near the top."""
    if top <= 4 * LINEAR_GIB:
        return [0.0, round(top / 2, 1)]
    marks = [0.0, LINEAR_GIB]
    import math

    high = 2 ** int(math.log2(top))
    return marks + ([float(high)] if high > 2 * LINEAR_GIB else [])


def tile_title(i: int, host: str, worst: tuple[float, int, int] | None) -> str:
    from datetime import datetime

    if worst is None:
        return f"{i + 1}. {host} · no free-memory reading"
    at = datetime.fromtimestamp(worst[2], UTC).strftime("%a %H:%M")
    return f"{i + 1}. {host} · lowest free {worst[0]:.2f} GiB (card {worst[1]}, {at})"
