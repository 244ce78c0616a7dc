"""The words of `--window`: the verdict's first line, the sentences of rules `peak`, `restart`
and `trend` (from their reasons' data), and the window's warnings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from placement.cli.render import b
from placement.fit.engines.registry import engine as engine_named
from seats.names import escaped

if TYPE_CHECKING:  # the window's model is imported by --window alone
    from placement.fit.week import SeatWindow, WindowWarning

Data = Mapping[str, Any]


def _short_at(at: str | None) -> str:
    """'2026-09-14T14:00Z' from '2026-09-14T14:00:00Z'."""
    if not at:
        return "?"
    return at[:16] + "Z" if at.endswith(":00Z") else at


def _length(seconds: int) -> str:
    if seconds % 86_400 == 0:
        return f"{seconds // 86_400}d"
    if seconds % 3_600 == 0:
        return f"{seconds // 3_600}h"
    return f"{seconds}s"


def _percentile(value: Any) -> str:
    text = str(value)
    return "p" + (text.rstrip("0").rstrip(".") if "." in text else text)


def hours_text(by_hour: Sequence[int]) -> str:
    """'14:00–15:59 UTC' for the runs of hours with a non-zero count ('' when none)."""
    runs: list[tuple[int, int]] = []
    for hour, count in enumerate(by_hour):
        if not count:
            continue
        if runs and runs[-1][1] == hour - 1:
            runs[-1] = (runs[-1][0], hour)
        else:
            runs.append((hour, hour))
    if not runs:
        return ""
    return ", ".join(f"{a:02d}:00–{z:02d}:59" for a, z in runs) + " UTC"


def window_line(window: SeatWindow) -> str:
    """`window 2026-09-14T03:00Z → 2026-09-21T03:00Z (7d) · 10,080 moments · seen 100.0% · p100`."""
    data = window.to_json()
    return (
        f"window {_short_at(data['start'])} → {_short_at(data['end'])} "
        f"({_length(data['seconds'])}) · {data['moments']:,} moments · "
        f"seen {100 * window.coverage:.1f}% · {_percentile(window.rules.percentile)}"
    )


def consequence(behaviour: str | None, kind: str | None) -> str:
    """What a neighbour does when it grows into room a new seat took, in its engine's terms."""
    title = engine_named(kind).title if kind else None
    if behaviour == "request-gated":
        return f"{title}'s gate would refuse it a restart"
    if behaviour == "self-fitting":
        return f"{title} would put part of its model on the CPU"
    if behaviour == "share-of-free":
        return f"{title} would start with less cache, or not at all"
    return "it would fail to allocate"


def squeezer_text(s: Data) -> str:
    """`ollama serve (+20.00 GiB then, present 14:00–15:59 UTC on 7 of 7 days: Ollama would …)`."""
    # A process of no seat whose command line the history does not keep (Prometheus) has none.
    name = escaped(str(s["name"])) if s["name"] else "processes of no seat"
    grown = b(s["then_bytes"] - s["now_bytes"])
    return (
        f"{name} (+{grown}, {hours_text(s['by_hour'])} on {s['days']} of {s['of_days']} days: "
        f"{consequence(s['behaviour'], s['engine'])})"
    )


def _peak(r: Data) -> str:
    text = (
        f"short {b(r['short_bytes'])} at {_short_at(r['at'])} (room {b(r['room_bytes'])}) · "
        f"{r['short_moments']:,} of {r['moments']:,} moments short, {r['allowed_short']:,} allowed"
    )
    if r["squeezed_by"]:
        text += " · squeezed by " + "; ".join(squeezer_text(s) for s in r["squeezed_by"])
    else:
        text += f" · in {hours_text(r['short_by_hour'])}"
    if r.get("pass_percentile") is not None:
        text += f" · passes at {_percentile(r['pass_percentile'])}"
    return text


def _restart(r: Data) -> str:
    who = r["restarting"]
    title = engine_named(r["engine"]).title if r.get("engine") else "its engine"
    return (
        f"{escaped(str(who))} could not restart: {title}'s gate would read "
        f"{b(r['room_bytes'])} of its {b(r['need_bytes'])} request, short {b(r['short_bytes'])} "
        f"at {_short_at(r['at'])}; {r['short_moments']:,} moments, "
        f"{hours_text(r['by_hour'])} on {r['days']} of {r['of_days']} days"
    )


