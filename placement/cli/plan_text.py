"""Text rendering of a plan: cards before/after per host, then PLACED/REFUSED lines with flags and reasons.

The `--json` output is `PlanResult.to_json()`; this is the same content for people.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from inventory.snapshot import format_utc
from placement.cli.notes_text import note_texts
from placement.cli.reasons_text import reason_text
from placement.cli.render import b, gib, reason_figures, table
from placement.fit.verdict import Reason, Verdict
from placement.plan.explain import SUMMARY_PLACES, Summary, summarise
from placement.plan.planner import PlanCardRow, PlanResult
from seats.names import escaped

_CARD_HEADERS = ("card", "used / total", "free", "free after", "held", "plannable → after", "seats")


# The solvers as their authors write them.
SOLVER_NAMES = {"cbc": "CBC", "highs": "HiGHS"}


def _header(result: PlanResult, origins: Mapping[str, str], seconds: float | None) -> list[str]:
    how = {
        "optimal": "optimal",
        "time_limit": "time limit, not proven optimal",
        "greedy": "greedy fallback, not proven optimal",
        "empty": "nothing to place",
    }[result.status]
    timing = f", {seconds:.2f} s" if seconds is not None else ""
    lines = []
    for snapshot in result.snapshots:
        origin = origins.get(snapshot.host)
        source = f" ({origin})" if origin else ""
        lines.append(
            f"{snapshot.host} · snapshot {format_utc(snapshot.taken_at)}{source} · "
            f"{SOLVER_NAMES.get(result.solver, result.solver)}, {how}{timing}"
        )
    return lines


# A name the seats column shows bare: the catalogue's safe characters, or a process of no seat.
_BARE = re.compile(r"[A-Za-z0-9._-]+|pid \d+")


def _word(name: str) -> str:
    """`name` as one word of the seats column: quoted (JSON string) when it holds anything else."""
    return name if _BARE.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def card_table(rows: Sequence[PlanCardRow]) -> str:
    """One host's cards: used/CUDA total, free before → after, held, plannable before → after, seats."""
    table_rows: list[list[object]] = []
    for row in rows:
        if row.error is not None:
            table_rows.append(
                [
                    row.index,
                    f"error: {escaped(row.error)}",
                    "-",
                    "-",
                    "-",
                    "-",
                    " ".join(map(_word, row.seats)),
                ]
            )
            continue
        seats = [_word(name) for name in row.seats] + [f"+{_word(name)}" for name in row.new_seats]
        table_rows.append(
            [
                row.index,
                f"{gib(row.used_bytes)} / {gib(row.cuda_total_bytes)} GiB",
                b(row.free_before_bytes),
                b(row.free_after_bytes),
                ", ".join(row.held) or "-",
                f"{b(row.plannable_before_bytes)} → {b(row.plannable_after_bytes)}",
                " ".join(seats) or "-",
            ]
        )
    return table(
        table_rows,
        _CARD_HEADERS,
        ["left", "right", "right", "right", "left", "right", "left"],
    )


def headline(verdict: Verdict, summary: Summary | None = None) -> str:
    """One phrase for a refusal, from the rules that bind (a summary counts every one)."""
    rules = set(summary.counts) if summary is not None else {r.rule for r in verdict.reasons}
    if not rules:
        return "refused"
    if rules <= {"room", "reserve", "exclusive"}:
        return "no card has room — no room without a placement decision"
    if rules <= {"gate", "room", "reserve"} and "gate" in rules:
        return "vLLM's start-up gate or room refuses it on every card"
    if rules <= {"peak", "restart", "trend"}:
        return "room now, but no placement it may use holds over the window"
    return "refused on every card it may use"


def _reason_line(reason: Reason, multi_host: bool) -> str:
    """A refusal's rule on one card: room and gate by their figures, any other rule by its text."""
    where = (
        f"{reason.host}:{reason.card}" if multi_host and reason.card is not None else reason.card
    )
    card = f"card {where}" if reason.card is not None else (reason.host or "")
    figures = reason_figures(reason) if reason.rule in ("room", "gate") else None
    return f"  {card:<8} {reason.rule:<9} {figures or reason_text(reason)}"


