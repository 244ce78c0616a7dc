"""Charts of the weekly report: per card, used memory over the window stacked by seat, as PNG bytes.

matplotlib with the Agg backend only (no display); nothing here writes files.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from datetime import UTC
from typing import Any

from placement.report.rows import ChartSeries
from seats.units import GiB

# tab20 without its greys, strong shades first: seats get them in name order.
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
    "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2",
    "#dbdb8d", "#9edae5",
)  # fmt: skip
_OTHER_COLOUR = "#7f7f7f"


def seat_colours(names: Iterable[str]) -> dict[str, str]:
    """One distinct colour per seat, by sorted name: the same seat has the same colour on every card."""
    ordered = sorted(set(names) - {"other"})
    return {name: _PALETTE[i % len(_PALETTE)] for i, name in enumerate(ordered)}


def chart_filename(series: ChartSeries) -> str:
    """chart-fv-ml1-gpu0.png: safe in a file name and a URL."""
    host = re.sub(r"[^A-Za-z0-9._-]+", "_", series.host)
    return f"chart-{host}-gpu{series.card}.png"


# One figure per process and dpi, reused chart after chart: building the axes, its ticks and
# their text objects cost more than drawing a card's data, so only the data changes between cards.
_FIGURES: dict[int, Any] = {}
_AXES_HEIGHT = 0.78  # of the figure's height


def figure_for(dpi: int = 90, *, warm: bool = False) -> Any:
    """The figure charts of this dpi are drawn on, built on first use (call before forking).

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

    figure = _FIGURES.get(dpi)
    if figure is None:
        # A bare Figure (not pyplot) keeps no global state and needs no display.
        figure = Figure(figsize=(10, 3.4), dpi=dpi)
        figure.subplots_adjust(left=0.06, right=0.78, top=0.12 + _AXES_HEIGHT, bottom=0.12)
        axes = figure.add_subplot()
        axes.set_ylabel("GiB")
        # Fixed label places: automatic ones measure every tick label again on each draw.
        axes.yaxis.set_label_coords(-0.045, 0.5)
        axes.xaxis.set_label_coords(0.5, -0.1)
        axes.grid(axis="y", color="#dddddd", linewidth=0.6)
        # Limits are set per chart: the data limits of earlier cards must not leak into later ones.
        axes.set_autoscale_on(False)
        _FIGURES[dpi] = figure
    return figure


# A legend entry: (label, rectangle style or None, line style or None).
_Entry = tuple[str, dict[str, Any] | None, dict[str, Any] | None]


def render_chart(
    series: ChartSeries, *, colours: dict[str, str] | None = None, dpi: int = 90
) -> bytes:
    """One card's chart as PNG bytes; pass `colours` from `seat_colours` to match other cards."""
    import numpy as np

    figure = _figure(dpi)
    axes = figure.axes[0]
    for artist in [*axes.collections, *axes.lines, *axes.patches, *axes.texts]:
        artist.remove()
    # Days since the epoch, as matplotlib's date axis counts them, straight from unix seconds.
    times = np.asarray(series.times_s, dtype=float) / 86400.0
    names = [name for name, _ in series.layers]
    values = (
        np.asarray([layer for _, layer in series.layers], dtype=float).reshape(
            len(names), len(times)
        )
        / GiB
    )
    legend = _stack(axes, times, values, names, colours)
    legend += _reference_lines(axes, series)
    _legend(axes, figure, dpi, legend)
    stacked = float(values.sum(axis=0).max()) if values.size else 0.0
    top = max((series.cuda_total_bytes or 0) / GiB, series.declared_bytes / GiB, stacked)
    axes.set_ylim(0, max(1.0, top * 1.06))
    if len(times) > 1:
        axes.set_xlim(times[0], times[-1])
    elif len(times) == 1:
        axes.set_xlim(times[0] - 1 / 24, times[0] + 1 / 24)
    _time_axis(axes, series)
    buffer = io.BytesIO()
    # Fast zlib: the charts are flat colours, so level 1 costs little size and a tenth of the time.
    figure.savefig(buffer, format="png", pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


def _stack(
    axes: Any, times: Any, values: Any, names: list[str], colours: dict[str, str] | None
) -> list[_Entry]:
    """The seats' layers stacked (unexplained grey on top); their legend entries."""
    palette = colours if colours is not None else seat_colours(names)
    fills = [
        _OTHER_COLOUR if name == "other" else palette.get(name, _OTHER_COLOUR) for name in names
    ]
    labels = ["unexplained (no seat)" if name == "other" else name for name in names]
    if len(times):
        # Thin white edges keep neighbouring seats apart where their colours are close.
        axes.stackplot(times, *values, colors=fills, edgecolor="white", linewidth=0.4)
    return [(label, {"facecolor": fill}, None) for label, fill in zip(labels, fills, strict=True)]


def _reference_lines(axes: Any, series: ChartSeries) -> list[_Entry]:
    """CUDA total, declared total and the band reserves and down seats hold; their legend entries."""
    legend: list[_Entry] = []
    total = series.cuda_total_bytes
    if total is not None:
        style = {"color": "black", "linewidth": 1.4}
        axes.axhline(total / GiB, **style)
        legend.append((f"CUDA total {total / GiB:.2f} GiB", None, style))
    if series.declared_bytes:
        style = {"color": "#1f4e9e", "linewidth": 1.2, "linestyle": "--"}
        axes.axhline(series.declared_bytes / GiB, **style)
        legend.append((f"declared {series.declared_bytes / GiB:.2f} GiB", None, style))
    if series.held_bytes and total is not None:
        floor = max(0, total - series.held_bytes) / GiB
        band = {"facecolor": "#b22222", "alpha": 0.12, "linewidth": 0}
        axes.axhspan(floor, total / GiB, **band)
        axes.axhline(floor, color="#b22222", linewidth=1.0, linestyle=":")
        legend.append(
            # Two lines: in one the label ran past the image's right edge.
            (f"held {series.held_bytes / GiB:.2f} GiB\n(reserves, seats down)", band, None)
        )
    return legend


def _legend(axes: Any, figure: Any, dpi: int, legend: list[_Entry]) -> None:
    """The legend drawn as plain artists right of the axes, one 15 px row per entry.

    matplotlib's Legend lays its boxes out again on every draw, which cost a third of each chart.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    row = 15 / (figure.get_figheight() * dpi * _AXES_HEIGHT)  # 15 px per entry
    for i, (label, box, line) in enumerate(legend):
        y = 0.965 - i * row
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
        else:
            axes.text(1.055, y, label, transform=axes.transAxes, fontsize=8, va="center")


def _time_axis(axes: Any, series: ChartSeries) -> None:
    """The title, and whole days on the time axis for a week (the automatic choice for less)."""
    import matplotlib.dates as mdates

    axes.set_title(
        f"{series.host} · card {series.card} · used memory (means per {series.bucket_s // 60} min)",
        loc="left",
        # A fixed height: an automatic one measures every tick label again on each draw.
        y=1.01,
    )
    span_s = (series.times_s[-1] - series.times_s[0]) if series.times_s else 0
    locator = (
        mdates.DayLocator(tz=UTC)  # type: ignore[no-untyped-call]
        if span_s >= 2 * 86400
        else mdates.AutoDateLocator(minticks=4, maxticks=8, tz=UTC)  # type: ignore[no-untyped-call]
    )
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]
