"""What the week's replay is given and what it answers: plain frozen data, bytes as ints.

Times are UTC `datetime`s; hours are UTC hours 0–23; a `by_hour` is 24 counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from placement.fit.verdict import Fact, Reason, Rule, facts

Confidence = Literal["none", "low", "high"]
Status = Literal["pass", "refuse", "unknown"]

DAY_S = 86_400
HOUR_S = 3_600


class FieldsJson:
    """`to_json` of a dataclass whose JSON is its fields by name, in order: times as UTC text,
    tuples as lists."""

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]
        for key, value in data.items():
            if isinstance(value, datetime):
                data[key] = _utc(value)
            elif isinstance(value, tuple):
                data[key] = list(value)
        return data


@dataclass(frozen=True)
class NewSeat:
    """A seat the deploy starts now, as the verifier judged it at the window's end.

    `need_bytes`: what it takes on each of its cards (the verdict's need); `requested_bytes`:
    its own gate's request per card (empty for a seat with no request gate); `resident_bytes`:
    its declared resident (what it consumes of a reserve it is for).
    """

    name: str
    cards: tuple[int, ...]
    need_bytes: int
    requested_bytes: Mapping[int, int] = field(default_factory=dict)
    resident_bytes: int | None = None
    exclusive: bool = False


@dataclass(frozen=True)
class WindowRules:
    """The window and the statistic's settings (DESIGN.md "The week").

    `percentile`: at most two decimals, in (0, 100]; `min_coverage`: a fraction in [0, 1];
    `horizon_days`: refuse when a card's forecast runs out within it (None: warn only).
    """

    start: datetime
    end: datetime
    percentile: Decimal = Decimal(100)
    min_history_s: int = DAY_S
    min_coverage: Decimal = Decimal("0.9")
    horizon_days: Decimal | None = None
    restart_safe: bool = False
    rebase: bool = True

    @property
    def seconds(self) -> int:
        return int((self.end - self.start).total_seconds())


@dataclass(frozen=True)
class Gap(FieldsJson):
    """Two consecutive moments further apart than max(5 min, 3 × interval)."""

    after: datetime  # the moment before the gap
    before: datetime  # the moment after it
    seconds: int


@dataclass(frozen=True)
class HostWindow:
    """A host's moments over the window: spacing, gaps, history, coverage and clocks."""

    host: str
    start: datetime
    end: datetime
    moments: int
    interval_s: int  # the median spacing of consecutive moments (0 with fewer than two)
    history_s: int  # first moment to last, plus one interval
    gaps: tuple[Gap, ...]  # largest first
    unseen_s: int  # Σ over gaps of (spacing − interval)
    unseen_hours: tuple[int, ...]  # UTC hours no moment fell in, on any day
    skewed: int  # moments whose arrival differs from their taken_at by more than 5 min
    largest_skew_s: int

    @property
    def coverage(self) -> Decimal:
        """1 − unseen / history (1 with no history)."""
        if self.history_s <= 0:
            return Decimal(1)
        return Decimal(1) - Decimal(self.unseen_s) / Decimal(self.history_s)


@dataclass(frozen=True)
class Squeezer(FieldsJson):
    """A seat or foreign command line that held more at the worst moment than it holds now.

    `by_hour[h]`: on how many UTC days it held more than now at some moment of hour h; `days`
    of `of_days` (days the card was seen) it did so at all. `behaviour` is its engine's, for
    saying what would happen to it (None: no engine recognised).
    """

    name: str
    seat: bool  # a catalogue seat; False: a foreign command line
    engine: str | None
    behaviour: str | None
    then_bytes: int
    now_bytes: int
    by_hour: tuple[int, ...]
    days: int
    of_days: int

    @property
    def excess_bytes(self) -> int:
        return self.then_bytes - self.now_bytes


@dataclass(frozen=True)
class Forecast:
    """A card's daily minima of room fitted by least squares (Prometheus's predict_linear).

    x: each 24 h bucket's end, in days before the window's end (0, −1, …); y: its least room.
    slope and intercept (the room predicted at the end) in bytes; days_to_full = intercept /
    (−slope) and days_to_full_with_seat = (intercept − need) / (−slope), where slope < 0.
    """

    buckets: int
    slope_bytes_per_day: int | None
    intercept_bytes: int | None
    r2: float | None
    days_to_full: float | None
    days_to_full_with_seat: float | None
    confidence: Confidence

    def to_json(self) -> dict[str, Any]:
        return {
            "buckets": self.buckets,
            "slope_bytes_per_day": self.slope_bytes_per_day,
            "intercept_bytes": self.intercept_bytes,
            "r2": None if self.r2 is None else round(self.r2, 4),
            "days_to_full": _days(self.days_to_full),
            "days_to_full_with_seat": _days(self.days_to_full_with_seat),
            "confidence": self.confidence,
        }


@dataclass(frozen=True)
class CardWindow:
    """One of the seat's cards over the window: its room for the seat at every seen moment."""

    card: int
    room_now_bytes: int  # the room the verifier found at the end
    window_room_bytes: int | None  # the least room over the seen moments (None: none seen)
    min_room_at: datetime | None  # the earliest moment of that least room
    seen_moments: int
    unseen_moments: int  # moments where this card was in error or missing
    short_moments: int
    allowed_short: int
    short_by_hour: tuple[int, ...]
    squeezed_by: tuple[Squeezer, ...]
    forecast: Forecast
    # The least room once the `allowed_short` least are left out: the most a seat may need here
    # and pass at the percentile (= window_room_bytes at p100; None: none seen).
    percentile_room_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "card": self.card,
            "room_now_bytes": self.room_now_bytes,
            "window_room_bytes": self.window_room_bytes,
            "percentile_room_bytes": self.percentile_room_bytes,
            "min_room_at": _utc(self.min_room_at),
            "seen_moments": self.seen_moments,
            "unseen_moments": self.unseen_moments,
            "short_moments": self.short_moments,
            "allowed_short": self.allowed_short,
            "short_by_hour": list(self.short_by_hour),
            "squeezed_by": [s.to_json() for s in self.squeezed_by],
            "forecast": self.forecast.to_json(),
        }


