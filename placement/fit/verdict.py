"""The verifier's answer for one seat: pass, refuse or unknown, with every binding rule in bytes.

`Verdict.to_json()` is DESIGN.md's VERDICT shape, shared by `plan`, `check` and the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from placement.fit.engines.note import Note, Said, fact_json, renamed_fact
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


# One figure of a reason: bytes and counts as ints, a util or a name as text, names as a tuple,
# and a note it rests on (an engine's why) as that note.
Fact = int | str | tuple[Any, ...] | Note | None


@dataclass(frozen=True)
class Reason:
    """One rule that binds on one card, as data: need vs room and the bytes short (None where
    not bytes), and `said` (which sentence of the rule) with its `facts`, the other numbers and
    names it rests on. The words are written at the edge (placement/cli/reasons_text.py) from
    these; `text` holds them once written there (`worded`), empty in what `fit` returns.
    `within`: the reason of another seat this one repeats (a placed seat it would refuse).
    """

    rule: Rule
    card: int | None
    need_bytes: int | None
    room_bytes: int | None
    short_bytes: int | None
    text: str = ""
    host: str | None = None
    said: str = ""
    facts: tuple[tuple[str, Fact], ...] = ()
    within: Reason | None = None

    def renamed(self, old: str, new: str) -> Reason:
        """The same reason with seat name `old` read as `new` in its names (its words are
        written later, from them)."""

        return replace(
            self,
            # A name anywhere in a fact's text or names (a note may name the seat too).
            facts=tuple((key, renamed_fact(value, old, new)) for key, value in self.facts),
            within=self.within.renamed(old, new) if self.within is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        """{rule, host, card, need_bytes, room_bytes, short_bytes, text} and its facts by name
        (+ `said`, and `within` where it repeats another seat's reason)."""
        data: dict[str, Any] = {
            "rule": self.rule,
            "host": self.host,
            "card": self.card,
            "need_bytes": self.need_bytes,
            "room_bytes": self.room_bytes,
            "short_bytes": self.short_bytes,
            "text": self.text,
        }
        if self.said:
            data["said"] = self.said
        for key, value in self.facts:
            data.setdefault(key, fact_json(value))
        if self.within is not None:
            data["within"] = self.within.to_json()
        return data


def facts(**named: Fact) -> tuple[tuple[str, Fact], ...]:
    """A reason's facts from keyword arguments, in the order given."""
    return tuple(named.items())


def bare_reason(rule: Rule, card: int | None, host: str | None = None, **named: Fact) -> Reason:
    """A rule that binds without bytes to show (host, error, exclusive, unbounded): `said` and
    its facts (`said` defaults to the rule)."""
    said = str(named.pop("said", None) or rule)
    return Reason(rule, card, None, None, None, "", host, said, facts(**named))


def host_reason(host: str | None = None, **named: Fact) -> Reason:
    """A `host` rule: the seat cannot be on this host at all, so no card has bytes to show."""
    return bare_reason("host", None, host, **named)


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
    warnings: tuple[Said, ...] = ()
    nearest: tuple[Said, ...] = ()
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
            # Notes as data ({"note": …}): the edge writes their words (worded_json).
            "warnings": [fact_json(w) for w in self.warnings],
            "nearest": [fact_json(n) for n in self.nearest],
            "engine": describe(self.engine),
        }
