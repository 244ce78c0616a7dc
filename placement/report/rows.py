"""The weekly capacity report's data types: its window, the drift threshold, and every row it prints.

`figures` fills them from the ledger's aggregates; `render` and `charts` print them; nothing here reads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from inventory.history.figures import DecisionRow
from inventory.snapshot import format_utc, utc
from placement.report.thresholds import DRIFT_BYTES, DRIFT_PERCENT
from placement.report.week import Week
from seats.errors import BadInputError
from seats.units import format_bytes, parse_bytes

__all__ = [
    "LOOKBACK_DAYS",
    "PERCENTILE_DEFINITION",
    "CardFit",
    "CardRow",
    "ChartSeries",
    "DecisionRow",
    "DriftThreshold",
    "ForeignProcess",
    "Headline",
    "HoldRow",
    "LoraRow",
    "MissingSeat",
    "Report",
    "ReserveRow",
    "SeatRow",
    "Window",
    "parse_threshold",
    "parse_week",
    "utc",
    "window_since",
]

# Percentiles are nearest-rank: the p-th percentile of N ascending samples is the sample
# at 1-based rank ceil(p × N / 100). It is always a value that was really observed, and in
# integer SQL ceil(p·N/100) is (p·N + 99) / 100.
PERCENTILE_DEFINITION = (
    "nearest-rank: the p-th percentile of N samples sorted ascending is the sample at rank "
    "ceil(p/100 × N), counting from 1 — always a value the ledger really recorded"
)

_WEEK = re.compile(r"^(\d{4})-?W(\d{1,2})$", re.IGNORECASE)
LOOKBACK_DAYS = 90  # how far before the window a missing seat's last sighting is searched


# --- the window -------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """The half-open span [start_s, end_s) of unix seconds the report covers."""

    start_s: int
    end_s: int
    label: str

    @property
    def start(self) -> datetime:
        """Start as a UTC datetime."""
        return datetime.fromtimestamp(self.start_s, UTC)

    @property
    def end(self) -> datetime:
        """End (exclusive) as a UTC datetime."""
        return datetime.fromtimestamp(self.end_s, UTC)


def parse_week(text: str) -> Window:
    """'2026-W38' → Monday 00:00 UTC to the next Monday; bad input (exit 2) otherwise."""
    match = _WEEK.match(text.strip())
    if match is None:
        raise BadInputError(f"--week {text!r}: write an ISO week like 2026-W38")
    year, week = int(match.group(1)), int(match.group(2))
    try:
        monday = datetime.fromisocalendar(year, week, 1).replace(tzinfo=UTC)
    except ValueError as exc:
        raise BadInputError(f"--week {text!r}: {year} has no ISO week {week}") from exc
    start_s = int(monday.timestamp())
    return Window(start_s, start_s + 7 * 86400, f"{year}-W{week:02d}")


def window_since(age: timedelta, until_s: int) -> Window:
    """The `age` up to and including `until_s` (the newest snapshot, by default)."""
    seconds = int(age.total_seconds())
    if seconds <= 0:
        raise BadInputError(f"--since must be a positive age, got {age}")
    end_s = until_s + 1  # the newest snapshot belongs to the window
    return Window(end_s - seconds, end_s, f"{_age_label(seconds)} to {format_utc(utc(until_s))}")


def _age_label(seconds: int) -> str:
    if seconds % 86400 == 0:
        return f"{seconds // 86400} d"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min"


# --- the drift threshold ----------------------------------------------------------------


@dataclass(frozen=True)
class DriftThreshold:
    """A seat is flagged when |drift| reaches `percent` of its declared resident or `size_bytes`."""

    percent: float | None = DRIFT_PERCENT
    size_bytes: int | None = DRIFT_BYTES

    def flags(self, drift_bytes: int, declared_bytes: int) -> bool:
        """True when the drift passes either bound."""
        size = abs(drift_bytes)
        if size == 0:
            return False
        if self.size_bytes is not None and size >= self.size_bytes:
            return True
        return (
            self.percent is not None
            and declared_bytes > 0
            and size * 100 >= self.percent * declared_bytes
        )

    def text(self) -> str:
        """'5% or 1.00 GiB'."""
        parts = []
        if self.percent is not None:
            parts.append(f"{self.percent:g}%")
        if self.size_bytes is not None:
            parts.append(format_bytes(self.size_bytes))
        return " or ".join(parts)


def parse_threshold(text: str) -> DriftThreshold:
    """'5%,1GiB', '10%' or '2 GiB' → DriftThreshold; bad input (exit 2) otherwise."""
    percent: float | None = None
    size_bytes: int | None = None
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part.endswith("%"):
            try:
                percent = float(part[:-1])
            except ValueError as exc:
                raise BadInputError(
                    f"--drift-threshold: cannot read {part!r} as a percentage"
                ) from exc
            if not 0 < percent <= 1000:
                raise BadInputError(f"--drift-threshold: {part!r} must be above 0%")
        else:
            try:
                size_bytes = parse_bytes(part, "--drift-threshold", allow_zero=False)
            except ValueError as exc:
                raise BadInputError(str(exc)) from exc
    if percent is None and size_bytes is None:
        raise BadInputError(f"--drift-threshold {text!r}: write e.g. 5%,1GiB")
    return DriftThreshold(percent, size_bytes)


# --- what the report holds --------------------------------------------------------------


@dataclass(frozen=True)
class CardFit:
    """The largest new seat the verifier lets onto one card now."""

    card: int
    largest_bytes: int  # a seat without a start-up gate (engine kind other)
    largest_vllm_bytes: int  # a vLLM seat whose util asks for its resident (gate included)
    vllm_util: str | None  # the util that seat would start with
    binding: str  # what stops the next byte: rule names from the verifier


@dataclass(frozen=True)
class Headline:
    """Per host: room now, whether reserves held, and the one thing most worth acting on."""

    host: str
    taken_at: str
    fits: tuple[CardFit, ...]
    reserves_honoured: bool
    reserves_text: str
    action: str
    other_actions: tuple[str, ...]


@dataclass(frozen=True)
class CardRow:
    """One card over the window, and its state at the newest snapshot."""

    host: str
    card: int
    uuid: str | None
    samples: int
    error_samples: int
    total_bytes: int | None
    reserved_bytes: int | None
    declared_bytes: int
    held_bytes: int
    used_p50_bytes: int | None
    used_p95_bytes: int | None
    used_max_bytes: int | None
    min_free_bytes: int | None
    min_free_at: str | None
    unexplained_now_bytes: int | None
    unexplained_max_bytes: int | None
    unexplained_max_at: str | None
    free_now_bytes: int | None
    plannable_now_bytes: int
    nvml_v1: bool


@dataclass(frozen=True)
class SeatRow:
    """One seat on one card: declared vs observed, drift and growth over the window."""

    seat: str
    host: str
    card: int
    declared_bytes: int | None  # None: a seat the catalogue does not know (renamed?)
    samples: int
    p50_bytes: int
    p95_bytes: int
    max_bytes: int
    drift_bytes: int | None  # p95 − declared
    drift_percent: float | None
    flagged: bool
    first_p50_bytes: int | None  # median over the first part of the window
    last_p50_bytes: int | None  # median over the last part
    growth_bytes: int | None
    grew: bool


@dataclass(frozen=True)
class MissingSeat:
    """A running seat with a `match` that no snapshot of the window shows (stopped?)."""

    seat: str
    host: str
    cards: tuple[int, ...]
    declared_bytes: int
    last_seen: str | None  # newest sighting before the window, if any


@dataclass(frozen=True)
class ForeignProcess:
    """A process no seat's `match` claims, by host, card and command line."""

    host: str
    card: int
    cmdline: str | None
    pids: int
    samples: int
    first_at: str
    last_at: str
    max_bytes: int
    # The server's line above a bare process title (`VLLM::EngineCore`), else None.
    parent: str | None = None


