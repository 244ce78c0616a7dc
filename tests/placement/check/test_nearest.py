"""`check`'s nearest other cards: judged by the verifier from the same snapshots, best three."""

from __future__ import annotations

import pytest

from inventory.snapshot import Snapshot
from placement.check.nearest import nearest_cards, with_nearest
from placement.check.seat import check_seat, did_you_mean
from seats.model import Catalogue, Host, Seat
from seats.units import GiB


def with_seats(catalogue: Catalogue, *seats: Seat) -> Catalogue:
    return catalogue.model_copy(update={"seats": (*catalogue.seats, *seats)})


def second_host(
    catalogue: Catalogue, snapshot: Snapshot, free_bytes: int
) -> tuple[Catalogue, Snapshot]:
    """fv-ml2: fv-ml1's figures, nothing running, `free_bytes` free on every card."""
    host = catalogue.hosts["fv-ml1"]
    cards = tuple(
        card.model_copy(
            update={
                "processes": (),
                "free_bytes": free_bytes,
                "used_bytes": card.total_bytes - (card.reserved_bytes or 0) - free_bytes,
            }
        )
        for card in snapshot.cards
    )
    hosts: dict[str, Host] = {**catalogue.hosts, "fv-ml2": host}
    return (
        catalogue.model_copy(update={"hosts": hosts}),
        snapshot.model_copy(update={"host": "fv-ml2", "cards": cards}),
    )


@pytest.fixture
def four_gib() -> Seat:
    return Seat.model_validate({"name": "new-4gib", "resident": 4 * GiB})


def test_a_refusal_names_the_other_card_that_takes_it(
    fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot, four_gib: Seat
) -> None:
    catalogue = with_seats(fv_ml1, four_gib)
    refused = check_seat(catalogue, [fv_ml1_before_voices], "new-4gib", [2])
    assert refused.verdict.verdict == "refuse"
    found = nearest_cards(catalogue, [fv_ml1_before_voices], refused.seat, refused.verdict)
    # Card 1 (5.57 GiB free) takes it; card 0 is nearly full and card 3 is held for flash-next.
    assert [(e.host, e.cards) for e in found] == [("fv-ml1", (1,))]
    alone = check_seat(catalogue, [fv_ml1_before_voices], "new-4gib", [1]).verdict
    assert alone.verdict == "pass"
    (figures,) = alone.figures
    assert found[0].need_bytes == 4 * GiB
    assert found[0].room_after_bytes == figures.room_bytes - figures.need_bytes
    assert "fv-ml1:1 takes it" in found[0].text()
    assert found[0].to_json()["room_after_bytes"] == found[0].room_after_bytes


def test_the_best_three_across_hosts_most_room_left_first(
    fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot, four_gib: Seat
) -> None:
    catalogue, other = second_host(with_seats(fv_ml1, four_gib), fv_ml1_before_voices, 50 * GiB)
    snapshots = [fv_ml1_before_voices, other]
    refused = check_seat(catalogue, snapshots, "new-4gib", [2], host="fv-ml1")
    found = nearest_cards(catalogue, snapshots, refused.seat, refused.verdict)
    assert len(found) == 3
    assert all(e.host == "fv-ml2" for e in found)  # 50 GiB free beats card 1's 5.57 GiB
    assert [e.room_after_bytes for e in found] == sorted(
        (e.room_after_bytes for e in found), reverse=True
    )
    assert (found[0].host, found[0].cards) != (refused.verdict.host, refused.verdict.cards)


def test_a_host_the_catalogue_lacks_is_never_offered(
    fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot, four_gib: Seat
) -> None:
    catalogue = with_seats(fv_ml1, four_gib)
    _, stranger = second_host(catalogue, fv_ml1_before_voices, 50 * GiB)
    snapshots = [fv_ml1_before_voices, stranger]
    refused = check_seat(catalogue, snapshots, "new-4gib", [2], host="fv-ml1")
    found = nearest_cards(catalogue, snapshots, refused.seat, refused.verdict)
    assert {e.host for e in found} == {"fv-ml1"}


def test_a_two_card_seat_gets_two_cards_of_one_host(
    fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    pair = Seat.model_validate({"name": "pair", "resident": 20 * GiB, "gpus": 2})
    catalogue, other = second_host(with_seats(fv_ml1, pair), fv_ml1_before_voices, 30 * GiB)
    snapshots = [fv_ml1_before_voices, other]
    refused = check_seat(catalogue, snapshots, "pair", [1, 2], host="fv-ml1")
    assert refused.verdict.verdict == "refuse"
    (found,) = nearest_cards(catalogue, snapshots, refused.seat, refused.verdict)
    assert found.host == "fv-ml2" and len(found.cards) == 2
    again = check_seat(catalogue, snapshots, "pair", list(found.cards), host="fv-ml2")
    assert again.verdict.verdict == "pass"


def test_a_pass_gets_no_nearest(
    fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot, four_gib: Seat
) -> None:
    catalogue = with_seats(fv_ml1, four_gib)
    passed = check_seat(catalogue, [fv_ml1_before_voices], "new-4gib", [1])
    assert with_nearest(catalogue, [fv_ml1_before_voices], passed) is passed
    assert "nearest_cards" not in passed.to_json()


def test_nowhere_is_an_empty_list_in_json(
    fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    huge = Seat.model_validate({"name": "huge", "resident": 90 * GiB})
    catalogue = with_seats(fv_ml1, huge)
    refused = with_nearest(
        catalogue,
        [fv_ml1_before_voices],
        check_seat(catalogue, [fv_ml1_before_voices], "huge", [1]),
    )
    assert refused.elsewhere == ()
    assert refused.to_json()["nearest_cards"] == []


def test_did_you_mean() -> None:
    assert did_you_mean("vllm-voice", ["cyberprev", "vllm-voices"]) == "; did you mean vllm-voices?"
    assert did_you_mean("zzz", ["cyberprev", "vllm-voices"]) == ""