def _counts_line(summary: Summary) -> str:
    """How many places each rule binds on, after the tightest few shown above it."""
    counts = ", ".join(
        f"{rule} on {count} {'host' if rule == 'host' else 'card'}{'' if count == 1 else 's'}"
        for rule, count in summary.counts.items()
    )
    shown = len({(r.host, r.card) for r in summary.reasons})
    places = "cards" if "host" not in summary.counts else "cards or hosts"
    return (
        f"  … the tightest {shown} of {summary.places} {places}; in all: {counts} "
        "(--explain all lists every one)"
    )


def _verdict_lines(verdict: Verdict, multi_host: bool, explain: str = "all") -> list[str]:
    """PLACED with its cards and flags, or REFUSED with its binding rules and the nearest change.

    `explain="summary"`: a refusal on more than three places shows the tightest three and
    a count per rule; "all" shows every card with every rule.
    """
    out: list[str] = []
    summary = summarise(verdict) if explain == "summary" and not verdict.passed else None
    if verdict.passed:
        cards = ", ".join(str(c) for c in verdict.cards)
        label = "cards" if len(verdict.cards) > 1 else "card"
        flags = "   " + " ".join(verdict.flags) if verdict.flags else ""
        out.append(f"PLACED   {verdict.seat} → {verdict.host} {label} {cards}{flags}")
    elif verdict.verdict == "unknown":
        out.append(f"UNKNOWN  {verdict.seat}: cannot be judged")
        out.extend(f"  {reason_text(reason)}" for reason in verdict.reasons)
    else:
        out.append(
            f"REFUSED  {verdict.seat} ({b(verdict.need_bytes)}): {headline(verdict, summary)}"
        )
        reasons = summary.reasons if summary is not None else verdict.reasons
        out.extend(_reason_line(reason, multi_host) for reason in reasons)
        if summary is not None:
            out.append(_counts_line(summary))
        if verdict.nearest:
            nearest = _first(note_texts(verdict.nearest), summary, "more")
            out.append("  nearest: " + " · or ".join(nearest))
    warnings = _first(note_texts(verdict.warnings), summary, "more warnings")
    out.extend(f"  warning: {warning}" for warning in warnings)
    return out


def _first(texts: Sequence[str], summary: Summary | None, more: str) -> Sequence[str]:
    """All of `texts`, or under a summary its first three and how many more there are."""
    if summary is None or len(texts) <= SUMMARY_PLACES:
        return texts
    return [*texts[:SUMMARY_PLACES], f"{len(texts) - SUMMARY_PLACES} {more} (--explain all)"]


def _bound_lines(result: PlanResult) -> list[str]:
    """Per priority, placed against the most any placement could place: shown when not proven.

    A solver's proof, or a bound every level meets, says it already; a level below its bound
    on a placement no solver proved is the gap the reader needs.
    """
    if result.status == "optimal" or all(level.placed >= level.bound for level in result.bounds):
        return []
    out = [
        "",
        "BOUND (the most seats any placement could place, per priority; placement.plan.bound):",
    ]
    for level in result.bounds:
        proof = "proven the most" if level.placed >= level.bound else f"gap {level.gap:.1%}"
        out.append(
            f"  priority {level.priority}: placed {level.placed:,} of {level.seats:,}, "
            f"bound {level.bound:,} ({proof})"
        )
    return out


def render_plan(
    result: PlanResult,
    origins: Mapping[str, str] | None = None,
    seconds: float | None = None,
    explain: str = "summary",
) -> str:
    """The whole text answer of `gpuplan plan`; `explain` as `_verdict_lines` takes it."""
    origins = origins or {}
    multi_host = len(result.snapshots) > 1
    out: list[str] = []
    if result.windows:
        from placement.cli.plan_window import window_lines

        out.extend(window_lines(result))
    out.extend(_header(result, origins, seconds))
    for snapshot in result.snapshots:
        rows = [row for row in result.cards if row.host == snapshot.host]
        out.append("")
        if multi_host:
            out.append(snapshot.host)
        out.append(card_table(rows))
    out.append("")
    for verdict in result.verdicts:
        out.extend(_verdict_lines(verdict, multi_host, explain))
    out.extend(_bound_lines(result))
    if result.moves:
        out.append("")
        out.append("MOVES (in this order; every step verified):")
        for step, move in enumerate(result.moves, 1):
            out.append(
                f"  {step}. {move['action']:<5} {move['seat']} on {move['host']} card(s) {move['cards']}"
            )
    if result.moves_note:
        out.append(f"moves: {result.moves_note}")
    for warning in note_texts(result.warnings):
        out.append(f"warning: {warning}")
    return "\n".join(out).rstrip() + "\n"
