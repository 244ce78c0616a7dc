"""Charts of the weekly report: per card, used memory over the window stacked by seat, as PNG bytes.

matplotlib with the Agg backend only (no display); nothing here writes files.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from datetime import UTC
from typing import Any

from placement.report import ChartSeries
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


def figure_for(dpi: int = 90) -> Any:
    """The figure charts of this dpi are drawn on, built on first use (call before forking)."""
    return _figure(dpi)


def _figure(dpi: int) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = _FIGURES.get(dpi)
    if figure is None:
        # A bare Figure (not pyplot) keeps no global state and needs no display.
        figure = Figure(figsize=(10, 3.4), dpi=dpi)
        figure.subplots_adjust(left=0.06, right=0.78, top=0.9, bottom=0.12)
        axes = figure.add_subplot()
        axes.set_ylabel("GiB")
        axes.grid(axis="y", color="#dddddd", linewidth=0.6)
        # Limits are set per chart: the data limits of earlier cards must not leak into later ones.
        axes.set_autoscale_on(False)
        _FIGURES[dpi] = figure
    return figure


def render_chart(
    series: ChartSeries, *, colours: dict[str, str] | None = None, dpi: int = 90
) -> bytes:
    """One card's chart as PNG bytes; pass `colours` from `seat_colours` to match other cards."""
    import matplotlib.dates as mdates
    import numpy as np

    figure = _figure(dpi)
    axes = figure.axes[0]
    for artist in [*axes.collections, *axes.lines, *axes.patches]:
        artist.remove()
    legend = axes.get_legend()
    if legend is not None:
        legend.remove()
    # Days since the epoch, as matplotlib's date axis counts them, straight from unix seconds.
    times = np.asarray(series.times_s, dtype=float) / 86400.0
    names = [name for name, _ in series.layers]
    values = (
        np.asarray([layer for _, layer in series.layers], dtype=float).reshape(
            len(names), len(times)
        )
        / GiB
    )
    palette = colours if colours is not None else seat_colours(names)
    fills = [
        _OTHER_COLOUR if name == "other" else palette.get(name, _OTHER_COLOUR) for name in names
    ]
    labels = ["unexplained (no seat)" if name == "other" else name for name in names]
    if len(times):
        # Thin white edges keep neighbouring seats apart where their colours are close.
        axes.stackplot(
            times, *values, labels=labels, colors=fills, edgecolor="white", linewidth=0.4
        )
    total = series.cuda_total_bytes
    if total is not None:
        axes.axhline(
            total / GiB, color="black", linewidth=1.4, label=f"CUDA total {total / GiB:.2f} GiB"
        )
    if series.declared_bytes:
        axes.axhline(
            series.declared_bytes / GiB,
            color="#1f4e9e",
            linewidth=1.2,
            linestyle="--",
            label=f"declared {series.declared_bytes / GiB:.2f} GiB",
        )
    if series.held_bytes and total is not None:
        floor = max(0, total - series.held_bytes) / GiB
        axes.axhspan(
            floor,
            total / GiB,
            facecolor="#b22222",
            alpha=0.12,
            linewidth=0,
            label=f"held {series.held_bytes / GiB:.2f} GiB (reserves, seats down)",
        )
        axes.axhline(floor, color="#b22222", linewidth=1.0, linestyle=":")
    stacked = float(values.sum(axis=0).max()) if values.size else 0.0
    top = max((total or 0) / GiB, series.declared_bytes / GiB, stacked)
    axes.set_ylim(0, max(1.0, top * 1.06))
    if len(times) > 1:
        axes.set_xlim(times[0], times[-1])
    elif len(times) == 1:
        axes.set_xlim(times[0] - 1 / 24, times[0] + 1 / 24)
    axes.set_title(
        f"{series.host} · card {series.card} · used memory (means per {series.bucket_s // 60} min)",
        loc="left",
        # A fixed height: an automatic one measures every tick label again on each draw.
        y=1.01,
    )
    # Whole days for a week, the automatic choice for shorter windows.
    span_s = (series.times_s[-1] - series.times_s[0]) if series.times_s else 0
    locator = (
        mdates.DayLocator(tz=UTC)  # type: ignore[no-untyped-call]
        if span_s >= 2 * 86400
        else mdates.AutoDateLocator(minticks=4, maxticks=8, tz=UTC)  # type: ignore[no-untyped-call]
    )
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    buffer = io.BytesIO()
    # Fast zlib: the charts are flat colours, so level 1 costs little size and a tenth of the time.
    figure.savefig(buffer, format="png", pil_kwargs={"compress_level": 1})
    return buffer.getvalue()
