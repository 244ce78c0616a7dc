"""The weekly report's charts as SVG, its one drawing: inline in the HTML page, and files beside
the Markdown report. Per card its headroom, each seat's drift and used memory stacked by seat; for
a fleet, small multiples of each host's free memory.

Pure Python, one path per series: no plotting library is imported, so a report draws its charts
in milliseconds on one core. What is drawn comes from `charts` in bytes; only the pixel positions
here are worked out in GiB.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from html import escape

from placement.report.charts import (
    CARD_COLOURS,
    FREE_COLOUR,
    LINEAR_GIB,
    LOG_SHARE,
    OTHER_COLOUR,
    PLANNABLE_COLOUR,
    TAKEN_COLOUR,
    TILE_X,
    TILE_Y,
    headroom,
    reference_lines,
    seat_colours,
    tile_scale,
    tile_title,
    worst_first,
)
from placement.report.rows import ChartSeries
from seats.units import GiB, format_bytes

_FONT = "DejaVu Sans, Verdana, Arial, sans-serif"


def gib(values: Sequence[float | None]) -> list[float | None]:
    """Bytes as GiB, for pixel positions only (None stays None: a gap in the line)."""
    return [None if v is None else v / GiB for v in values]


# --- scales -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """Values (GiB) to 0..1 up an axis: linear from `low` to `top`, or, with `log`, linear over
    the last 4 GiB and logarithmic above them (a symmetric log scale, linear part 1.6 decades)."""

    low: float
    top: float
    log: bool = False

    def fraction(self, value: float) -> float:
        # Clamped: nothing is drawn outside its plot area, so no clip path is needed.
        value = min(max(value, self.low), self.top)
        if not self.log:
            return (value - self.low) / (self.top - self.low)
        return _symlog(value) / _symlog(self.top)


_LINEAR_DECADES = 1.6 / (1 - 1 / 10)  # symlog's linear part, in decades of its log part


def _symlog(value: float) -> float:
    if value <= LINEAR_GIB:
        return _LINEAR_DECADES * value / LINEAR_GIB
    return _LINEAR_DECADES + math.log10(value / LINEAR_GIB)


def nice_ticks(low: float, high: float, most: int = 6) -> list[float]:
    """Round values from `low` to `high`, at most `most` + 1 of them, 1, 2, 2.5 or 5 × 10^k apart."""
    span = high - low
    if span <= 0:
        return [low]
    magnitude = 10 ** math.floor(math.log10(span / most))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if span / (m * magnitude) <= most)
    first = math.ceil(low / step - 1e-9) * step
    count = int((high - first) / step + 1e-9) + 1
    return [round(first + i * step, 9) for i in range(count)]


def decimate(points: Sequence[tuple[float, float | None]]) -> list[tuple[float, float | None]]:
    """At most two points per pixel column, its lowest and highest in time order (a spike or a dip
    stays); None (no reading) breaks the line and is kept. Points are (x px, y px), x ascending."""
    if len(points) < 2 or len(points) <= 2 * (points[-1][0] - points[0][0] + 1):
        return list(points)
    out: list[tuple[float, float | None]] = []
    group: list[tuple[float, float]] = []
    column = None
    for x, y in points:
        if y is None or int(x) != column:
            out += _extremes(group)
            group = []
            column = int(x)
        if y is None:
            out.append((x, None))
        else:
            group.append((x, y))
    return out + _extremes(group)


def _extremes(group: list[tuple[float, float]]) -> list[tuple[float, float | None]]:
    if len(group) <= 2:
        return list(group)
    low = min(range(len(group)), key=lambda i: group[i][1])
    high = max(range(len(group)), key=lambda i: group[i][1])
    return [group[i] for i in sorted({low, high})]


def path(points: Sequence[tuple[float, float | None]]) -> str:
    """An SVG path's `d` through the points, lifting the pen at each None."""
    parts: list[str] = []
    pen = "M"
    for x, y in decimate(points):
        if y is None:
            pen = "M"
            continue
        parts.append(f"{pen}{x:.1f} {y:.1f}")
        pen = "L"
    return "".join(parts)


