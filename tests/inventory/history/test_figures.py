"""The reductions both sources share: a reserve's breaches and holders, each seat's row, the
foreign processes' rows and the charts' unexplained memory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from inventory.history.figures import (
    CardPart,
    CardUsage,
    ChartSums,
    ForeignProcess,
    ForeignUsage,
    Holder,
    ReserveBreaches,
    ReserveReading,
    SeatUsage,
    breach_points,
    breaches_of,
    card_usage,
    chart_buckets,
    foreign_usage,
    ranked_holders,
    seat_rows,
)

GIB = 2**30


def test_breaches_count_date_and_take_the_earliest_worst() -> None:
    asked: list[bool] = []

    def holders() -> list[tuple[str, int]]:
        asked.append(True)
        return [("chat", 3 * GIB), ("python notebook.py", 6 * GIB), ("own", 90 * GIB)]

    points = [(120, 5 * GIB), (60, 6 * GIB), (180, 6 * GIB), (240, GIB)]
    assert breaches_of(points, holders, ("own",)) == ReserveBreaches(
        snapshots=4,
        first_s=60,
        last_s=240,
        worst_bytes=6 * GIB,
        worst_at_s=60,  # the earlier of the two 6 GiB moments
        holders=(Holder("python notebook.py", 6 * GIB), Holder("chat", 3 * GIB)),
    )
    # No breach: nothing to date, and the holders are never asked for.
    assert breaches_of([], holders, ("own",)) == ReserveBreaches(0, None, None, None, None, ())
    assert asked == [True]


def test_holders_are_the_five_largest_by_their_most_then_by_name() -> None:
    found = [("f", 1), ("b", 5), ("a", 5), ("c", 4), ("b", 7), ("d", 3), ("e", 2), ("own", 9)]
    assert ranked_holders(found, ["own"]) == (
        Holder("b", 7),
        Holder("a", 5),
        Holder("c", 4),
        Holder("d", 3),
        Holder("e", 2),
    )


def test_seat_rows_join_the_parts_and_sort_by_host_seat_card() -> None:
    stats = {
        ("h2", 0, "a"): (3, 10, 12, 13),
        ("h1", 1, "b"): (2, 7, 8, 8),
        ("h1", 0, "b"): (1, 5, 5, 5),
    }
    firsts = {("h1", 0, "b"): 4, ("h2", 0, "a"): 9}
    lasts = {("h2", 0, "a"): 12}
    assert seat_rows(stats, firsts, lasts) == [
        SeatUsage("h1", 0, "b", 1, 5, 5, 5, 4, None),
        SeatUsage("h1", 1, "b", 2, 7, 8, 8, None, None),
        SeatUsage("h2", 0, "a", 3, 10, 12, 13, 9, 12),
    ]


class Cards:
    """A source answering `card_usage`'s questions from literal parts and samples, recording them."""

    def __init__(self, parts: list[CardPart], used: dict[tuple[str, int], list[int]]) -> None:
        self.parts, self.used = parts, used
        self.asked: list[object] = []

    def card_parts(self) -> list[CardPart]:
        return self.parts

    def first_lowest_free(
        self, wanted: Mapping[tuple[str, int], tuple[int, int, int]]
    ) -> dict[tuple[str, int], int]:
        self.asked.append(dict(wanted))
        return {key: start + 60 for key, (start, _, _) in wanted.items()}

    def used_at_ranks(
        self, wanted: Mapping[tuple[str, int], tuple[int, Sequence[int]]]
    ) -> dict[tuple[str, int], tuple[int, ...]]:
        self.asked.append(dict(wanted))
        return {
            k: tuple(sorted(self.used[k])[r - 1] for r in ranks) for k, (_, ranks) in wanted.items()
        }

    def nvml_v1_cards(self) -> set[tuple[str, int]]:
        return {("h", 1)}

    def unexplained_max(self) -> dict[tuple[str, int], tuple[int | None, int | None]]:
        return {("h", 0): (3 * GIB, 7200)}


def test_card_figures_sum_counts_and_date_the_least_free_in_its_earliest_part() -> None:
    # Card 0: counted over the window, its least free bounded per hour; 5 GiB is the least in
    # hours 1 and 2, so it is dated in hour 1. Card 1: two parts both counting, one card in
    # error only (card 2): no figure but its errors.
    used = {("h", 0): [GIB * v for v in range(1, 21)], ("h", 1): [GIB, 2 * GIB, 4 * GIB]}
    parts = [
        CardPart("h", 0, 0, 10800, 20, 1, 20 * GIB, None),
        CardPart("h", 0, 0, 3600, 0, 0, None, 9 * GIB),
        CardPart("h", 0, 3600, 7200, 0, 0, None, 5 * GIB),
        CardPart("h", 0, 7200, 10800, 0, 0, None, 5 * GIB),
        CardPart("h", 1, 3600, 7200, 1, 0, 4 * GIB, 8 * GIB),
        CardPart("h", 1, 0, 3600, 2, 0, 2 * GIB, 6 * GIB),
        CardPart("h", 2, 0, 10800, 0, 4, None, None),
    ]
    source = Cards(parts, used)
    assert card_usage(source) == [
        # p50 of 20 is rank 10, p95 rank 19; card 1's p50 of 3 is rank 2, p95 rank 3.
        CardUsage("h", 0, 20, 1, 10 * GIB, 19 * GIB, 20 * GIB, 5 * GIB, 3660, 3 * GIB, 7200, False),
        CardUsage("h", 1, 3, 0, 2 * GIB, 4 * GIB, 4 * GIB, 6 * GIB, 60, 0, None, True),
        CardUsage("h", 2, 0, 4, None, None, None, None, None, None, None, False),
    ]
    assert source.asked == [
        {("h", 0): (3600, 7200, 5 * GIB), ("h", 1): (0, 3600, 6 * GIB)},
        {("h", 0): (20, (10, 19)), ("h", 1): (3, (2, 3))},
    ]


