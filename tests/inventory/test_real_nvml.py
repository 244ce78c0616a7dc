"""On a real NVIDIA card only (`pytest -m gpu`): the NVML identities of docs/facts.md §1.

CI has no GPU and deselects these; scripts/gpu_check.py is the full proof on a card.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from inventory.nvml import PynvmlSource
from inventory.poller import take_snapshot

pytestmark = pytest.mark.gpu


def test_v1_used_is_v2_used_plus_reserved_on_every_card() -> None:
    with PynvmlSource() as source:
        for index in range(source.card_count()):
            memory = source.memory(index)
            if memory.v2_reserved_bytes is None or memory.v2_used_bytes is None:
                pytest.skip("this driver answers NVML v1 only")
            assert memory.v1_used_bytes == memory.v2_used_bytes + memory.v2_reserved_bytes
            assert memory.v1_free_bytes == memory.v2_free_bytes
            assert memory.v1_total_bytes == memory.v2_total_bytes


def test_snapshot_of_this_host_has_every_card_with_figures_or_an_error() -> None:
    with PynvmlSource() as source:
        count = source.card_count()
        snapshot = take_snapshot(source, datetime.now(UTC), "gpu-test")
    assert [c.index for c in snapshot.cards] == list(range(count))
    for card in snapshot.cards:
        assert card.error is not None or (
            card.free_bytes is not None and card.total_bytes is not None
        )
