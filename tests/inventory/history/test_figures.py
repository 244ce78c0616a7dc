"""The reductions both sources share: a reserve's breaches and holders, and each seat's row."""

from __future__ import annotations

from inventory.history.figures import (
    Holder,
    ReserveBreaches,
    SeatUsage,
    breaches_of,
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