def test_chart_unexplained_from_sums_subtracts_each_seat_in_turn() -> None:
    used = {0: 10.0, 1: 1.0, 2: 5.0, 3: 1.0}
    by_seat = {"a": {0: 4.0, 1: 0.1, 3: 2.0, 9: 7.0}, "b": {0: 1.5, 1: 0.2, 2: 5.0}}
    ones = dict.fromkeys(used, 1)
    (row,) = chart_buckets([ChartSums("h", 0, ones, used, by_seat, {0: 3.0})])
    assert row.unexplained_bytes == {0: 4.5, 1: 1.0 - (0.1 + 0.2), 2: 0.0, 3: 0.0}
    assert row.unexplained_bytes[1] == 1.0 - (0.1 + 0.2)  # summed in seat order, then taken off
    assert (row.samples, row.seat_bytes, row.free_min_bytes) == (ones, by_seat, {0: 3.0})
    (bare,) = chart_buckets([ChartSums("h", 1, {0: 1, 1: 1}, {0: 2.5, 1: -1.0}, {}, {})])
    assert bare.unexplained_bytes == {0: 2.5, 1: 0.0}  # never below zero
    # A source that reads each moment gives Σ max(0, unexplained) itself: it is kept as given.
    moments = ChartSums("h", 2, {0: 2}, {0: 10.0}, {"a": {0: 10.0}}, {}, {0: 3.0})
    assert chart_buckets([moments])[0].unexplained_bytes == {0: 3.0}
    # By host and card.
    rows = [
        moments,
        ChartSums("a", 0, ones, used, by_seat, {}),
        ChartSums("h", 1, {0: 1}, {0: 0.4}, {}, {}),
    ]
    assert [(b.host, b.card) for b in chart_buckets(rows)] == [("a", 0), ("h", 1), ("h", 2)]


def test_breach_points_apply_the_reserve_rule_to_each_reading() -> None:
    readings = [
        ReserveReading(180, 80 * GIB, 60 * GIB, 141 * GIB, GIB),  # others 20 GiB
        ReserveReading(60, 79 * GIB, 60 * GIB, 141 * GIB, GIB),  # others 19 GiB
        ReserveReading(120, 81 * GIB, 60 * GIB, 141 * GIB, None),  # v1: no driver reserve read
        ReserveReading(240, 90 * GIB, 0, None, None),  # no total read: a fixed reserve can't tell
    ]
    # 120 GiB leaves others 141 − 1 − 120 = 20 GiB (21 GiB where no driver reserve was read).
    assert breach_points(readings, 120 * GIB) == []
    assert breach_points(readings, 121 * GIB) == [(120, 21 * GIB), (180, 20 * GIB)]
    # A whole-card reserve leaves nothing: every reading with others on it breaks it, by time.
    assert breach_points(readings, None) == [
        (60, 19 * GIB),
        (120, 21 * GIB),
        (180, 20 * GIB),
        (240, 90 * GIB),
    ]
    assert breach_points([ReserveReading(0, GIB, GIB, None, None)], None) == []


def test_foreign_rows_group_by_command_line_where_kept_else_by_card() -> None:
    found = [
        ForeignProcess("h", 0, 7, "python a.py", (), 3, 300, 500, 2 * GIB),
        ForeignProcess("h", 0, 8, "python a.py", (), 2, 100, 200, GIB),
        ForeignProcess("h", 0, 8, "python b.py", (), 1, 100, 100, 4 * GIB),
        ForeignProcess("h", 1, 9, None, (), 5, 50, 90, 3 * GIB),
    ]
    assert foreign_usage(found, by_command_line=True) == [
        ForeignUsage("h", 0, "python a.py", 2, 5, 100, 500, 2 * GIB),
        ForeignUsage("h", 0, "python b.py", 1, 1, 100, 100, 4 * GIB),
        ForeignUsage("h", 1, None, 1, 5, 50, 90, 3 * GIB),
    ]
    # No command lines (Prometheus): one row per card, its pids counted once each.
    assert foreign_usage(found, by_command_line=False) == [
        ForeignUsage("h", 0, None, 2, 6, 100, 500, 4 * GIB),
        ForeignUsage("h", 1, None, 1, 5, 50, 90, 3 * GIB),
    ]
    # A bare process title is shown with its server's line.
    core = ForeignProcess("h", 0, 5, "VLLM::EngineCore", ("vllm serve m --port 1",), 1, 9, 9, GIB)
    (row,) = foreign_usage([core], by_command_line=True)
    assert row.parent == "vllm serve m --port 1"
