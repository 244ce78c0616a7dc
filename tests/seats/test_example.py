"""The embedded fv-ml1 example agrees with docs/facts.md §3."""

from __future__ import annotations

from inventory.snapshot import Snapshot
from seats.model import Catalogue
from seats.units import MiB


def test_card_zero_after_voices_has_1871_mib_free(fv_ml1_snapshot: Snapshot) -> None:
    card = fv_ml1_snapshot.card(0)
    assert card.free_bytes == 1871 * MiB
    assert card.total_bytes == 102_625_181_696
    assert card.reserved_bytes == 652_214_272
    # v1 "used" (reserve included) is the log's 96,000 MiB.
    assert card.used_bytes is not None and card.used_bytes + card.reserved_bytes == 96_000 * MiB


def test_cuda_total_is_94_97_gib(fv_ml1_snapshot: Snapshot) -> None:
    assert fv_ml1_snapshot.card(3).cuda_total_bytes == 101_972_967_424


def test_before_voices_card_zero_has_12611_mib_free(fv_ml1_before_voices: Snapshot) -> None:
    assert fv_ml1_before_voices.card(0).free_bytes == 12_611 * MiB


def test_card_zero_seats_are_the_logs(fv_ml1: Catalogue) -> None:
    on_zero = {s.name: s.resident_bytes for s in fv_ml1.seats if s.pinned_cards == (0,)}
    assert on_zero == {
        "cyberprev": 47_100 * MiB,
        "gen-small": 36_900 * MiB,
        "parakeet-stt": 638 * MiB,
        "vllm-voices": 10_740 * MiB,
    }
