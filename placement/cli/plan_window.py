"""`plan --window D`: the ledger's history opened for the planner (placement.plan.window), which
reads each planned host's window from it, and the window's words beside the plan's verdicts.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from placement.cli.check_window import options_of
from seats.errors import BadInputError

if TYPE_CHECKING:
    from placement.plan.planner import PlanResult
    from placement.plan.window import WindowPlan


def validate_plan_window(args: argparse.Namespace) -> None:
    """What `plan --window` cannot take on top of check's window rules."""
    if args.window is not None and args.allow_moves:
        raise BadInputError(
            "--allow-moves with --window: moves are judged at one snapshot only; "
            "plan the window without --allow-moves"
        )


@contextmanager
def window_plan(args: argparse.Namespace) -> Iterator[WindowPlan]:
    """The window's settings and the ledger's history (rollups first), open while planning."""
    from placement.cli.window_history import window_history
    from placement.plan.window import WindowPlan

    with window_history(args) as history:
        yield WindowPlan(options_of(args), history)


def worded(result: PlanResult, history: object = None) -> PlanResult:
    """The result with each judged seat's window warnings in its verdict's, in words; what the
    history cannot know (`history_source.with_unknowns`) said as `check` says it."""
    from placement.cli.history_source import with_unknowns
    from placement.cli.window_text import warning_texts

    windows = {seat: with_unknowns(history, w) for seat, w in result.windows.items()}
    result = replace(result, windows=windows)
    verdicts = []
    for verdict in result.verdicts:
        window = result.windows.get(verdict.seat)
        if window is not None:
            gate = any(r.rule == "gate" for r in verdict.reasons)
            words = warning_texts(window, end_refused_by_gate=gate)
            verdict = replace(verdict, warnings=tuple(dict.fromkeys([*verdict.warnings, *words])))
        verdicts.append(verdict)
    return replace(result, verdicts=tuple(verdicts))


def window_lines(result: PlanResult) -> list[str]:
    """The window's first line, once per host that had a seat judged over it."""
    from placement.cli.window_text import window_line

    shown: dict[str, str] = {}
    for window in result.windows.values():
        shown.setdefault(window.host.host, window_line(window))
    multi = len(shown) > 1
    return [f"{host}: {line}" if multi else line for host, line in shown.items()]