def _trend(r: Data) -> str:
    return (
        f"room falls {b(-int(r['slope_bytes_per_day'] or 0))} a day; with the seat the card runs "
        f"out in {r['days_to_full_with_seat']} days, within --horizon {r['horizon_days']}d "
        f"(confidence {r['confidence']})"
    )


WINDOW_WRITERS: dict[str, Callable[[Data], str]] = {
    "peak": _peak,
    "restart": _restart,
    "trend": _trend,
}


def warning_texts(window: SeatWindow, end_refused_by_gate: bool = False) -> list[str]:
    """The window's warnings, notes and `unknown` cause, each a sentence."""
    out: list[str] = []
    risks = {(r.seat, r.card): r for r in window.restart_risks}
    for w in window.warnings:
        out.extend(_warning(w, window, risks))
    for cold in window.cold:
        out.append(
            f"{cold.seat} is cold on card {cold.card}: seen {_length(cold.seen_s)} since "
            f"{_short_at(cold.since.strftime('%Y-%m-%dT%H:%M:%SZ'))}, counted at its need "
            f"{b(cold.need_bytes)} or more at every moment"
        )
    for moved in window.rebased:
        out.append(
            f"{moved.seat} changed its command line on card {moved.card} at "
            f"{_short_at(moved.changed_at.strftime('%Y-%m-%dT%H:%M:%SZ'))}: counted at its peak "
            f"since, {b(moved.peak_bytes)}, before it (rebase)"
        )
    if end_refused_by_gate and window.gate_hours:
        hours = hours_text([1 if h in window.gate_hours else 0 for h in range(24)])
        out.append(f"its gate would have passed in {hours} on at least 6 of 7 days")
    if window.unknown_why == "history":
        out.append(
            f"unknown: {_length(window.host.history_s)} of history, less than --min-history "
            f"{_length(window.rules.min_history_s)}"
        )
    elif window.unknown_why == "coverage":
        largest = "; ".join(
            f"{g.after:%Y-%m-%dT%H:%MZ} → {g.before:%Y-%m-%dT%H:%MZ}" for g in window.host.gaps[:3]
        )
        out.append(
            f"unknown: seen {100 * window.coverage:.1f}% of the window, under --min-coverage "
            f"{100 * window.rules.min_coverage:.0f}%"
            + (f"; largest gaps {largest}" if largest else "")
        )
    return out


def _warning(w: WindowWarning, window: SeatWindow, risks: Mapping[Any, Any]) -> list[str]:
    f = w.figures
    if w.kind == "restart":
        risk = risks[(f["seat"], f["card"])]
        data = {
            **risk.to_json(),
            "restarting": risk.seat,
            "need_bytes": risk.requested_bytes,
            "room_bytes": risk.requested_bytes - risk.short_bytes,
            "at": risk.to_json()["worst_at"],
        }
        return [f"restart: card {risk.card}: {_restart(data)}"]
    if w.kind == "trend":
        return [
            f"trend: card {f['card']} runs out in {f['days']} days with the seat "
            f"(confidence {f['confidence']})"
        ]
    if w.kind == "gap":
        text = f"gap: seen {100 * f['coverage']:.1f}% of the window ({f['gaps']} gaps"
        text += f", the largest {_length(f['largest_gap_seconds'])})" if f["gaps"] else ")"
        if f["unseen_hours"]:
            text += f"; never seen in {hours_text([1 if h in f['unseen_hours'] else 0 for h in range(24)])}"
        return [text]
    if w.kind == "command_lines":
        return [
            f"rebase: the history of {escaped(f['host'])} keeps no command lines (Prometheus): a "
            "seat redeployed with other flags in the window is counted as observed, not rebased"
        ]
    if w.kind == "clock":
        return [
            f"clock: {f['moments']:,} moments of {escaped(f['host'])} arrived more than 5 min from "
            f"their taken_at (largest {f['largest_skew_seconds']:,} s)"
        ]
    return []
