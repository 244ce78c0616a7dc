"""Rule `kv_capacity` (DESIGN.md "vLLM's second refusal"): tokens = floor(KV bytes / bytes per
token) against max_model_len, for a pinned KV cache, a declared util and the util `plan` proposes."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from inventory.attribution import attribute
from inventory.snapshot import Snapshot
from placement.check.hf_model import kv_bytes_per_token
from placement.cli.notes_text import note_texts, parts_text
from placement.cli.reasons_text import reason_text
from placement.fit.kv import (
    kv_cache_bytes,
    kv_capacity,
    kv_tokens,
    profile_resident,
    profile_resident_bytes,
)
from placement.fit.verify import judge
from seats.model import Catalogue, Profile, Seat
from seats.units import GiB, MiB

CUDA_TOTAL = 101_972_967_424  # fv-ml1: 97,871 MiB NVML total − 622 MiB driver reserve
CONTEXT = 1183 * MiB
CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"
QWEN3_4B = 147_456  # 2 × 36 layers × 8 KV heads × 128 head dim × 2 B (bf16)


@pytest.fixture
def snap(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> Snapshot:
    return attribute(fv_ml1_snapshot, fv_ml1)


def profile(
    max_model_len: int, weights: str = "1 GiB", non_kv: str = "512 MiB", **more: Any
) -> dict[str, Any]:
    return {
        "weights": weights,
        "non_kv": non_kv,
        "kv_bytes_per_token": QWEN3_4B,
        "max_model_len": max_model_len,
        **more,
    }


def vllm(resident: str, gpus: Any = 1, **engine: Any) -> Seat:
    return Seat.model_validate(
        {
            "name": "new-kv",
            "resident": resident,
            "gpus": gpus,
            "engine": {"kind": "vllm", "version": "0.11.0", **engine},
        }
    )


def rules(verdict: Any) -> list[tuple[str, int | None]]:
    return [(reason.rule, reason.card) for reason in verdict.reasons]


def test_bytes_per_token_of_qwen3_4b() -> None:
    # The figure these tests use is what Qwen3-4B's real config.json gives.
    config = json.loads((CONFIGS / "qwen3-4b" / "config.json").read_text("utf-8"))
    assert kv_bytes_per_token(config, "qwen3-4b", 1).value == QWEN3_4B == 2 * 36 * 8 * 128 * 2


def test_a_pinned_kv_cache_is_its_pin_whatever_the_util() -> None:
    p = Profile.model_validate(profile(40_960))
    for util in (None, Decimal("0.11"), Decimal("0.9")):
        assert kv_cache_bytes(p, pinned_bytes=2 * GiB, util=util, cuda_total=CUDA_TOTAL) == 2 * GiB
    # The issue's own refusal: 2 GiB holds 14,563 tokens of Qwen3-4B, fewer than 40,960.
    assert kv_tokens(2 * GiB, QWEN3_4B) == 14_563
    assert 14_563 * QWEN3_4B <= 2 * GiB < 14_564 * QWEN3_4B


def test_an_unpinned_kv_cache_is_the_request_less_weights_and_non_kv() -> None:
    p = Profile.model_validate(profile(40_960))
    kv = kv_cache_bytes(p, pinned_bytes=None, util=Decimal("0.04"), cuda_total=CUDA_TOTAL)
    # ceil(0.04 × 101,972,967,424) = 4,078,918,697; less 1 GiB and 512 MiB.
    assert kv == 4_078_918_697 - GiB - 512 * MiB == 2_468_305_961
    assert kv_tokens(2_468_305_961, QWEN3_4B) == 16_739
    assert kv_cache_bytes(p, pinned_bytes=None, util=None, cuda_total=CUDA_TOTAL) is None
    # A request that does not even hold the weights leaves no token.
    small = kv_cache_bytes(p, pinned_bytes=None, util=Decimal("0.01"), cuda_total=CUDA_TOTAL)
    assert small is not None and small < 0 and kv_tokens(small, QWEN3_4B) == 0


def test_declared_util_refused_with_the_util_and_the_length_that_would_pass(
    fv_ml1: Catalogue, snap: Snapshot
) -> None:
    seat = vllm("4 GiB", gpu_memory_utilization=0.04, profile=profile(40_960))
    verdict = judge(fv_ml1, snap, seat, [1], mode="check")
    assert rules(verdict) == [("kv_capacity", 1)]
    reason = verdict.reasons[0]
    assert reason.need_bytes == 40_960 * QWEN3_4B == 6_039_797_760
    assert reason.room_bytes == 2_468_305_961
    assert reason.short_bytes == 6_039_797_760 - 2_468_305_961
    assert "holds 16,739 tokens" in reason_text(reason) and "max_model_len 40,960" in reason_text(
        reason
    )
    # util ≥ k/1000 with ceil(k/1000 × total) ≥ 1 GiB + 512 MiB + 6,039,797,760: k = 76.
    target = GiB + 512 * MiB + 6_039_797_760
    assert -(-75 * CUDA_TOTAL // 1000) < target <= -(-76 * CUDA_TOTAL // 1000)
    # 0.076 asks 7.23 GiB; card 1's gate reads 5,704 − 1,183 MiB: the fix says it will not pass.
    assert note_texts(verdict.nearest) == [
        "card 1: util ≥ 0.076 (card 1's gate refuses it), or kv_cache_memory ≥ 5.62 GiB "
        "(6,039,797,760 B), or --max-model-len ≤ 16,739"
    ]


def test_declared_util_that_holds_the_sequence_passes(fv_ml1: Catalogue, snap: Snapshot) -> None:
    seat = vllm("4 GiB", gpu_memory_utilization=0.04, profile=profile(16_739))
    assert judge(fv_ml1, snap, seat, [1], mode="check").passed
    one_more = vllm("4 GiB", gpu_memory_utilization=0.04, profile=profile(16_740))
    assert rules(judge(fv_ml1, snap, one_more, [1], mode="check")) == [("kv_capacity", 1)]


def test_plan_proposes_the_smallest_util_that_passes_both_refusals(
    fv_ml1: Catalogue, snap: Snapshot
) -> None:
    seat = vllm("3 GiB", profile=profile(8_192))
    verdict = judge(fv_ml1, snap, seat, [1], mode="plan")
    assert verdict.passed
    # Covering the 3 GiB resident needs only 0.020; holding 8,192 tokens needs 0.028.
    assert verdict.util == "0.028"
    at_027 = -(-27 * CUDA_TOTAL // 1000) - GiB - 512 * MiB
    at_028 = -(-28 * CUDA_TOTAL // 1000) - GiB - 512 * MiB
    assert kv_tokens(at_027, QWEN3_4B) < 8_192 <= kv_tokens(at_028, QWEN3_4B)
    without = judge(fv_ml1, snap, vllm("3 GiB"), [1], mode="plan")
    assert without.util == "0.020"


def test_plan_with_a_pinned_kv_cache_cannot_be_saved_by_a_util(
    fv_ml1: Catalogue, snap: Snapshot
) -> None:
    seat = vllm("4 GiB", kv_cache_memory="1 GiB", profile=profile(8_192))
    verdict = judge(fv_ml1, snap, seat, [1], mode="plan")
    assert rules(verdict) == [("kv_capacity", 1)]
    assert note_texts(verdict.nearest) == [
        "card 1: kv_cache_memory ≥ 1.12 GiB (1,207,959,552 B), or --max-model-len ≤ 7,281"
    ]


def test_each_card_of_a_tensor_parallel_seat_is_judged(fv_ml1: Catalogue, snap: Snapshot) -> None:
    # The profile is per card: with tensor parallel each card holds its share of the heads.
    seat = vllm("3 GiB", gpus=2, kv_cache_memory="1 GiB", profile=profile(8_192))
    verdict = judge(fv_ml1, snap, seat, [1, 2], mode="check")
    assert ("kv_capacity", 1) in rules(verdict) and ("kv_capacity", 2) in rules(verdict)


def test_unbounded_and_profileless_seats_meet_no_kv_rule(fv_ml1: Catalogue, snap: Snapshot) -> None:
    unbounded = Seat.model_validate(
        {
            "name": "wide",
            "resident": "1 GiB",
            "engine": {"kind": "vllm", "version": "0.34.0", "profile": profile(10**9)},
        }
    )
    verdict = judge(fv_ml1, snap, unbounded, [1], mode="check")
    assert "kv_capacity" not in {reason.rule for reason in verdict.reasons}
    assert judge(fv_ml1, snap, vllm("1 GiB", kv_cache_memory="64 MiB"), [1], mode="plan").passed


def test_profile_resident_adds_weights_non_kv_kv_and_context() -> None:
    seat = vllm(
        "10740 MiB", kv_cache_memory="2 GiB", profile=profile(8_192, "7600 MiB", "1.32 GiB")
    )
    expected = 7600 * MiB + 1_417_339_207 + 2 * GiB + CONTEXT
    assert profile_resident_bytes(seat, Decimal("0.11"), CUDA_TOTAL, CONTEXT) == expected
    unpinned = vllm("4 GiB", gpu_memory_utilization=0.04, profile=profile(8_192))
    # Without a pin the KV cache fills the request: the resident is request + context.
    assert profile_resident_bytes(unpinned, Decimal("0.04"), CUDA_TOTAL, CONTEXT) == (
        4_078_918_697 + CONTEXT
    )


def test_cuda_graphs_count_in_the_resident_but_not_in_the_kv_cache() -> None:
    """vLLM before 0.21 captures CUDA graphs after sizing its KV cache, outside its request."""
    util = Decimal("0.04")
    without = vllm("4 GiB", gpu_memory_utilization=0.04, profile=profile(8_192))
    graphs = vllm(
        "4 GiB", gpu_memory_utilization=0.04, profile=profile(8_192, cuda_graphs="600 MiB")
    )
    # The KV cache is still ceil(util × total) − weights − non_kv: 16,739 tokens either way.
    for seat in (without, graphs):
        found = kv_capacity(seat, util, CUDA_TOTAL)
        assert found is not None
        assert (found.kv_bytes, found.tokens) == (2_468_305_961, 16_739)
    # The resident: request + context without graphs, and 600 MiB more with them.
    assert profile_resident_bytes(without, util, CUDA_TOTAL, CONTEXT) == 4_078_918_697 + CONTEXT
    assert profile_resident_bytes(graphs, util, CUDA_TOTAL, CONTEXT) == (
        4_078_918_697 + 600 * MiB + CONTEXT
    )
    parts = profile_resident(graphs, util, CUDA_TOTAL, CONTEXT)
    assert parts is not None
    assert (parts.kv_bytes, parts.cuda_graphs_bytes) == (2_468_305_961, 600 * MiB)
    assert "+ KV 2.30 GiB + cuda_graphs 600.00 MiB + cuda_context" in parts_text(parts.parts())
    plain = profile_resident(without, util, CUDA_TOTAL, CONTEXT)
    assert plain is not None and "cuda_graphs" not in parts_text(plain.parts())


def test_plan_leaves_room_for_graphs_outside_the_request(fv_ml1: Catalogue, snap: Snapshot) -> None:
    # Without a pin the seat holds request + graphs + context: the proposed request covers the
    # resident less both, so what vLLM then holds is the declared resident. (A small model: its
    # KV target, 512 MiB and one token, asks less than covering the seat.)
    small = {"max_model_len": 1, "weights": "256 MiB", "non_kv": "256 MiB"}
    plain = judge(fv_ml1, snap, vllm("3 GiB", profile=profile(**small)), [1], mode="plan")
    graphs = vllm("3 GiB", profile=profile(**small, cuda_graphs="1 GiB"))
    verdict = judge(fv_ml1, snap, graphs, [1], mode="plan")
    assert (plain.util, verdict.util) == ("0.020", "0.009")
    for util, outside in ((plain.util, 0), (verdict.util, GiB)):
        assert util is not None
        thousandths = int(Decimal(util) * 1000)
        target = 3 * GiB - CONTEXT - outside
        assert (
            -(-(thousandths - 1) * CUDA_TOTAL // 1000)
            < target
            <= -(-thousandths * CUDA_TOTAL // 1000)
        )
    assert verdict.passed and not [
        w for w in note_texts(verdict.warnings) if "profile implies" in w
    ]
    # A pinned KV cache does not grow with the util: its request covers the resident as before.
    pin = {"kv_cache_memory": "256 MiB"}
    with_pin = vllm("3 GiB", **pin, profile=profile(**small, cuda_graphs="1 GiB"))
    without = vllm("3 GiB", **pin, profile=profile(**small))
    assert (
        judge(fv_ml1, snap, with_pin, [1], mode="plan").util
        == judge(fv_ml1, snap, without, [1], mode="plan").util
    )
