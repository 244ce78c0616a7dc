"""The verifier's answer for one seat: pass, refuse or unknown, with every binding rule in bytes.

`Verdict.to_json()` is DESIGN.md's VERDICT shape, shared by `plan`, `check` and the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from placement.fit.engines.registry import describe
from seats.model import Engine as EngineSpec

Rule = Literal[
    "room",
    "gate",
    "reserve",
    "unbounded",
    "exclusive",
    "error",
    "host",
    "margin",
    "hold",
    "kv_capacity",
    "spill",
    # over a window (placement.fit.week)
    "peak",
    "restart",
    "trend",
]
VerdictKind = Literal["pass", "refuse", "unknown"]


@dataclass(frozen=True)
class Reason:
    """One rule that binds on one card: need vs room and the bytes short (None where not bytes)."""

    rule: Rule
    card: int | None
    need_bytes: int | None
    room_bytes: int | None
    short_bytes: int | None
    text: str
    host: str | None = None

    def to_json(self) -> dict[str, Any]:
        """{rule, card, need_bytes, room_bytes, short_bytes, text} (+ host)."""
        return {
            "rule": self.rule,
            "host": self.host,
            "card": self.card,
            "need_bytes": self.need_bytes,
            "room_bytes": self.room_bytes,
            "short_bytes": self.short_bytes,
            "text": self.text,
        }


def bare_reason(rule: Rule, card: int | None, text: str, host: str | None) -> Reason:
    """A rule that binds without bytes to show (host, error, exclusive, unbounded): its words alone."""
    return Reason(rule, card, None, None, None, text, host)


def host_reason(text: str, host: str | None) -> Reason:
    """A `host` rule: the seat cannot be on this host at all, so no card has bytes to show."""
    return bare_reason("host", None, text, host)


@dataclass(frozen=True)
class CardFigures:
    """The numbers one seat met on one card, for tables and for explaining a pass."""

    card: int
    free_bytes: int
    held_bytes: int
    margin_bytes: int
    others_bytes: int
    need_bytes: int
    room_bytes: int
    gate_free_bytes: int | None
    requested_bytes: int | None


@dataclass(frozen=True)
class Verdict:
    """One seat judged on given cards of one host (or refused everywhere, cards empty)."""

    verdict: VerdictKind
    seat: str
    host: str | None
    cards: tuple[int, ...]
    reasons: tuple[Reason, ...] = ()
    flags: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    nearest: tuple[str, ...] = ()
    need_bytes: int | None = None
    util: str | None = None
    figures: tuple[CardFigures, ...] = field(default=(), compare=False)
    # The seat's engine: to_json gives its {kind, version, behaviour} (DESIGN.md, Engines),
    # computed when shown, not for every verdict the planner asks for and drops.
    engine: EngineSpec | None = field(default=None, compare=False)

    @property
    def passed(self) -> bool:
        """True when the seat may start there."""
        return self.verdict == "pass"

    def to_json(self) -> dict[str, Any]:
        """DESIGN.md's VERDICT: verdict, seat, host, cards, reasons, flags (+ warnings, nearest)."""
        return {
            "verdict": self.verdict,
            "seat": self.seat,
            "host": self.host,
            "cards": list(self.cards),
            "need_bytes": self.need_bytes,
            "util": self.util,
            "reasons": [reason.to_json() for reason in self.reasons],
            "flags": list(self.flags),
            "warnings": list(self.warnings),
            "nearest": list(self.nearest),
            "engine": describe(self.engine),
        }
