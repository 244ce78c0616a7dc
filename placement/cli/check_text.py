"""Text rendering of a check: the headline, the figures per card, every binding rule, nearest, warnings.

The `--json` output is `CheckResult.to_json()`; this is the same content for people.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, get_args

from inventory.snapshot import format_utc
from placement.check.seat import CheckResult
from placement.cli.notes_text import note_texts
from placement.cli.reasons_text import reason_text, says_figures
from placement.cli.render import b, reason_figures, table
from placement.fit.beside import is_unbounded
from placement.fit.engines import engine_of, named, requests_util
from placement.fit.verdict import Reason, Rule

if TYPE_CHECKING:
    # Types only: `check SEAT` prints without importing the compose reader behind them.
    from placement.check.deploy import DeployResult, ServiceVerdict

_LABEL = {"pass": "PASS", "refuse": "REFUSED", "unknown": "UNKNOWN"}
# The rule column fits the longest rule's name (kv_capacity), so the figures line up.
RULE_WIDTH = max(len(rule) for rule in get_args(Rule))
_FIGURE_HEADERS = ("card", "free", "held", "margin", "need", "room", "gate free", "requested")


def _headline(result: CheckResult) -> str:
    """`PASS  seat → host:cards · vLLM 0.11.0 · util 0.98 · resident 93.00 GiB`."""
    verdict, seat = result.verdict, result.seat
    what = (
        seat.name if result.service is None else f"{seat.name} (compose service {result.service})"
    )
    cards = ",".join(map(str, verdict.cards))
    parts = [f"{_LABEL[verdict.verdict]}  {what} → {verdict.host}:{cards}"]
    engine = seat.engine
    if requests_util(engine):
        parts.append(f"{engine_of(engine).title} {engine.version or '(version unknown)'}")
        if verdict.util is not None:
            default = engine.gpu_memory_utilization is None
            parts.append(f"util {verdict.util}" + (" (the version's default)" if default else ""))
        elif (
            verdict.flags == ()
            and engine.gpu_memory_utilization is None
            and engine.kv_cache_bytes is None
        ):
            parts.append("no util")
        if engine.kv_cache_bytes is not None:
            parts.append(f"kv cache {b(engine.kv_cache_bytes)}")
    elif named(engine):
        rule = engine_of(engine)
        parts.append(
            f"{rule.title} {engine.version or '(version unknown)'} ({rule.behaviour(engine)})"
        )
    parts.append(
        f"resident {b(seat.resident_bytes)}" if result.resident_known else "resident unknown"
    )
    return " · ".join(parts)


def _grows(result: CheckResult) -> bool:
    """True when the need shown is no byte figure: an unbounded vLLM with no resident declared
    grows into what is free (issue 26: its need read "1 B", the bound it is judged with)."""
    return not result.resident_known and is_unbounded(result.seat)


def _figures(result: CheckResult) -> list[str]:
    """The numbers the seat met on each card, one row per card."""
    lower = "" if result.resident_known else " (lower bound)"
    grows = _grows(result)
    rows = [
        [
            f.card,
            b(f.free_bytes),
            b(f.held_bytes),
            b(f.margin_bytes),
            "unbounded" if grows else b(f.need_bytes) + lower,
            b(f.room_bytes),
            b(f.gate_free_bytes),
            b(f.requested_bytes),
        ]
        for f in result.verdict.figures
    ]
    if not rows:
        return []
    text = table(rows, _FIGURE_HEADERS, ["left"] * len(_FIGURE_HEADERS), style="tight")
    return ["  " + line for line in text.splitlines()]


def reason_line(reason: Reason, need_floor: bool = False) -> str:
    """`card 0  reserve   need 6.00 GiB  room 1.58 GiB  short 4.42 GiB  — 2.00 GiB held for …`;
    a reason whose words say its figures (`card 0  gate  vLLM's gate: free … short …`) alone.

    `need_floor`: the seat's resident is unknown, so a need is a lower bound, as in its figures.
    """
    where = f"card {reason.card}" if reason.card is not None else "host"
    if says_figures(reason):
        return f"  {where}  {reason.rule:<{RULE_WIDTH}} {reason_text(reason)}"
    figures = reason_figures(reason, need_floor=need_floor)
    numbers = f"{figures}  " if figures is not None else ""
    return f"  {where}  {reason.rule:<{RULE_WIDTH}} {numbers}— {reason_text(reason)}"


def render(result: CheckResult, source: str) -> str:
    """The human report of one check: headline, card figures, every binding rule, nearest, warnings."""
    verdict = result.verdict
    lines = [
        _headline(result),
        f"  {verdict.host} snapshot {format_utc(result.snapshot.taken_at)} ({source})",
        *_figures(result),
        *(reason_line(reason, not result.resident_known) for reason in verdict.reasons),
    ]
    if verdict.nearest:
        lines.append("  nearest: " + " · or ".join(note_texts(verdict.nearest)))
    lines.extend(f"  nearest: {elsewhere.text()}" for elsewhere in result.elsewhere)
    if verdict.flags:
        lines.append("  flags: " + " ".join(verdict.flags))
    lines.extend(f"  warning: {warning}" for warning in note_texts(verdict.warnings))
    return "\n".join(lines)


_DEPLOY_HEADERS = ("service", "verdict", "cards", "need", "room used", "gate spare")


def render_deploy(deploy: DeployResult, origin: Callable[[str], str]) -> str:
    """`check --compose`: each service's report, then the deploy as one table and its worst verdict."""
    blocks = [_service_block(verdict, origin) for verdict in deploy.verdicts]
    rows = [_deploy_row(verdict) for verdict in deploy.verdicts]
    lines = [
        *deploy.notes,
        f"{deploy.compose}: one deploy, every GPU service judged together "
        "(room shared on each card, each gate as if it started last)",
        *(
            "  " + line
            for line in table(rows, _DEPLOY_HEADERS, ["left"] * 6, style="tight").splitlines()
        ),
    ]
    tightest = _tightest_gate(deploy)
    if tightest is not None:
        lines.append(f"  tightest gate: {tightest}")
    tail = f"; no GPU, not checked: {', '.join(deploy.skipped)}" if deploy.skipped else ""
    # A service that could not be read may not ask for a GPU at all: it is counted apart.
    judged = {v.service for v in deploy.verdicts if v.kind != "error"}
    unread = {v.service for v in deploy.verdicts if v.kind == "error"} - judged
    count = f"{len(judged)} GPU service(s)" + (f", {len(unread)} not readable" if unread else "")
    lines.append(f"{deploy.compose}: {count}, worst verdict {deploy.kind}{tail}")
    return "\n\n".join(blocks) + "\n\n" + "\n".join(lines)