# --- one plot area ------------------------------------------------------------------------


@dataclass(frozen=True)
class Plot:
    """A plot area in pixels (left, top, width, height) over a time window and a value scale."""

    left: float
    top: float
    width: float
    height: float
    first_s: float
    last_s: float
    scale: Scale

    def x(self, seconds: float) -> float:
        return self.left + self.width * (seconds - self.first_s) / (self.last_s - self.first_s)

    def y(self, value: float) -> float:
        return self.top + self.height * (1 - self.scale.fraction(value))

    def line(self, times: Sequence[int], values: Sequence[float | None]) -> str:
        return path(
            [
                (self.x(t), None if v is None else self.y(v))
                for t, v in zip(times, values, strict=False)
            ]
        )

    def band(self, times: Sequence[int], low: Sequence[float], high: Sequence[float]) -> str:
        """A closed outline between two series (forward along `high`, back along `low`)."""
        top = [f"{self.x(t):.1f} {self.y(v):.1f}" for t, v in zip(times, high, strict=True)]
        bottom = [f"{self.x(t):.1f} {self.y(v):.1f}" for t, v in zip(times, low, strict=True)]
        return "M" + " L".join(top + bottom[::-1]) + "Z"

    def hline(self, value: float, style: str) -> str:
        at = self.y(value)
        return (
            f'<line x1="{self.left:.1f}" x2="{self.left + self.width:.1f}" y1="{at:.1f}" '
            f'y2="{at:.1f}" {style}/>'
        )


def _text(x: float, y: float, text: str, attrs: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}"{" " + attrs if attrs else ""}>{escape(text)}</text>'


def _frame(plot: Plot, ticks: Sequence[float], *, gib_label: bool = True) -> list[str]:
    """The grid at the value ticks, their labels, the box and the axis label."""
    out = [
        plot.hline(v, 'stroke="#dddddd" stroke-width="0.8"') for v in ticks if v != plot.scale.low
    ]
    for value in ticks:
        out.append(_text(plot.left - 5, plot.y(value) + 4, f"{value:g}", 'text-anchor="end"'))
    out.append(
        f'<rect x="{plot.left:.1f}" y="{plot.top:.1f}" width="{plot.width:.1f}" '
        f'height="{plot.height:.1f}" fill="none" stroke="#333333" stroke-width="0.8"/>'
    )
    if gib_label:
        middle = plot.top + plot.height / 2
        out.append(
            _text(
                18, middle, "GiB", f'text-anchor="middle" transform="rotate(-90 18 {middle:.1f})"'
            )
        )
    return out