@dataclass(frozen=True)
class ReserveRow:
    """One reserve, its card, and the snapshots where something else ate into it."""

    name: str
    host: str
    card: int
    for_seats: tuple[str, ...]
    reserve_bytes: int | None
    violations: int
    first_at: str | None
    last_at: str | None
    worst_bytes: int | None  # most bytes others held on the card in one snapshot
    worst_at: str | None
    holders: tuple[str, ...]
    violated_now: bool


@dataclass(frozen=True)
class LoraRow:
    """One LoRA carrier: its adapters and what serving them as adapters saves."""

    seat: str
    host: str | None
    max_loras: int
    persisted: tuple[str, ...]
    runtime_only: tuple[str, ...]
    carrier_bytes: int
    weights_bytes: int | None
    merged_bytes: int | None  # N × weights: merged copies' weights alone
    saved_bytes: int | None  # merged − carrier resident


@dataclass(frozen=True)
class ChartSeries:
    """One card's used bytes over the window, bucketed, stacked by seat (means per bucket)."""

    host: str
    card: int
    bucket_s: int
    times_s: tuple[int, ...]
    layers: tuple[tuple[str, tuple[float, ...]], ...]  # seat → mean bytes per bucket; "other" last
    cuda_total_bytes: int | None
    declared_bytes: int
    held_bytes: int
    # The headroom view: lowest free per bucket (None where no reading), the host's margin,
    # and each seat's declared resident (its drift over time is its layer − this).
    free_min: tuple[int | None, ...] = ()
    margin_bytes: int = 0
    seat_declared: tuple[tuple[str, int], ...] = ()
    # Plannable per bucket: max(0, room) of its lowest free with held and margin as now.
    plannable_min: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class UnusableHost:
    """A catalogue host the report has nothing (or no 'now') for, and why; kinds as `plan` says."""

    host: str
    kind: str  # absent, stale, incomplete, collision, mig, units, poll
    reason: str


