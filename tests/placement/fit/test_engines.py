"""vLLM's gate by version, in exact integer arithmetic (docs/facts.md §2)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement.cli.notes_text import note_texts
from placement.fit.engines import (
    cover_target,
    gate_rule,
    largest_util_within,
    need_bytes,
    passes_gate,
    requested_bytes,
    smallest_util_covering,
    util_decimal,
)
from placement.fit.engines.vllm import default_util, engine_flags, parse_version
from seats.model import Engine
from seats.units import GiB, MiB

CUDA_TOTAL = 101_972_967_424  # fv-ml1, 94.97 GiB (docs/facts.md §3)


def test_requested_is_exact_ceil_not_a_float_product() -> None:
    # 0.11 × 101,972,967,424 = 11,217,026,416.64: the ceiling is …417.
    assert requested_bytes(Decimal("0.11"), CUDA_TOTAL) == (11 * CUDA_TOTAL + 99) // 100
    assert requested_bytes(Decimal("0.11"), CUDA_TOTAL) == 11_217_026_417
    # A whole product is not rounded up.
    assert requested_bytes(Decimal("0.5"), 1000) == 500
    assert requested_bytes(Decimal("0.001"), 1001) == 2


def test_util_from_float_keeps_its_decimal_text() -> None:
    assert util_decimal(0.11) == Decimal("0.11")
    assert util_decimal(0.046) == Decimal("0.046")


def test_gate_refuses_only_when_strictly_less() -> None:
    assert passes_gate(100, 100)
    assert not passes_gate(99, 100)


def test_seed_gate_before_voices() -> None:
    # card 0 before voices: vLLM read 11.16 GiB free (12,611 − 1,183 MiB).
    free = (12_611 - 1_183) * MiB
    assert not passes_gate(free, requested_bytes(Decimal("0.12"), CUDA_TOTAL))
    assert passes_gate(free, requested_bytes(Decimal("0.11"), CUDA_TOTAL))
    assert largest_util_within(free, CUDA_TOTAL) == Decimal("0.117")  # cut-off ≈ 0.1175


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.11.0", (0, 11, 0)),
        ("0.10.2", (0, 10, 2)),
        ("v0.34.1rc2", (0, 34, 1)),
        ("0.33", (0, 33, 0)),
        ("nightly", None),
        (None, None),
    ],
)
def test_parse_version(text: str | None, expected: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize(
    ("version", "util"),
    [("0.10.2", "0.9"), ("0.11.0", "0.9"), ("0.32.9", "0.9"), ("0.33.0", "0.92")],
)
def test_default_util_by_version_for_check(version: str, util: str) -> None:
    rule = gate_rule(Engine(kind="vllm", version=version), propose=False)
    assert rule.gating == "gated"
    assert rule.source == "default"
    assert rule.util == Decimal(util)
    assert default_util(parse_version(version)) == Decimal(util)


def test_034_without_util_or_kv_is_unbounded() -> None:
    rule = gate_rule(Engine(kind="vllm", version="0.34.0"), propose=False)
    assert rule.gating == "unbounded"
    assert rule.util is None


def test_no_version_and_neither_is_unbounded() -> None:
    assert gate_rule(Engine(kind="vllm"), propose=False).gating == "unbounded"


def test_034_with_kv_is_gated_at_092() -> None:
    rule = gate_rule(Engine(kind="vllm", version="0.34.0", kv_cache_memory=2 * GiB), propose=False)
    assert (rule.gating, rule.util, rule.kv_cache_bytes) == ("gated", Decimal("0.92"), 2 * GiB)


def test_034_with_util_is_gated_as_declared() -> None:
    rule = gate_rule(
        Engine(kind="vllm", version="0.34.0", gpu_memory_utilization=0.3), propose=False
    )
    assert (rule.gating, rule.util, rule.source) == ("gated", Decimal("0.3"), "declared")


def test_unknown_version_is_gated_with_a_warning() -> None:
    rule = gate_rule(Engine(kind="vllm", version="nightly"), propose=False)
    assert rule.gating == "gated"
    assert rule.util == Decimal("0.92")
    assert any("not recognised" in warning for warning in note_texts(rule.warnings))


def test_other_engines_have_no_gate() -> None:
    rule = gate_rule(Engine(kind="other"), propose=False)
    assert (rule.gating, rule.util) == ("none", None)


def test_plan_proposes_for_unbounded_and_warns() -> None:
    rule = gate_rule(Engine(kind="vllm", version="0.34.0"), propose=True)
    assert (rule.gating, rule.source, rule.util) == ("gated", "proposed", None)
    assert any("unbounded" in warning for warning in note_texts(rule.warnings))


def test_need_without_kv_grows_to_the_request() -> None:
    ctx = 1183 * MiB
    small = need_bytes(4 * GiB, None, Decimal("0.5"), CUDA_TOTAL, ctx)
    assert small == requested_bytes(Decimal("0.5"), CUDA_TOTAL) + ctx
    assert need_bytes(4 * GiB, 2 * GiB, Decimal("0.5"), CUDA_TOTAL, ctx) == 4 * GiB
    assert need_bytes(60 * GiB, None, Decimal("0.1"), CUDA_TOTAL, ctx) == 60 * GiB


def test_cover_target() -> None:
    assert cover_target(10_740 * MiB, 2 * GiB, 1183 * MiB) == 10_740 * MiB
    assert cover_target(10_740 * MiB, None, 1183 * MiB) == (10_740 - 1183) * MiB


def test_flags() -> None:
    assert engine_flags(Decimal("0.11"), 2 * GiB, proposed=True) == (
        "--gpu-memory-utilization",
        "0.110",
        "--kv-cache-memory-bytes",
        "2147483648",
    )
    assert engine_flags(Decimal("0.11"), None, proposed=False) == (
        "--gpu-memory-utilization",
        "0.11",
    )


@given(st.integers(1, 10**12), st.integers(10**6, 2 * 10**11))
def test_smallest_covering_util_is_smallest(target: int, total: int) -> None:
    util = smallest_util_covering(target, total)
    if util is None:
        assert requested_bytes(Decimal(1), total) < target
        return
    assert requested_bytes(util, total) >= target
    below = util - Decimal("0.001")
    assert below == 0 or requested_bytes(below, total) < target


@given(st.integers(1, 10**12), st.integers(10**6, 2 * 10**11))
def test_largest_util_within_is_largest(limit: int, total: int) -> None:
    util = largest_util_within(limit, total)
    if util is None:
        assert requested_bytes(Decimal("0.001"), total) > limit
        return
    assert requested_bytes(util, total) <= limit
    above = util + Decimal("0.001")
    assert above > 1 or requested_bytes(above, total) > limit


@given(st.integers(0, 10**12), st.integers(10**6, 2 * 10**11))
def test_smallest_share_of_free_is_smallest(target: int, amount: int) -> None:
    # SGLang's pin: the smallest 3-decimal m with floor(m × F0) ≥ target (floor: its share).
    from placement.fit.engines.base import floor_times, smallest_share

    share = smallest_share(target, amount)
    if share is None:
        assert amount < target
        return
    assert floor_times(share, amount) >= target
    below = share - Decimal("0.001")
    assert below == 0 or floor_times(below, amount) < target
