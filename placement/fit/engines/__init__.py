"""Engine start-up gates by kind and version: vLLM's `free ≥ ceil(util × total)` check (FACTS.md §2).

All arithmetic is exact: a util is a Decimal read from its decimal text, never a float product.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Literal

from placement.fit.engines.base import ceil_times
from seats.model import Engine, Seat

Gating = Literal["gated", "unbounded", "none"]
UtilSource = Literal["declared", "default", "proposed", "none"]

# FACTS.md §2: the default --gpu-memory-utilization by version; 0.34 skips the gate by default.
DEFAULT_UTIL_OLD = Decimal("0.9")  # up to 0.32
DEFAULT_UTIL_033 = Decimal("0.92")  # 0.33, and 0.34+ once kv_cache_memory turns the gate back on
UNBOUNDED_FROM = (0, 34)
GATED_DEFAULT_FROM = (0, 33)
UTIL_STEP = Decimal("0.001")  # proposals are 3-decimal utils
_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """'0.11.0' → (0, 11, 0); 'v0.34.1rc2' → (0, 34, 1); None or unreadable → None."""
    if text is None:
        return None
    found = _VERSION.match(text)
    if found is None:
        return None
    return (int(found.group(1)), int(found.group(2)), int(found.group(3) or 0))


def util_decimal(value: float | str | Decimal) -> Decimal:
    """A util as an exact Decimal from its shortest decimal text (0.11 → Decimal('0.11'))."""
    if isinstance(value, Decimal):
        return value
    # repr of a float is its shortest round-tripping text: 0.11, not 0.11000000000000000056.
    return Decimal(repr(value) if isinstance(value, float) else value)


@lru_cache(maxsize=65536)
def requested_bytes(util: Decimal, cuda_total: int) -> int:
    """ceil(util × cuda_total) in exact arithmetic: what vLLM asks the card to have free.

    Cached: a fleet asks it for few distinct (util, card size) pairs, each many times.
    """
    # ceil_times is resident_sum.request_bytes' arithmetic, kept inside this package so that
    # fit.engines imports nothing of the rest of fit (fit → engines, one way).
    return ceil_times(util, cuda_total)


def passes_gate(gate_free_bytes: int, requested: int) -> bool:
    """vLLM refuses only when free < requested: equal passes (FACTS.md §2)."""
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


def largest_util_within(limit_bytes: int, cuda_total: int) -> Decimal | None:
    """Largest 3-decimal util with ceil(util × total) ≤ limit; None when even 0.001 asks too much."""
    if cuda_total <= 0 or limit_bytes <= 0:
        return None
    # ceil(k·T/1000) ≤ n  ⇔  k·T/1000 ≤ n  ⇔  k ≤ 1000·n/T
    k = min(1000, (1000 * limit_bytes) // cuda_total)
    if k < 1:
        return None
    return Decimal(k) * UTIL_STEP


@dataclass(frozen=True)
class GateRule:
    """How a seat's engine meets a card: its gating, the util judged and where it came from."""

    gating: Gating
    util: Decimal | None
    source: UtilSource
    kv_cache_bytes: int | None
    warnings: tuple[str, ...] = ()
    # False for vLLM ≥ 0.34 with a declared util and no kv_cache_memory: its extensible KV
    # cache skips the start-up check, and the util only caps what it grows to (judged by room).
    checks_gate: bool = True


def is_vllm(seat: Seat) -> bool:
    """True for a vLLM seat (the only engine with a start-up gate)."""
    return seat.engine.kind == "vllm"


def gate_rule(engine: Engine, *, propose: bool) -> GateRule:
    """The gate a seat's engine applies as declared.

    `propose=True` (plan): a vLLM seat without a declared util gets one proposed later, so it
    is gated with source "proposed" even where, as declared, it would be unbounded.
    `propose=False` (check): the version's default util, or "unbounded" for 0.34+ with neither
    util nor kv_cache_memory (and for a seat that names no version and neither).
    """
    if engine.kind != "vllm":
        return GateRule("none", None, "none", None)
    kv = engine.kv_cache_bytes
    version = parse_version(engine.version)
    if engine.gpu_memory_utilization is not None:
        util = util_decimal(engine.gpu_memory_utilization)
        capped = kv is None and version is not None and version[:2] >= UNBOUNDED_FROM
        return GateRule("gated", util, "declared", kv, checks_gate=not capped)
    warnings: list[str] = []
    if engine.version is not None and version is None:
        warnings.append(
            f"vLLM version {engine.version!r} is not recognised; judged as gated with util "
            f"{DEFAULT_UTIL_033}"
        )
    unbounded = kv is None and (
        engine.version is None or (version is not None and version[:2] >= UNBOUNDED_FROM)
    )
    if propose:
        if unbounded:
            warnings.append(
                "as declared it is unbounded (vLLM ≥ 0.34 with neither gpu_memory_utilization "
                "nor kv_cache_memory sizes its KV cache to nearly all free memory); start it with "
                "the flags shown"
            )
        return GateRule("gated", None, "proposed", kv, tuple(warnings))
    if unbounded:
        return GateRule("unbounded", None, "default", kv, tuple(warnings))
    return GateRule("gated", default_util(version), "default", kv, tuple(warnings))


def default_util(version: tuple[int, int, int] | None) -> Decimal:
    """The util vLLM uses when none is passed, for a gated start (FACTS.md §2)."""
    if version is not None and version[:2] < GATED_DEFAULT_FROM:
        return DEFAULT_UTIL_OLD
    # 0.33, 0.34+ with kv_cache_memory, and an unknown version (the stricter of the two).
    return DEFAULT_UTIL_033


def need_bytes(
    resident: int,
    kv_cache_bytes: int | None,
    util: Decimal | None,
    cuda_total: int,
    cuda_context: int,
) -> int:
    """What a seat takes on a card once up (DESIGN.md, "What fits means").

    A vLLM seat without kv_cache_memory grows its KV cache to fill its request, so it takes
    the larger of its resident and ceil(util × total) + cuda_context.
    """
    if util is None or kv_cache_bytes is not None:
        return resident
    return max(resident, requested_bytes(util, cuda_total) + cuda_context)


def cover_target(resident: int, kv_cache_bytes: int | None, cuda_context: int) -> int:
    """Bytes a proposed util's request must reach so that vLLM's gate checks the whole seat.

    With kv_cache_memory pinned the request covers the resident (the seed: 0.11 asks
    10,697 MiB for a 10,740 MiB seat); without it the seat grows to request + context, so the
    request covers the resident less the context.
    """
    if kv_cache_bytes is not None:
        return resident
    return max(1, resident - cuda_context)


def engine_flags(
    util: Decimal | None, kv_cache_bytes: int | None, *, proposed: bool
) -> tuple[str, ...]:
    """vLLM start flags: util (three decimals when proposed) and the pinned KV cache."""
    flags: list[str] = []
    if util is not None:
        text = format(util.quantize(UTIL_STEP), "f") if proposed else format_util(util)
        flags += ["--gpu-memory-utilization", text]
    if kv_cache_bytes is not None:
        flags += ["--kv-cache-memory-bytes", str(kv_cache_bytes)]
    return tuple(flags)
