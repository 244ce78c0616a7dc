"""The catalogue's seat index: built once, and never stale after a copy with other seats."""

from __future__ import annotations

import pytest

from seats.model import Catalogue

HOSTS = {"h": {"cards": 2, "card_total": "80 GiB"}}


def _catalogue(*seats: dict[str, object]) -> Catalogue:
    return Catalogue.model_validate({"hosts": HOSTS, "seats": list(seats)})


def test_pinned_on_and_seat_follow_a_copy_with_other_seats() -> None:
    running = {"name": "a", "host": "h", "gpus": [1], "resident": "4 GiB", "state": "running"}
    planned = {"name": "b", "host": "h", "gpus": [1], "resident": "4 GiB", "state": "planned"}
    catalogue = _catalogue(running, planned)
    assert [s.name for s in catalogue.pinned_on("h", 1)] == ["a"]
    assert catalogue.pinned_on("h", 0) == ()
    assert catalogue.seat("b").name == "b"
    moved = catalogue.model_copy(
        update={"seats": (catalogue.seat("a").model_copy(update={"gpus": (0,)}),)}
    )
    assert [s.name for s in moved.pinned_on("h", 0)] == ["a"]
    assert moved.pinned_on("h", 1) == ()
    assert [s.name for s in catalogue.pinned_on("h", 1)] == ["a"]  # the original is untouched
    with pytest.raises(KeyError):  # a seat the copy no longer holds is not found
        moved.seat("b")
