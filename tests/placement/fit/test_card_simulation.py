"""The card model as the simulator: seats taken off and started on copies of a card's model meet
exactly what a snapshot taken after the move would show (DESIGN.md "Layout": one simulator)."""

from __future__ import annotations

import pytest

from inventory.attribution import attribute
from inventory.snapshot import Card, Snapshot
from placement.check.deploy import _stopped
from placement.fit.card import CardModel, card_model
from seats.model import Catalogue

MIB = 2**20
HOST = "fv-ml1"


def figures(model: CardModel, seats: tuple[str | None, ...]) -> dict[str, object]:
    """Everything a verdict reads of a card, for each seat that may meet it."""
    return {
        "free": model.free_bytes,
        "declared": sorted(model.declared),
        "exclusive": sorted(model.declared_exclusive),
        "absent": sorted(model.absent),
        "seen": dict(sorted(model.seen_bytes.items())),
        "occupants": model.occupants,
        "per_seat": {
            seat: (
                model.held_parts(seat),
                model.room_for(seat),
                model.gate_free_bytes(seat),
                model.freeable_bytes(seat or ""),
            )
            for seat in seats
        },
    }


def measured_after(
    catalogue: Catalogue, snapshot: Snapshot, seat: str, source: int, target: int
) -> tuple[Catalogue, Snapshot]:
    """The world as it would be measured once `seat` runs on `target`: the test's own oracle."""
    moved = tuple(
        s.model_copy(update={"gpus": (target,)}) if s.name == seat else s for s in catalogue.seats
    )
    leaving = [p for p in snapshot.card(source).processes if p.seat == seat]
    freed = sum(p.used_bytes or 0 for p in leaving)
    cards: list[Card] = []
    for card in snapshot.cards:
        if card.index == source:
            kept = tuple(p for p in card.processes if p.seat != seat)
            cards.append(
                card.model_copy(
                    update={"processes": kept, "free_bytes": (card.free_bytes or 0) + freed}
                )
            )
        elif card.index == target:
            cards.append(
                card.model_copy(
                    update={
                        "processes": (*card.processes, *leaving),
                        "free_bytes": (card.free_bytes or 0) - freed,
                    }
                )
            )
        else:
            cards.append(card)
    return (
        catalogue.model_copy(update={"seats": moved}),
        snapshot.model_copy(update={"cards": tuple(cards)}),
    )


@pytest.mark.parametrize(
    ("seat", "source", "target"),
    [
        ("rerank", 2, 3),  # onto the card held whole for flash-next
        ("parakeet-stt", 0, 1),
        ("embed", 1, 2),
    ],
)
def test_a_seat_taken_off_one_card_and_started_on_another_is_the_world_measured_after(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot, seat: str, source: int, target: int
) -> None:
    snapshot = attribute(fv_ml1_snapshot, fv_ml1)
    bytes_ = sum(p.used_bytes or 0 for p in snapshot.card(source).processes if p.seat == seat)
    off = card_model(fv_ml1, HOST, snapshot.card(source)).without_seat(seat)
    on = card_model(fv_ml1, HOST, snapshot.card(target)).with_seat(
        seat, bytes_, exclusive=fv_ml1.seat(seat).exclusive, running=True
    )
    after_catalogue, after = measured_after(fv_ml1, snapshot, seat, source, target)
    seats = (None, seat, "flash-next", "chat-large")
    for model, index in ((off, source), (on, target)):
        measured = card_model(after_catalogue, HOST, after.card(index))
        assert figures(model, seats) == figures(measured, seats)
    # The source card gave back exactly the seat's bytes; the target took them.
    assert off.free_bytes - (snapshot.card(source).free_bytes or 0) == bytes_
    assert (snapshot.card(target).free_bytes or 0) - on.free_bytes == bytes_


def test_a_running_seat_started_on_the_reserve_card_consumes_the_reserve_it_is_for(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    snapshot = attribute(fv_ml1_snapshot, fv_ml1)
    card3 = card_model(fv_ml1, HOST, snapshot.card(3))
    whole = card3.cuda_total
    assert card3.held_bytes() == whole  # flash-next-hold: the whole card
    started = card3.with_seat("flash-next", 20_000 * MIB, running=True)
    resident = fv_ml1.seat("flash-next").resident_bytes
    # Its own resident is taken out of its reserve; the rest is still kept for it.
    assert started.held_parts()[0].bytes == whole - resident
    assert started.free_bytes == card3.free_bytes - 20_000 * MIB
    # Taken off again, the card is as measured (the reserve whole once more).
    back = started.without_seat("flash-next")
    assert figures(back, (None, "rerank")) == figures(card3, (None, "rerank"))


def test_a_redeployed_stack_stops_its_running_seats_on_their_cards_only(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    snapshot = attribute(fv_ml1_snapshot, fv_ml1)
    models = _stopped(fv_ml1, snapshot, {"embed", "rerank", "flash-next"})
    measured = {card.index: card_model(fv_ml1, HOST, card) for card in snapshot.cards}
    embed = 31_567_380_480
    rerank = 15_574_499_328
    assert models[(HOST, 1)].free_bytes == measured[1].free_bytes + embed
    assert models[(HOST, 2)].free_bytes == measured[2].free_bytes + rerank
    assert "embed" not in models[(HOST, 1)].occupants
    assert models[(HOST, 1)].declared == ("chat-large",)
    # flash-next runs nowhere: its reserve and the untouched cards are as measured.
    assert models[(HOST, 3)] == measured[3] and models[(HOST, 0)] == measured[0]
    assert models[(HOST, 3)].held_bytes() == measured[3].cuda_total
