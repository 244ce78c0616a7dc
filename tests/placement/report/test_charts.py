"""The charts' figures: headroom per bucket, the fleet's order, which cards get their own chart."""

from __future__ import annotations

import pytest

from placement.report.charts import (
    DETAIL_HOSTS,
    detail_series,
    headroom,
    render_chart,
    render_fleet,
    tile_height,
    worst_first,
)
from placement.report.rows import ChartSeries
from seats.units import GiB


def series(host: str, card: int, free_gib: list[float | None], **kw: int) -> ChartSeries:
    times = tuple(1_790_000_000 + 1800 * i for i in range(len(free_gib)))
    return ChartSeries(
        host=host,
        card=card,
        bucket_s=1800,
        times_s=times,
        layers=(("a", tuple(10.0 * GiB for _ in times)), ("other", tuple(0.0 for _ in times))),
        cuda_total_bytes=99 * GiB,
        declared_bytes=9 * GiB,
        held_bytes=kw.get("held", 0),
        free_min=tuple(None if v is None else v * GiB for v in free_gib),
        margin_bytes=kw.get("margin", GiB),
        seat_declared=(("a", 9 * GiB),),
    )


def test_headroom_is_free_less_held_and_margin_never_below_zero() -> None:
    room = headroom(series("h", 0, [6.0, None, 2.5, 8.0], held=2 * GiB))
    assert room.free == (6.0, None, 2.5, 8.0)
    assert room.plannable == (3.0, None, 0.0, 5.0)
    assert room.lowest_free == 2.5
    assert room.lowest_free_at_s == 1_790_000_000 + 3600
    assert room.lowest_plannable == 0.0


def test_no_reading_has_no_lows() -> None:
    room = headroom(series("h", 0, [None, None]))
    assert room.lowest_free is None and room.lowest_plannable is None


def test_hosts_come_worst_first_by_free_above_their_margin() -> None:
    fleet = [
        series("roomy", 0, [40.0, 30.0]),
        series("tight", 0, [40.0, 2.5]),  # 1.5 GiB above its margin
        series("tight", 1, [60.0, 60.0]),
        series("tighter-margin", 0, [3.0, 3.0], margin=2 * GiB),  # 1 GiB above its margin
    ]
    assert [host for host, _ in worst_first(fleet)] == ["tighter-margin", "tight", "roomy"]


def test_a_fleet_draws_cards_of_its_worst_hosts_only() -> None:
    few = [series(f"h{i}", 0, [10.0 + i]) for i in range(DETAIL_HOSTS)]
    assert detail_series(few) == few
    many = [series(f"h{i:02d}", c, [10.0 + i]) for i in range(DETAIL_HOSTS + 3) for c in (0, 1)]
    kept = detail_series(many)
    assert {s.host for s in kept} == {f"h{i:02d}" for i in range(DETAIL_HOSTS)}
    assert len(kept) == 2 * DETAIL_HOSTS


@pytest.mark.parametrize(
    ("value", "top", "height"),
    [
        (2.0, 8.0, 0.25),
        (0.0, 100.0, 0.0),
        (4.0, 100.0, 0.4),
        (100.0, 100.0, 1.0),
        (500.0, 8.0, 1.0),
    ],
)
def test_tiles_show_the_last_four_gib_linearly(value: float, top: float, height: float) -> None:
    assert float(tile_height(value, top)) == pytest.approx(height)


def test_charts_are_png() -> None:
    one = series("h", 0, [6.0, None, 2.5, 8.0])
    assert render_chart(one).startswith(b"\x89PNG")
    assert render_fleet([one, series("g", 0, [1.0, 2.0])]).startswith(b"\x89PNG")
