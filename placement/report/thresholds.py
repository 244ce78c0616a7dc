"""The thresholds the weekly report's flags and the Prometheus alerts share, in one place.

The report (`rows`, `advice`, `figures`) and `alerts` read these, so a flag in the report and an
alert that fires tell the same story; each rule is stated here once, in integer bytes.
"""

from __future__ import annotations

from placement.fit.engines import engine_of, requests_util
from seats.model import Seat
from seats.units import GiB

# A seat drifts when |observed − declared resident| reaches either bound (`--drift-threshold`).
DRIFT_PERCENT = 5.0
DRIFT_BYTES = GiB

# Processes attributed to no seat are worth acting on from this many bytes on one card.
FOREIGN_MEMORY_BYTES = GiB


def drift_bound_bytes(declared_bytes: int, percent: float | None, size_bytes: int | None) -> float:
    """The smallest |drift| that flags a seat of `declared_bytes`: the lower of the two bounds.

    `DriftThreshold.flags` (a drift of 0 aside) is exactly `abs(drift) >= drift_bound_bytes(…)`;
    the alerts compare against this figure. A float: percent × bytes need not be whole.
    """
    bounds: list[float] = []
    if size_bytes is not None:
        bounds.append(float(size_bytes))
    if percent is not None and declared_bytes > 0:
        bounds.append(percent * declared_bytes / 100)
    if not bounds:
        raise ValueError("a drift threshold needs a percentage or a size")
    return min(bounds)


def foreign_memory_flags(foreign_bytes: int | None) -> bool:
    """Bytes of processes matching no seat on one card that are worth a flag (or an alert)."""
    return foreign_bytes is not None and foreign_bytes >= FOREIGN_MEMORY_BYTES


def below_margin(free_bytes: int, margin_bytes: int) -> bool:
    """A card whose free bytes are under its host's margin (a margin of 0 never flags)."""
    return free_bytes < margin_bytes


# GpuplanCardFillingUp (DESIGN.md "The week"): room under this share of the CUDA total now, and
# `predict_linear` of the daily minima of room over the window below zero within the days ahead.
FILLING_UP_PERCENT = 15
FILLING_UP_WINDOW_DAYS = 7
FILLING_UP_DAYS = 4

# Alerts' default `for:` (placement.report.alerts); here so the CLI can show it without importing that.
DEFAULT_FOR = "5m"


def kv_pin_flag(seat: Seat) -> str | None:
    """The flag that would pin the KV cache of a seat that grows to its util's request (the seed:
    a vLLM seat without a pinned KV cache); None for any other seat. The report's drift advice and
    the drift alert's both offer it."""
    if not requests_util(seat.engine) or seat.engine.kv_cache_bytes is not None:
        return None
    return engine_of(seat.engine).flag_of("kv_cache_bytes")