def _label(verdict: ServiceVerdict) -> str:
    return (
        verdict.service
        + (f" dp{verdict.rank}" if verdict.rank is not None else "")
        + (f" #{verdict.replica}" if verdict.replica is not None else "")
        + (f" ×{verdict.replicas}" if verdict.settled else "")
    )


def _service_block(verdict: ServiceVerdict, origin: Callable[[str], str]) -> str:
    if verdict.result is None:
        lines = [f"{verdict.kind.upper()}  compose service {verdict.service}: {verdict.message}"]
        return "\n".join([*lines, *(f"  warning: {w}" for w in note_texts(verdict.warnings))])
    return render(verdict.result, origin(verdict.result.snapshot.host))


def _deploy_row(verdict: ServiceVerdict) -> list[str]:
    result = verdict.result
    if result is None:
        where = (
            f"{verdict.cards[0]}:" + ",".join(map(str, verdict.cards[1])) if verdict.cards else "-"
        )
        return [_label(verdict), verdict.kind.upper(), where, "-", "-", "-"]
    figures = result.verdict.figures
    lower = "" if result.resident_known else " (lower bound)"
    unbounded = _grows(result)
    # An unbounded service's need is no figure: the room it would use is not one either.
    used = " ".join(
        ("unbounded" if unbounded else b(f.need_bytes + f.others_bytes))
        + f"/{b(f.room_bytes + f.others_bytes)}"
        for f in figures
    )
    spare = " ".join(
        b(f.gate_free_bytes - f.requested_bytes)
        if f.gate_free_bytes is not None and f.requested_bytes is not None
        else "-"
        for f in figures
    )
    return [
        _label(verdict),
        _LABEL[result.verdict.verdict],
        f"{result.verdict.host}:" + ",".join(map(str, result.verdict.cards)),
        "unbounded"
        if unbounded
        else b(max((f.need_bytes for f in figures), default=result.seat.resident_bytes)) + lower,
        used or "-",
        spare or "-",
    ]


def _tightest_gate(deploy: DeployResult) -> str | None:
    """The service whose vLLM gate has the least to spare (negative: it refuses)."""
    best: tuple[int, str] | None = None
    for verdict in deploy.verdicts:
        for f in verdict.result.verdict.figures if verdict.result is not None else ():
            if f.gate_free_bytes is None or f.requested_bytes is None:
                continue
            spare = f.gate_free_bytes - f.requested_bytes
            text = f"{_label(verdict)} on card {f.card}: " + (
                f"{b(spare)} to spare" if spare >= 0 else f"short {b(-spare)}"
            )
            if best is None or spare < best[0]:
                best = (spare, text)
    return best[1] if best is not None else None
