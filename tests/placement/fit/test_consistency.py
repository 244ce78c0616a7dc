"""A snapshot against its catalogue: contradictions are bad input, weak readings are warnings."""

from __future__ import annotations

import pytest

from inventory.snapshot import Card, Snapshot
from placement.cli.notes_text import note_texts
from placement.fit.consistency import check_snapshot
from seats.errors import BadInputError, Exit
from seats.model import Catalogue, Reserve
from seats.units import GiB, MiB

SOURCE = "fv-ml1.snapshot.json"


def _with_cards(snapshot: Snapshot, cards: list[Card]) -> Snapshot:
    return snapshot.model_copy(update={"cards": tuple(cards)})


def _with_host(catalogue: Catalogue, **changes: object) -> Catalogue:
    host = catalogue.hosts["fv-ml1"].model_copy(update=changes)
    return catalogue.model_copy(update={"hosts": {"fv-ml1": host}})


def test_the_example_is_consistent_and_quiet(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    assert check_snapshot(fv_ml1, fv_ml1_snapshot, SOURCE) == []


def test_a_card_count_that_differs_is_bad_input(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    three = _with_cards(fv_ml1_snapshot, list(fv_ml1_snapshot.cards[:3]))
    with pytest.raises(BadInputError, match="has 3 cards in the snapshot") as caught:
        check_snapshot(fv_ml1, three, SOURCE)
    assert str(caught.value).startswith(f"{SOURCE}: host fv-ml1")
    assert "4 in the catalogue (hosts.fv-ml1.cards)" in str(caught.value)
    assert caught.value.exit_code == Exit.BAD_INPUT


def test_a_card_total_that_differs_is_bad_input(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    # An H200's NVML total (docs/facts.md §1) against fv-ml1's 97,871 MiB.
    cards = list(fv_ml1_snapshot.cards)
    cards[1] = cards[1].model_copy(update={"total_bytes": 150_754_820_096})
    with pytest.raises(BadInputError, match=r"cards\[1\]\.total_bytes: card fv-ml1:1") as caught:
        check_snapshot(fv_ml1, _with_cards(fv_ml1_snapshot, cards), SOURCE)
    message = str(caught.value)
    assert "NVML total 150754820096 B" in message
    assert "card_total is 102625181696 B" in message
    assert f"{150_754_820_096 - 102_625_181_696} B more" in message


def test_without_card_total_any_total_is_taken(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    cards = list(fv_ml1_snapshot.cards)
    cards[1] = cards[1].model_copy(update={"total_bytes": cards[1].total_bytes + MiB})  # type: ignore[operator]
    loose = _with_host(fv_ml1, card_total_bytes=None)
    assert check_snapshot(loose, _with_cards(fv_ml1_snapshot, cards), SOURCE) == []


def test_reserves_past_the_cuda_total_are_bad_input(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    # 95 GiB fits card_total (95.58 GiB NVML) but not the 94.97 GiB a CUDA process sees.
    reserve = Reserve.model_validate(
        {"name": "big-hold", "host": "fv-ml1", "gpu": 2, "bytes": "95 GiB", "for": ["flash-next"]}
    )
    catalogue = _with_host(fv_ml1, card_total_bytes=None).model_copy(
        update={"reserves": (*fv_ml1.reserves, reserve)}
    )
    with pytest.raises(
        BadInputError, match=r"card fv-ml1:2: reserves \(big-hold\) add up to"
    ) as caught:
        check_snapshot(catalogue, fv_ml1_snapshot, SOURCE)
    short = 95 * GiB - 101_972_967_424
    assert f"{short} B" in str(caught.value)
    assert "CUDA total 101972967424 B (94.97 GiB)" in str(caught.value)


def test_a_whole_card_reserve_always_fits(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    assert fv_ml1.reserves[0].amount_bytes == "card"
    assert check_snapshot(_with_host(fv_ml1, card_total_bytes=None), fv_ml1_snapshot, SOURCE) == []


def test_nvml_v1_only_warns_that_cuda_total_is_nvml_total(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    cards = [
        card.model_copy(
            update={
                "reserved_bytes": None,
                "used_bytes": (card.used_bytes or 0) + (card.reserved_bytes or 0),
            }
        )
        for card in fv_ml1_snapshot.cards
    ]
    warnings = note_texts(check_snapshot(fv_ml1, _with_cards(fv_ml1_snapshot, cards), SOURCE))
    assert len(warnings) == 1
    assert "NVML v1 only on cards 0, 1, 2, 3" in warnings[0]
    assert "cuda_total taken as NVML total" in warnings[0]


def test_a_vllm_seat_on_a_host_without_cuda_context_warns(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    warnings = note_texts(
        check_snapshot(_with_host(fv_ml1, cuda_context_bytes=0), fv_ml1_snapshot, SOURCE)
    )
    assert len(warnings) == 1
    assert "host fv-ml1 declares no cuda_context" in warnings[0]
    assert "vllm-voices" in warnings[0] and "flash-next" in warnings[0]
    assert "parakeet-stt" not in warnings[0]  # not a vLLM seat


def test_a_card_in_error_warns(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    cards = list(fv_ml1_snapshot.cards)
    cards[2] = Card(index=2, error="GpuIsLost")
    warnings = note_texts(check_snapshot(fv_ml1, _with_cards(fv_ml1_snapshot, cards), SOURCE))
    assert warnings == [f"{SOURCE}: card fv-ml1:2 could not be read (GpuIsLost); it takes no seat"]


def test_a_host_the_catalogue_does_not_describe_warns(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    other = fv_ml1_snapshot.model_copy(update={"host": "fv-ml9"})
    warnings = note_texts(check_snapshot(fv_ml1, other, SOURCE))
    assert any("host fv-ml9 is not in the catalogue" in w for w in warnings)


def test_a_pinned_card_the_snapshot_lacks_is_bad_input(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    cards = list(fv_ml1_snapshot.cards)
    cards[0] = cards[0].model_copy(update={"index": 7})
    with pytest.raises(BadInputError, match=r"seats\[0\] 'cyberprev' is pinned to card fv-ml1:0"):
        check_snapshot(fv_ml1, _with_cards(fv_ml1_snapshot, cards), SOURCE)