def time_ticks(first_s: int, last_s: int) -> list[tuple[int, str]]:
    """Midnights (UTC) for two days or more, else round hours or minutes: at most 8 or so marks."""
    span = max(1, last_s - first_s)
    if span >= 2 * 86400:
        step = 86400 * math.ceil(span / 86400 / 8)
    else:
        steps = (300, 600, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
        step = next(s for s in steps if span / s <= 8)
    marks = []
    for at in range(-(-first_s // step) * step, last_s + 1, step):
        moment = datetime.fromtimestamp(at, UTC)
        marks.append((at, moment.strftime("%b %d" if at % 86400 == 0 else "%H:%M")))
    return marks


def _time_axis(plot: Plot, marks: Sequence[tuple[int, str]], *, labels: bool) -> list[str]:
    bottom = plot.top + plot.height
    out = []
    for at, label in marks:
        x = plot.x(at)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom:.1f}" y2="{bottom + 4:.1f}" stroke="#333333"/>'
        )
        if labels:
            out.append(_text(x, bottom + 17, label, 'text-anchor="middle"'))
    return out


# --- legends ------------------------------------------------------------------------------

# A legend entry: (label, fill of a box or None, stroke attributes of a line or None).
Entry = tuple[str, str | None, str | None]


def _legend(x: float, top: float, entries: Sequence[Entry]) -> list[str]:
    """Entries right of a plot, one 15 px row per line of label."""
    out: list[str] = []
    y = top + 8
    for label, box, line in entries:
        if box is not None:
            out.append(f'<rect x="{x:.1f}" y="{y - 4:.1f}" width="20" height="8" {box}/>')
        if line is not None:
            out.append(f'<line x1="{x:.1f}" x2="{x + 20:.1f}" y1="{y:.1f}" y2="{y:.1f}" {line}/>')
        for i, part in enumerate(label.split("\n")):
            out.append(_text(x + 26, y + 4 + 13 * i, part, 'font-size="10"'))
        y += 15 + 13 * label.count("\n")
    return out


# --- one card -----------------------------------------------------------------------------

WIDTH, HEIGHT = 900, 756
_LEFT, _PLOT_WIDTH = 63.0, 639.0
_LEGEND_X = _LEFT + _PLOT_WIDTH + 12
# The panels, top to bottom: (top, height) in pixels.
_PANELS = {"headroom": (38.0, 223.0), "drift": (318.0, 140.0), "used": (518.0, 200.0)}


def card_chart(series: ChartSeries, colours: dict[str, str] | None = None) -> str:
    """One card's chart: headroom, then each seat's drift, then used memory stacked by seat.

    Pass `colours` from `charts.seat_colours` to match other cards.
    """
    palette = colours if colours is not None else seat_colours(n for n, _ in series.layers)
    times = series.times_s
    first, last = (times[0], times[-1]) if times else (0, 1)
    if first == last:
        first, last = first - 3600, last + 3600
    marks = time_ticks(first, last)
    body: list[str] = []
    for name, draw in (("headroom", _headroom), ("drift", _drift), ("used", _used)):
        top, height = _PANELS[name]
        parts, scale, ticks, entries = draw(series, palette)
        plot = Plot(_LEFT, top, _PLOT_WIDTH, height, first, last, scale)
        body += _frame(plot, ticks)
        body += [part(plot) for part in parts]
        body += _time_axis(plot, marks, labels=name == "used")
        body += _legend(_LEGEND_X, top, entries)
        body.append(_text(_LEFT, top - 7, _titles(series)[name], 'font-size="13"'))
    alt = f"{series.host} card {series.card}: headroom, drift per seat, used memory"
    return _svg(WIDTH, HEIGHT, alt, body)


def _svg(width: int, height: int, alt: str, body: Sequence[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(alt)}" '
        f'font-family="{_FONT}" font-size="12" fill="#1d1d1f">'
        f"<title>{escape(alt)}</title>"
        f'<rect width="{width}" height="{height}" fill="white"/>' + "".join(body) + "</svg>"
    )


def _titles(series: ChartSeries) -> dict[str, str]:
    return {
        "headroom": f"{series.host} · card {series.card} · headroom: free and plannable "
        f"(per {series.bucket_s // 60} min; held and margin as now)",
        "drift": "drift per seat: observed − declared (above 0: more than planned)",
        "used": "used memory stacked by seat (means per bucket)",
    }


# A panel: the parts to draw (each given the plot area), its scale, its value ticks, its legend.
_Part = Callable[[Plot], str]
_Panel = tuple[list[_Part], Scale, list[float], list[Entry]]


def _draw_line(plot: Plot, times: Sequence[int], values: Sequence[float | None], style: str) -> str:
    return f'<path d="{plot.line(times, values)}" fill="none" {style}/>'


def _draw_band(
    plot: Plot, times: Sequence[int], low: Sequence[float | None], high: Sequence[float | None],
    style: str,
) -> str:  # fmt: skip
    """The area between two series, in runs where both have a reading."""
    out = []
    for run in _runs(low, high):
        t = [times[i] for i in run]
        out.append(
            f'<path d="{plot.band(t, [low[i] or 0.0 for i in run], [high[i] or 0.0 for i in run])}" {style}/>'
        )
    return "".join(out)


def _runs(*series: Sequence[float | None]) -> Iterator[list[int]]:
    run: list[int] = []
    for i in range(len(series[0])):
        if all(s[i] is not None for s in series):
            run.append(i)
        elif run:
            yield run
            run = []
    if run:
        yield run


def _draw_hline(plot: Plot, value: float, style: str) -> str:
    return plot.hline(value, style)


def _draw_span(plot: Plot, low: float, high: float, style: str) -> str:
    top, bottom = plot.y(high), plot.y(low)
    return (
        f'<rect x="{plot.left:.1f}" y="{top:.1f}" width="{plot.width:.1f}" '
        f'height="{max(0.0, bottom - top):.1f}" {style}/>'
    )


def _draw_note(plot: Plot, text: str) -> str:
    return _text(
        plot.left + plot.width / 2, plot.top + plot.height / 2, text, 'text-anchor="middle"'
    )


def _draw_stack(
    plot: Plot, times: Sequence[int], layers: Sequence[tuple[str, Sequence[float]]]
) -> str:
    """Layers stacked from zero, each a closed outline with a thin white edge."""
    out = []
    below = [0.0] * len(times)
    for fill, values in layers:
        above = [b + v for b, v in zip(below, values, strict=True)]
        out.append(
            f'<path d="{plot.band(times, below, above)}" fill="{fill}" stroke="white" '
            'stroke-width="0.4"/>'
        )
        below = above
    return "".join(out)


def _headroom(series: ChartSeries, palette: dict[str, str]) -> _Panel:
    """Free and plannable per bucket, what held and the margin take, the lowest plannable."""
    room = headroom(series)
    if room.lowest_free_bytes is None or not series.times_s:
        return (
            [partial(_draw_note, text="no free-memory reading")],
            Scale(0, 1),
            [0.0, 0.5, 1.0],
            [],
        )
    taken = f'fill="{TAKEN_COLOUR}" fill-opacity="0.13"'
    free = f'stroke="{FREE_COLOUR}" stroke-width="1.5"'
    plan = f'stroke="{PLANNABLE_COLOUR}" stroke-width="2.2"'
    times = series.times_s
    free_gib, plannable_gib = gib(room.free_bytes), gib(room.plannable_bytes)
    parts: list[_Part] = [
        partial(_draw_band, times=times, low=plannable_gib, high=free_gib, style=taken),
        partial(_draw_line, times=times, values=free_gib, style=free),
        partial(_draw_line, times=times, values=plannable_gib, style=plan),
    ]
    entries: list[Entry] = [
        ("free (lowest per bucket)", None, free),
        ("plannable: largest new seat\nthat fits (room alone)", None, plan),
        (
            f"held {format_bytes(series.held_bytes)} + margin\n{format_bytes(series.margin_bytes)}",
            taken,
            None,
        ),
    ]
    if room.lowest_plannable_bytes is not None:
        low = 'stroke="black" stroke-width="1.2" stroke-dasharray="5 3"'
        at = room.lowest_plannable_bytes / GiB
        parts.append(partial(_draw_hline, value=at, style=low))
        entries.append(
            (f"fits all window:\n{format_bytes(room.lowest_plannable_bytes)}", None, low)
        )
    scale, ticks = headroom_scale(max(v for v in room.free_bytes if v is not None) / GiB)
    return parts, scale, ticks, entries


def headroom_scale(top_gib: float) -> tuple[Scale, list[float]]:
    """0 to a little above `top_gib`: linear, or past 16 GiB the last 4 GiB linear and log above."""
    top = max(1.0, top_gib * 1.08)
    if top <= 4 * LINEAR_GIB:
        return Scale(0.0, top), [t for t in nice_ticks(0.0, top) if t <= top]
    top = top_gib * 1.3  # the log part squeezes the top: leave the highest line room
    marks = (0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    return Scale(0.0, top, log=True), [float(m) for m in marks if m <= top]


def _drift(series: ChartSeries, palette: dict[str, str]) -> _Panel:
    """Each declared seat's mean bytes per bucket minus its declared resident."""
    layers = dict(series.layers)
    parts: list[_Part] = []
    entries: list[Entry] = []
    reach = 0.5
    for name, declared in series.seat_declared:
        layer = layers.get(name)
        if layer is None or not series.times_s:
            continue
        values = [(v - declared) / GiB for v in layer]
        style = f'stroke="{palette.get(name, OTHER_COLOUR)}" stroke-width="1.6"'
        parts.append(partial(_draw_line, times=series.times_s, values=values, style=style))
        reach = max(reach, max(abs(v) for v in values))
        entries.append((name, None, style))
    if entries:
        parts.append(partial(_draw_hline, value=0.0, style='stroke="black" stroke-width="1"'))
    else:
        parts.append(partial(_draw_note, text="no declared seat seen on this card"))
    scale = Scale(-reach * 1.1, reach * 1.1)
    return parts, scale, nice_ticks(scale.low, scale.top, 4), entries


def _used(series: ChartSeries, palette: dict[str, str]) -> _Panel:
    """The composition: used memory stacked by seat, with the CUDA and declared totals."""
    fills = [
        OTHER_COLOUR if name == "other" else palette.get(name, OTHER_COLOUR)
        for name, _ in series.layers
    ]
    layers = [
        (fill, [v / GiB for v in values])
        for fill, (_, values) in zip(fills, series.layers, strict=True)
    ]
    parts = [partial(_draw_stack, times=series.times_s, layers=layers)] if series.times_s else []
    entries: list[Entry] = [
        ("unexplained (no seat)" if name == "other" else name, f'fill="{fill}"', None)
        for fill, (name, _) in zip(fills, series.layers, strict=True)
    ]
    lines, more = _reference_lines(series)
    stacked = max(
        (sum(column) for column in zip(*(v for _, v in layers), strict=True)), default=0.0
    )
    total = (series.cuda_total_bytes or 0) / GiB
    top = max(1.0, max(total, series.declared_bytes / GiB, stacked) * 1.06)
    return parts + lines, Scale(0.0, top), nice_ticks(0.0, top, 5), entries + more


def _reference_lines(series: ChartSeries) -> tuple[list[_Part], list[Entry]]:
    """CUDA total, declared total and the band reserves and down seats hold; their legend entries."""
    parts: list[_Part] = []
    entries: list[Entry] = []
    ref = reference_lines(series)
    if ref.held_floor_bytes is not None and ref.total_bytes is not None:
        band = f'fill="{TAKEN_COLOUR}" fill-opacity="0.12"'
        floor, total = ref.held_floor_bytes / GiB, ref.total_bytes / GiB
        parts.append(partial(_draw_span, low=floor, high=total, style=band))
        dotted = f'stroke="{TAKEN_COLOUR}" stroke-width="1.2" stroke-dasharray="1.5 2"'
        parts.append(partial(_draw_hline, value=floor, style=dotted))
        entries.append((ref.held_label, band, None))
    if ref.total_bytes is not None:
        style = 'stroke="black" stroke-width="1.7"'
        parts.append(partial(_draw_hline, value=ref.total_bytes / GiB, style=style))
        entries.insert(0, (ref.total_label, None, style))
    if ref.declared_bytes is not None:
        style = f'stroke="{PLANNABLE_COLOUR}" stroke-width="1.5" stroke-dasharray="5 3"'
        parts.append(partial(_draw_hline, value=ref.declared_bytes / GiB, style=style))
        entries.insert(1 if ref.total_bytes is not None else 0, (ref.declared_label, None, style))
    return parts, entries


# --- the fleet: small multiples -----------------------------------------------------------

FLEET_COLUMNS = 4
_FLEET_WIDTH = 1008
_CELL_WIDTH = _FLEET_WIDTH / FLEET_COLUMNS
_CELL_HEIGHT = 137.0
_HEADER = 44.0


def tile_fraction(value: float, top: float) -> float:
    """0..1 up a tile: linear to the top, or linear over the last 4 GiB and logarithmic above."""
    value = min(max(value, 0.0), top)
    if top <= 4 * LINEAR_GIB:
        return value / top
    if value <= LINEAR_GIB:
        return (1 - LOG_SHARE) * value / LINEAR_GIB
    return (1 - LOG_SHARE) + LOG_SHARE * math.log(value / LINEAR_GIB) / math.log(top / LINEAR_GIB)


def fleet_chart(series: Sequence[ChartSeries]) -> str:
    """Free memory of every card, one small tile per host, the host with least room first."""
    hosts = worst_first(series)
    rows = max(1, (len(hosts) + FLEET_COLUMNS - 1) // FLEET_COLUMNS)
    height = int(_HEADER + rows * _CELL_HEIGHT)
    body = [
        _text(
            10, 17,
            "Free memory per card (lowest per bucket), GiB, over the window; dashed: the host's "
            "margin; faint lines: midnight UTC.",
        ),
        '<text x="10" y="34">Card colours:'
        + "".join(f'<tspan fill="{colour}"> ■ {c}</tspan>' for c, colour in enumerate(CARD_COLOURS))
        + "</text>",
    ]  # fmt: skip
    for i, (host, cards) in enumerate(hosts):
        body += _tile(i, host, cards)
    alt = "free memory per card, one panel per host, worst first"
    return _svg(_FLEET_WIDTH, height, alt, body)


def _tile(i: int, host: str, cards: list[ChartSeries]) -> list[str]:
    """One host's tile: its frame, scale, cards' free memory, margin, and its lowest free."""
    left = (i % FLEET_COLUMNS) * _CELL_WIDTH
    top = _HEADER + (i // FLEET_COLUMNS) * _CELL_HEIGHT
    x0, x1 = (left + f * _CELL_WIDTH for f in TILE_X)
    y0, y1 = (top + f * _CELL_HEIGHT for f in TILE_Y)
    rooms = [(s, headroom(s)) for s in cards]
    high = max(
        (max((v for v in r.free_bytes if v is not None), default=GiB) for _, r in rooms),
        default=GiB,
    )
    peak = max(1.0, high / GiB * 1.05)
    first = min((s.times_s[0] for s in cards if s.times_s), default=0)
    last = max((s.times_s[-1] for s in cards if s.times_s), default=1)

    def x(t: float) -> float:
        return x0 + (x1 - x0) * (t - first) / max(1, last - first)

    def y(v: float) -> float:
        return y1 - (y1 - y0) * tile_fraction(v, peak)

    faint = 'stroke="#e3e3e3" stroke-width="0.7"'
    out = []
    for mark in tile_scale(peak):
        out.append(
            f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{y(mark):.1f}" y2="{y(mark):.1f}" {faint}/>'
        )
        out.append(_text(x0 - 3, y(mark) + 3, f"{mark:g}", 'font-size="8" text-anchor="end"'))
    for midnight in range((first // 86400 + 1) * 86400, last, 86400):
        out.append(
            f'<line x1="{x(midnight):.1f}" x2="{x(midnight):.1f}" y1="{y0:.1f}" y2="{y1:.1f}" {faint}/>'
        )
    out.append(
        f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" '
        'fill="none" stroke="#999999" stroke-width="0.8"/>'
    )
    worst: tuple[int, int, int] | None = None
    for s, room in rooms:
        colour = CARD_COLOURS[s.card % len(CARD_COLOURS)]
        if len(s.times_s) > 1:
            d = path(
                [
                    (x(t), None if v is None else y(v))
                    for t, v in zip(s.times_s, gib(room.free_bytes), strict=False)
                ]
            )
            out.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.1"/>')
        lowest = room.lowest_free_bytes
        if lowest is not None and (worst is None or lowest < worst[0]):
            worst = (lowest, s.card, room.lowest_free_at_s or 0)
    margin = cards[0].margin_bytes / GiB if cards else 0.0
    if margin:
        out.append(
            f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{y(margin):.1f}" y2="{y(margin):.1f}" '
            'stroke="black" stroke-width="1" stroke-dasharray="4 2"/>'
        )
    # From the cell's left edge, small: a long host name and its lowest free fit in the cell.
    out.append(_text(left + 6, y0 - 6, tile_title(i, host, worst), 'font-size="8.5"'))
    return out
