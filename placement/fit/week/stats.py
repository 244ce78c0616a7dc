"""The week's counted statistics: allowed short moments at a percentile, the spacing of moments
and their gaps, and the least-squares trend of daily minima. Pure arithmetic, no I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from decimal import Decimal

from placement.fit.week.model import DAY_S, Confidence, Forecast, Gap

# A spacing longer than this, and than 3 intervals, is a gap (DESIGN.md "Gaps, history, clocks").
GAP_FLOOR_S = 300
# A bucket of 24 h counts in the trend when its moments cover at least half of it.
BUCKET_COVER_S = DAY_S // 2


def allowed_short(percentile: Decimal, moments: int) -> int:
    """⌊(100 − P)·N/100⌋: how many of N moments may be short at percentile P (exact)."""
    return int(((Decimal(100) - percentile) * moments) // 100)


def pass_percentile(short: int, moments: int) -> Decimal | None:
    """The highest percentile with two decimals at which `short` of `moments` is allowed:
    ⌊(100 − P)·N/100⌋ ≥ short ⇔ P ≤ 100·(N − short)/N, floored to 0.01; None below 0.01."""
    if moments <= 0 or short <= 0:
        return Decimal(100)
    hundredths = (10_000 * (moments - short)) // moments
    return Decimal(hundredths) / 100 if hundredths > 0 else None


def median_spacing(times: Sequence[int]) -> int:
    """The median spacing of consecutive times (the lower middle of an even count); 0 with < 2."""
    if len(times) < 2:
        return 0
    spacings = sorted(b - a for a, b in itertools.pairwise(times))
    return spacings[(len(spacings) - 1) // 2]


def gaps_of(times: Sequence[int], interval_s: int) -> list[tuple[int, int]]:
    """(after, before) of every spacing over max(5 min, 3 × interval), in time order."""
    limit = max(GAP_FLOOR_S, 3 * interval_s)
    return [(a, b) for a, b in itertools.pairwise(times) if b - a > limit]


def largest_first(gaps: Sequence[Gap]) -> tuple[Gap, ...]:
    """Gaps by length, longest first (then earliest)."""
    return tuple(sorted(gaps, key=lambda g: (-g.seconds, g.after)))


def forecast(points: Sequence[tuple[float, int]], need_bytes: int) -> Forecast:
    """Ordinary least squares of (x days, least room bytes), as Prometheus's predict_linear.

    slope = Σ(x − x̄)(y − ȳ) / Σ(x − x̄)²; intercept = ȳ − slope·x̄ (the room predicted at x = 0,
    the window's end); R² = 1 − SS_res/SS_tot (1 where every y is equal and fitted exactly).
    No forecast under 3 buckets; confidence `low` under 5 buckets or R² < 0.5.
    """
    n = len(points)
    if n < 3:
        return Forecast(n, None, None, None, None, None, "none")
    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx if sxx else 0.0
    intercept = my - slope * mx
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ys)
    r2 = 1.0 - ss_res / ss_tot if ss_tot else 1.0
    full = with_seat = None
    if slope < 0:
        full = max(0.0, intercept / -slope)
        with_seat = max(0.0, (intercept - need_bytes) / -slope)
    confidence: Confidence = "low" if n < 5 or r2 < 0.5 else "high"
    return Forecast(n, round(slope), round(intercept), r2, full, with_seat, confidence)
