"""The report's advice: small rules that read one host's rows and say what is worth acting on.

Each rule looks at one item (a reserve, a card, a seat …) and returns a sentence or None; the
headline's action is the first sentence of the first rule that speaks, in `RULES` order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from placement.report.rows import (
    CardFit,
    CardRow,
    DecisionRow,
    LoraRow,
    MissingSeat,
    Report,
    ReserveRow,
    SeatRow,
)
from placement.report.text import name
from placement.report.thresholds import foreign_memory_flags, kv_pin_flag
from seats.model import Catalogue
from seats.units import GiB, format_bytes

NOTHING_TO_DO = "nothing needs acting on"


@dataclass(frozen=True)
class HostFacts:
    """What the rules read about one host: its own rows of the report, and its largest fits now."""

    host: str
    catalogue: Catalogue
    fits: tuple[CardFit, ...]
    cards: tuple[CardRow, ...]
    seats: tuple[SeatRow, ...]
    missing: tuple[MissingSeat, ...]
    absent_now: tuple[tuple[str, int], ...]  # (seat, card) down at the newest snapshot
    reserves: tuple[ReserveRow, ...]
    decisions: tuple[DecisionRow, ...]
    loras: tuple[LoraRow, ...]

    @property
    def broken(self) -> tuple[ReserveRow, ...]:
        """The host's reserves broken in at least one snapshot."""
        return tuple(r for r in self.reserves if r.violations)

    @property
    def drifting(self) -> tuple[SeatRow, ...]:
        """Flagged seats, largest drift first."""
        flagged = (s for s in self.seats if s.flagged and s.drift_bytes is not None)
        return tuple(sorted(flagged, key=lambda s: -abs(s.drift_bytes or 0)))


def host_facts(
    report: Report, host: str, catalogue: Catalogue, fits: Sequence[CardFit]
) -> HostFacts:
    """The report's rows of `host` only, and its largest fits now."""
    return HostFacts(
        host=host,
        catalogue=catalogue,
        fits=tuple(fits),
        cards=tuple(c for c in report.cards if c.host == host),
        seats=tuple(s for s in report.seats if s.host == host),
        missing=tuple(m for m in report.missing if m.host == host),
        absent_now=tuple((seat, card) for seat, on, card in report.absent_now if on == host),
        reserves=tuple(r for r in report.reserves if r.host == host),
        decisions=tuple(d for d in report.decisions if d.host == host),
        loras=tuple(lo for lo in report.loras if lo.host == host),
    )


# --- the rules ---------------------------------------------------------------------------


def reserve_broken_now(_: HostFacts, r: ReserveRow) -> str | None:
    """Someone holds a reserved card at the newest snapshot: the seat it is held for cannot start."""
    if not r.violated_now:
        return None
    return (
        f"free card {r.card}: {', '.join(r.holders) or 'something'} holds memory held for "
        f"{', '.join(map(name, r.for_seats))} ({name(r.name)})"
    )


def unexplained_now(_: HostFacts, c: CardRow) -> str | None:
    """Bytes on a card that no seat's `match` claims, now (from the foreign-memory threshold)."""
    if not foreign_memory_flags(c.unexplained_now_bytes):
        return None
    return (
        f"card {c.card} has {format_bytes(c.unexplained_now_bytes)} in processes matching no seat: "
        "name them in the catalogue or stop them"
    )


def drifting_seat(facts: HostFacts, s: SeatRow) -> str | None:
    """A flagged seat: its p95 is off its declared resident by the threshold or more."""
    verb = "holds more" if (s.drift_bytes or 0) > 0 else "holds less"
    return (
        f"{name(s.seat)} (card {s.card}) {verb} than declared: p95 {format_bytes(s.p95_bytes)} vs "
        f"{format_bytes(s.declared_bytes)} ({signed(s.drift_bytes)}); "
        + drift_advice(facts.catalogue, s)
    )


def growing_seat(_: HostFacts, s: SeatRow) -> str | None:
    """A seat whose median grew from the window's first part to its last (and is not flagged)."""
    if not s.grew or s.flagged:
        return None
    return f"{name(s.seat)} (card {s.card}) grew {signed(s.growth_bytes)} over the window: watch it"


def reserve_broken_earlier(_: HostFacts, r: ReserveRow) -> str | None:
    """A reserve broken in the window but not now."""
    if r.violated_now:
        return None
    return (
        f"{name(r.name)} (card {r.card}) was broken in {r.violations} snapshot(s) from {r.first_at} "
        f"by {', '.join(r.holders) or 'something else'}: find who used the held card"
    )


