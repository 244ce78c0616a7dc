"""The charts' figures: headroom per bucket, the fleet's order, which cards get their own chart."""

from __future__ import annotations

from dataclasses import replace

from placement.report.charts import (
    DETAIL_HOSTS,
    FLEET_FILENAME,
    chart_filename,
    detail_series,
    headroom,
    reference_lines,
    tile_title,
    worst_first,
)
from placement.report.rows import ChartSeries
from seats.units import GiB, MiB


def series(host: str, card: int, free_gib: list[float | None], **kw: int) -> ChartSeries:
    """A card's series; plannable per bucket as the report's figures work it out (held, margin)."""
    times = tuple(1_790_000_000 + 1800 * i for i in range(len(free_gib)))
    free = tuple(None if v is None else int(v * GiB) for v in free_gib)
    taken = kw.get("held", 0) + kw.get("margin", GiB)
    return ChartSeries(
        host=host,
        card=card,
        bucket_s=1800,
        times_s=times,
        layers=(("a", tuple(10.0 * GiB for _ in times)), ("other", tuple(0.0 for _ in times))),
        cuda_total_bytes=99 * GiB,
        declared_bytes=9 * GiB,
        held_bytes=kw.get("held", 0),
        free_min=free,
        margin_bytes=kw.get("margin", GiB),
        seat_declared=(("a", 9 * GiB),),
        plannable_min=tuple(None if v is None else max(0, v - taken) for v in free),
    )


def test_headroom_takes_the_figures_bytes_and_finds_their_lows() -> None:
    room = headroom(series("h", 0, [6.0, None, 2.5, 8.0], held=2 * GiB))
    assert room.free_bytes == (6 * GiB, None, 2 * GiB + 512 * MiB, 8 * GiB)
    assert room.plannable_bytes == (3 * GiB, None, 0, 5 * GiB)
    assert all(isinstance(v, int) for v in room.free_bytes + room.plannable_bytes if v is not None)
    assert room.lowest_free_bytes == 2 * GiB + 512 * MiB
    assert room.lowest_free_at_s == 1_790_000_000 + 3600
    assert room.lowest_plannable_bytes == 0


def test_headroom_keeps_every_byte() -> None:
    # One byte apart: a float GiB would not tell them apart, the chart's figures do.
    base = series("h", 0, [5.0, 5.0])
    room = headroom(replace(base, free_min=(5 * GiB, 5 * GiB - 1), plannable_min=(1, 0)))
    assert room.lowest_free_bytes == 5 * GiB - 1 and room.lowest_free_at_s == base.times_s[1]
    assert room.lowest_plannable_bytes == 0


def test_no_reading_has_no_lows() -> None:
    room = headroom(series("h", 0, [None, None]))
    assert room.lowest_free_bytes is None and room.lowest_plannable_bytes is None


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


def test_labels_are_written_from_bytes() -> None:
    one = series("h", 0, [6.0, 2.5], held=3 * GiB + 1)
    ref = reference_lines(one)
    assert ref.total_bytes == 99 * GiB and ref.declared_bytes == 9 * GiB
    assert ref.held_floor_bytes == 99 * GiB - (3 * GiB + 1)
    assert ref.total_label == "CUDA total 99.00 GiB" and ref.declared_label == "declared 9.00 GiB"
    assert ref.held_label.startswith("held 3.00 GiB\n")
    worst = (2 * GiB + 512 * MiB, 1, 1_790_000_000)
    assert tile_title(0, "h", worst) == "1. h · lowest free 2.50 GiB (card 1, Mon 14:13)"
    assert tile_title(2, "g", None) == "3. g · no free-memory reading"


def test_charts_are_svg_files() -> None:
    assert chart_filename(series("fv ml1/x", 3, [1.0])) == "chart-fv_ml1_x-gpu3.svg"
    assert FLEET_FILENAME.endswith(".svg")
