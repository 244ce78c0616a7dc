"""Every engine a seat may run, asked through one protocol; and the util arithmetic of engines
that start on a request of a share of the card (`util × cuda_total`, docs/facts.md §2).

Nothing here names an engine: `gate_rule`, `engine_flags` and `requests_util` ask the seat's
engine (registry.py imports its module on first use). All arithmetic is exact: a util is a
Decimal read from its decimal text, never a float product.
"""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING

from placement.fit.engines.base import (
    STEP,
    GateRule,
    Gating,
    UtilSource,
    ceil_times,
    fraction,
    largest_share,
)
from placement.fit.engines.registry import describe, engine

if TYPE_CHECKING:
    from placement.fit.engines.base import EngineRule
    from seats.model import Engine as EngineSpec

__all__ = [
    "UTIL_STEP",
    "GateRule",
    "Gating",
    "UtilSource",
    "cover_target",
    "describe",
    "engine_flags",
    "engine_of",
    "format_util",
    "gate_rule",
    "largest_util_within",
    "named",
    "need_bytes",
    "passes_gate",
    "requested_bytes",
    "requests_util",
    "smallest_util_covering",
    "unbounded_as_declared",
    "util_decimal",
]

UTIL_STEP = STEP  # proposals are 3-decimal utils


def engine_of(spec: EngineSpec) -> EngineRule:
    """The engine a seat's `engine:` block names (its module imported on first use)."""
    return engine(spec.kind)


def requests_util(spec: EngineSpec) -> bool:
    """True when the seat's engine starts on a util request that gpuplan sizes (vLLM)."""
    return engine(spec.kind).util_request


def named(spec: EngineSpec) -> bool:
    """True for an engine gpuplan has a rule for (every kind but `other`): verdicts name it."""
    return spec.kind != "other"


def unbounded_as_declared(spec: EngineSpec) -> bool:
    """True when the seat, as declared, grows into what is free beside it (DESIGN.md, Engines):
    an unbounded util request (vLLM), or an unpinned share-of-free engine."""
    found = engine(spec.kind)
    if found.util_request:
        return found.request_rule(spec, propose=False).gating == "unbounded"
    return found.behaviour(spec) == "share-of-free" and not found.pinned(spec)


def gate_rule(spec: EngineSpec, *, propose: bool) -> GateRule:
    """The util request a seat's engine applies as declared; gating `none` where it has none.

    `propose=True` (plan): a seat without a declared util gets one proposed later.
    `propose=False` (check): the version's default util, or `unbounded` (the engine says when).
    """
    return engine(spec.kind).request_rule(spec, propose=propose)


def engine_flags(
    spec: EngineSpec, util: Decimal | None, kv_cache_bytes: int | None, *, proposed: bool
) -> tuple[str, ...]:
    """The seat's engine's start flags for a util request and a pinned KV cache."""
    return engine(spec.kind).request_flags(util, kv_cache_bytes, proposed=proposed)


# A util is a fraction like any other: its exact Decimal from its shortest decimal text.
util_decimal = fraction


@lru_cache(maxsize=65536)
def requested_bytes(util: Decimal, cuda_total: int) -> int:
    """ceil(util × cuda_total) in exact arithmetic: what the engine asks the card to have free.

    Cached: a fleet asks it for few distinct (util, card size) pairs, each many times.
    """
    # ceil_times is resident_sum.request_bytes' arithmetic, kept inside this package so that
    # fit.engines imports nothing of the rest of fit (fit → engines, one way).
    return ceil_times(util, cuda_total)


def passes_gate(gate_free_bytes: int, requested: int) -> bool:
    """The engine refuses only when free < requested: equal passes (docs/facts.md §2)."""
    return gate_free_bytes >= requested


def format_util(util: Decimal) -> str:
    """A util as flag text: proposals keep their three decimals ('0.110')."""
    return format(util, "f")


def smallest_util_covering(target_bytes: int, cuda_total: int) -> Decimal | None:
    """Smallest 3-decimal util with ceil(util × total) ≥ target; None when even 1.000 is short."""
    if cuda_total <= 0:
        return None
    if target_bytes <= 0:
        return UTIL_STEP
    # ceil(k·T/1000) ≥ n  ⇔  k·T/1000 > n − 1  ⇔  k > 1000·(n − 1)/T
    k = max(1, (1000 * (target_bytes - 1)) // cuda_total + 1)
    if k > 1000:
        return None
    util = Decimal(k) * UTIL_STEP
    return util


# Largest 3-decimal util with ceil(util × total) ≤ limit; None when even 0.001 asks too much.
largest_util_within = largest_share


def need_bytes(
    resident: int,
    kv_cache_bytes: int | None,
    util: Decimal | None,
    cuda_total: int,
    cuda_context: int,
) -> int:
    """What a seat takes on a card once up (DESIGN.md, "What fits means").

    A seat started on a util request without kv_cache_memory grows its KV cache to fill its
    request, so it takes the larger of its resident and ceil(util × total) + cuda_context.
    """
    if util is None or kv_cache_bytes is not None:
        return resident
    return max(resident, requested_bytes(util, cuda_total) + cuda_context)


def cover_target(resident: int, kv_cache_bytes: int | None, cuda_context: int) -> int:
    """Bytes a proposed util's request must reach so that the engine's gate checks the whole seat.

    With kv_cache_memory pinned the request covers the resident (the seed: 0.11 asks
    10,697 MiB for a 10,740 MiB seat); without it the seat grows to request + context, so the
    request covers the resident less the context.
    """
    if kv_cache_bytes is not None:
        return resident
    return max(1, resident - cuda_context)