def missing_seat(_: HostFacts, m: MissingSeat) -> str | None:
    """A running seat with a `match` that no snapshot of the window shows."""
    return f"{name(m.seat)} ran nowhere in the window: retire it or bring it back"


def down_now(facts: HostFacts, down: tuple[str, int]) -> str | None:
    """A seat down at the newest snapshot that still keeps its place (unless missing all window)."""
    seat, card = down
    if any(m.seat == seat for m in facts.missing):
        return None
    return f"{name(seat)} is down on card {card} now and still keeps its place"


def runtime_only_adapters(_: HostFacts, lora: LoraRow) -> str | None:
    """LoRA adapters loaded at runtime only: a recreate drops them."""
    if not lora.runtime_only:
        return None
    return (
        f"{name(lora.seat)}: {', '.join(map(name, lora.runtime_only))} loaded at runtime only — gone on the next "
        "recreate unless added to --lora-modules"
    )


def refused_decisions(_: HostFacts, decisions: Sequence[DecisionRow]) -> str | None:
    """Refused plans and checks in the window."""
    refused = [d for d in decisions if d.verdict == "refuse"]
    if not refused:
        return None
    return f"{len(refused)} refused plan/check decision(s) in the window: see Decisions"


def no_room_for_a_gib(_: HostFacts, fits: Sequence[CardFit]) -> str | None:
    """No card of the host takes another 1 GiB seat now."""
    if not fits or any(f.largest_bytes >= GiB for f in fits):
        return None
    return "no card takes another 1 GiB seat: the next seat needs a placement decision"


T = TypeVar("T")


@dataclass(frozen=True)
class Rule(Generic[T]):
    """One rule: the items of a host it reads, and what it says of one (None: nothing)."""

    items: Callable[[HostFacts], Sequence[T]]
    say: Callable[[HostFacts, T], str | None]


# In order of urgency: what blocks a seat now, then what misleads the plan, then what to watch.
RULES: tuple[Rule[Any], ...] = (
    Rule(lambda f: f.broken, reserve_broken_now),
    Rule(lambda f: f.cards, unexplained_now),
    Rule(lambda f: f.drifting, drifting_seat),
    Rule(lambda f: f.seats, growing_seat),
    Rule(lambda f: f.broken, reserve_broken_earlier),
    Rule(lambda f: f.missing, missing_seat),
    Rule(lambda f: f.absent_now, down_now),
    Rule(lambda f: f.loras, runtime_only_adapters),
    Rule(lambda f: (f.decisions,), refused_decisions),
    Rule(lambda f: (f.fits,), no_room_for_a_gib),
)


def advice(facts: HostFacts, rules: Sequence[Rule[Any]] = RULES) -> list[str]:
    """Every sentence the rules say about the host, rule by rule, each rule's items in order."""
    out: list[str] = []
    for rule in rules:
        for item in rule.items(facts):
            sentence = rule.say(facts, item)
            if sentence is not None:
                out.append(sentence)
    return out


def reserves_text(reserves: Sequence[ReserveRow]) -> str:
    """One sentence on whether the host's reserves held all window, naming each broken one."""
    broken = [r for r in reserves if r.violations]
    if not reserves:
        return "no reserves on this host"
    if not broken:
        return "every reserve was honoured in every snapshot"
    return "; ".join(
        f"{name(r.name)} (card {r.card}) broken in {r.violations} snapshot(s), "
        f"{r.first_at} – {r.last_at}{', and now' if r.violated_now else ''}"
        for r in broken
    )


def drift_advice(catalogue: Catalogue, row: SeatRow) -> str:
    """What to do about a drifting seat: lower its resident, pin its KV cache, or look for a leak."""
    if (row.drift_bytes or 0) < 0:
        return "lower its declared resident to free plannable room"
    try:
        seat = catalogue.seat(row.seat)
    except KeyError:
        return "declare it in the catalogue"
    flag = kv_pin_flag(seat)
    if flag is not None:
        return f"pin its KV cache ({flag}) or set its resident to the p95"
    if row.grew:
        return f"it grew {signed(row.growth_bytes)} in the window: look for a leak, or set its resident to the p95"
    return "set its resident to the p95"


def signed(n: int | None) -> str:
    """+1.00 GiB, -512.00 MiB, or '-' for unknown."""
    if n is None:
        return "-"
    return ("+" if n > 0 else "") + format_bytes(n)
