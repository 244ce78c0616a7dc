"""Text rendering of a check: the headline, the figures per card, every binding rule, nearest, warnings.

The `--json` output is `CheckResult.to_json()`; this is the same content for people.
"""

from __future__ import annotations

from collections.abc import Sequence

from inventory.snapshot import format_utc
from placement.check.seat import CheckResult, worst_exit
from placement.cli.render import b, reason_figures, table
from placement.fit.verdict import Reason

_LABEL = {"pass": "PASS", "refuse": "REFUSED", "unknown": "UNKNOWN"}
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
    if engine.kind == "vllm":
        parts.append(f"vLLM {engine.version or '(version unknown)'}")
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
    parts.append(
        f"resident {b(seat.resident_bytes)}" if result.resident_known else "resident unknown"
    )
    return " · ".join(parts)


def _figures(result: CheckResult) -> list[str]:
    """The numbers the seat met on each card, one row per card."""
    lower = "" if result.resident_known else " (lower bound)"
    rows = [
        [
            f.card,
            b(f.free_bytes),
            b(f.held_bytes),
            b(f.margin_bytes),
            b(f.need_bytes) + lower,
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


def reason_line(reason: Reason) -> str:
    """`card 0  gate      requested 11.40 GiB  free 11.16 GiB  short 241.88 MiB  — vLLM's gate: …`."""
    where = f"card {reason.card}" if reason.card is not None else "host"
    figures = reason_figures(reason)
    numbers = f"{figures}  " if figures is not None else ""
    return f"  {where}  {reason.rule:<9} {numbers}— {reason.text}"


def render(result: CheckResult, source: str) -> str:
    """The human report of one check: headline, card figures, every binding rule, nearest, warnings."""
    verdict = result.verdict
    lines = [
        _headline(result),
        f"  {verdict.host} snapshot {format_utc(result.snapshot.taken_at)} ({source})",
        *_figures(result),
        *(reason_line(reason) for reason in verdict.reasons),
    ]
    if verdict.nearest:
        lines.append("  nearest: " + " · or ".join(verdict.nearest))
    if verdict.flags:
        lines.append("  flags: " + " ".join(verdict.flags))
    lines.extend(f"  warning: {warning}" for warning in verdict.warnings)
    return "\n".join(lines)


def render_summary(compose: str, results: Sequence[CheckResult], skipped: Sequence[str]) -> str:
    """The last line of `check --compose`: how many services, the worst verdict, what was skipped."""
    worst = {0: "pass", 1: "refuse", 3: "unknown"}[int(worst_exit(results))]
    tail = f"; not vLLM, not checked: {', '.join(skipped)}" if skipped else ""
    return f"\n{compose}: {len(results)} vLLM service(s), worst verdict {worst}{tail}"