@dataclass(frozen=True)
class HoldRow:
    """An approval that counts as held now (from the ledger a report was given)."""

    seat: str
    host: str
    cards: tuple[int, ...]
    need_bytes: int
    created_at: str
    expires_at: str
    user: str


@dataclass(frozen=True)
class Report:
    """Everything the renderers print, in the order they print it."""

    window: Window
    ledger: str
    first_at: str
    last_at: str
    snapshots: int
    threshold: DriftThreshold
    headlines: tuple[Headline, ...]
    cards: tuple[CardRow, ...]
    seats: tuple[SeatRow, ...]
    missing: tuple[MissingSeat, ...]
    absent_now: tuple[tuple[str, str, int], ...]  # (seat, host, card) down at the newest snapshot
    foreign: tuple[ForeignProcess, ...]
    reserves: tuple[ReserveRow, ...]
    decisions: tuple[DecisionRow, ...]
    loras: tuple[LoraRow, ...]
    charts: tuple[ChartSeries, ...]
    notes: tuple[str, ...] = field(default=())
    source: str = "ledger"  # where the figures come from: "ledger" or "prometheus"
    percentile: str = PERCENTILE_DEFINITION
    holds: tuple[HoldRow, ...] | None = None  # None: not listed (no ledger to read them from)
    expired_holds: tuple[HoldRow, ...] = ()  # approved in the window, expired, seat never seen
    # DESIGN.md "Fleets": hosts of the source outside the catalogue, left out of every figure;
    # catalogue hosts the source has no data (or no readable 'now') for.
    ignored_hosts: tuple[str, ...] = ()
    unusable_hosts: tuple[UnusableHost, ...] = ()
    # DESIGN.md "The week": room by hour, restart safety, co-tenants, coverage (None: not built).
    week: Week | None = None

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data: `"schema": 1` and raw byte ints."""
        # The charts' series are not JSON, and large.
        data = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "charts"}
        data["window"] = {
            "start": format_utc(self.window.start),
            "end": format_utc(self.window.end),
            "label": self.window.label,
        }
        # The JSON key stays "bytes" (schema 1).
        data["threshold"] = {"percent": self.threshold.percent, "bytes": self.threshold.size_bytes}
        if self.holds is None:
            data.pop("holds")
            data.pop("expired_holds")
        if self.week is None:
            data.pop("week")
        else:
            week = data["week"]
            for row, tenant in zip(week["tenants"], self.week.tenants, strict=True):
                row["recurrence"] = tenant.recurrence
            for row, host in zip(week["coverage"], self.week.coverage, strict=True):
                row["coverage"] = round(host.coverage, 4)
        if self.source == "ledger":
            data.pop("source")  # schema 1 as it was: a ledger report has no "source" key
        return {"schema": 1, **data}


def _plain(value: Any) -> Any:
    """`dataclasses.asdict` of a report's value without its deep copies (its leaves are
    immutable): dataclasses as dicts of their fields, tuples and lists of them element-wise."""
    kind = type(value)
    if kind is tuple or kind is list:
        return kind(_plain(v) for v in value)
    if is_dataclass(value):
        names = _FIELDS.get(kind)
        if names is None:
            names = _FIELDS[kind] = tuple(f.name for f in fields(value))
        return {name: _plain(getattr(value, name)) for name in names}
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


_FIELDS: dict[type, tuple[str, ...]] = {}


def hold_rows(holds: Sequence[Any]) -> tuple[HoldRow, ...]:
    """Active holds from the ledger (`inventory.holds.Hold`) as report rows."""
    return tuple(
        HoldRow(
            seat=h.seat,
            host=h.host,
            cards=tuple(h.cards),
            need_bytes=h.need_bytes,
            created_at=format_utc(h.created_at),
            expires_at=format_utc(h.expires_at),
            user=h.user,
        )
        for h in holds
    )