@dataclass(frozen=True)
class RestartRisk(FieldsJson):
    """A request-gated seat whose own gate would fail on a restart at some moments, the new
    seats placed: the seat judged itself (`new`), or a running neighbour on its cards.

    For a neighbour, only moments where it would pass without the new seats count (the new
    seats are what leaves it short); `already_short` counts those where it fails either way.
    """

    seat: str
    card: int
    new: bool
    engine: str | None
    requested_bytes: int
    short_moments: int
    already_short: int
    worst_at: datetime
    short_bytes: int  # request − what its gate would read, at the worst moment
    by_hour: tuple[int, ...]
    days: int
    of_days: int


@dataclass(frozen=True)
class Cold:
    """A seat seen for less than --min-history since its last change: counted at
    max(its bytes then, its declared need) at every moment."""

    seat: str
    card: int
    since: datetime
    seen_s: int
    need_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "seat": self.seat,
            "card": self.card,
            "since": _utc(self.since),
            "seen_seconds": self.seen_s,
            "need_bytes": self.need_bytes,
        }


@dataclass(frozen=True)
class Rebased(FieldsJson):
    """A seat whose command line changed in the window: before `changed_at` it counts at its
    peak since (`peak_bytes`)."""

    seat: str
    card: int
    changed_at: datetime
    peak_bytes: int


@dataclass(frozen=True)
class WindowWarning:
    """A warning as data (`kind` one of gap, clock, trend, restart, gate_hours, command_lines);
    its words are written in `placement.cli`."""

    kind: str
    figures: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.figures}


def WindowReason(
    rule: Rule,
    card: int | None,
    need_bytes: int | None,
    room_bytes: int | None,
    short_bytes: int | None,
    host: str | None,
    *,
    at: datetime | None,
    short_moments: int | None = None,
    allowed_short: int | None = None,
    **more: Fact,
) -> Reason:
    """A reason of rule `peak`, `restart` or `trend` as data (`said` is the rule): the usual
    keys, and `at`, `short_moments`, `allowed_short` and the rule's own facts."""
    return Reason(
        rule,
        card,
        need_bytes,
        room_bytes,
        short_bytes,
        host=host,
        said=rule,
        facts=facts(at=_utc(at), short_moments=short_moments, allowed_short=allowed_short, **more),
    )


@dataclass(frozen=True)
class SeatWindow:
    """One new seat judged over the window: the union of its cards' short moments, the rules'
    reasons, and what the window says beside them.

    `status`: refuse when a rule refuses on the seen moments; else unknown when the history is
    shorter than --min-history (`unknown_why` "history") or the coverage of one of its cards is
    under --min-coverage ("coverage"); else pass.
    """

    seat: str
    host: HostWindow
    rules: WindowRules
    need_bytes: int
    cards: tuple[CardWindow, ...]
    seen_moments: int  # moments where at least one of its cards was seen
    short_moments: int  # the union by moment
    allowed_short: int
    short_by_hour: tuple[int, ...]
    worst_at: datetime | None
    worst_card: int | None
    worst_short_bytes: int
    restart_risks: tuple[RestartRisk, ...]
    gate_hours: tuple[int, ...]  # UTC hours its gate passed on ≥ 6 of 7 days (ask when refused)
    cold: tuple[Cold, ...]
    rebased: tuple[Rebased, ...]
    coverage: Decimal  # the least of its cards'
    pass_percentile: Decimal | None  # the highest percentile at which `peak` would pass
    reasons: tuple[Reason, ...]
    warnings: tuple[WindowWarning, ...]
    status: Status
    unknown_why: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON `window` block of a VERDICT (DESIGN.md "What it prints")."""
        return {
            "start": _utc(self.rules.start),
            "end": _utc(self.rules.end),
            "seconds": self.rules.seconds,
            "percentile": float(self.rules.percentile),
            "moments": self.host.moments,
            "seen_moments": self.seen_moments,
            "interval_seconds": self.host.interval_s,
            "history_seconds": self.host.history_s,
            "coverage": round(float(self.coverage), 4),
            "gaps": [g.to_json() for g in self.host.gaps],
            "short_moments": self.short_moments,
            "allowed_short": self.allowed_short,
            "short_by_hour": list(self.short_by_hour),
            "pass_percentile": None
            if self.pass_percentile is None
            else float(self.pass_percentile),
            "cards": [c.to_json() for c in self.cards],
            "restart_risks": [r.to_json() for r in self.restart_risks],
            "gate_hours": list(self.gate_hours),
            "cold": [c.to_json() for c in self.cold],
            "rebased": [r.to_json() for r in self.rebased],
            "warnings": [w.to_json() for w in self.warnings],
            "status": self.status,
            "unknown_why": self.unknown_why,
        }


def _utc(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _days(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
