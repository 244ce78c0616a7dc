"""`gpuplan plan`: place every planned seat and every --add seat; print cards before/after and flags.

Exit 3 if any seat is unknown (it depends on an unusable host), else 1 if any is refused, else 0;
2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from placement.cli import notice
from placement.cli.check_window import add_window_arguments, validate_window
from placement.cli.reasons_text import worded_json, worded_verdict
from placement.cli.sources import (
    add_catalogue_argument,
    add_source_arguments,
    load_add_files,
    load_catalogue_argument,
    resolve_snapshots,
    source_options,
    utc_now,
)
from seats.errors import Exit

if TYPE_CHECKING:
    from datetime import datetime

    from placement.plan.planner import PlanResult
    from seats.model import Catalogue, Seat

HELP = "place planned seats on the cards: where, with which flags, or why not"
DESCRIPTION = (
    "Place every `planned` seat of the catalogue and every seat of each --add file on the "
    "cards of the snapshot(s): an integer program proposes, the exact-bytes verifier decides. "
    "Prints the cards before and after, the engine flags for each placed seat, and for each "
    "refused one its tightest three cards with a count per rule (--explain all: every card). "
    "With a catalogue only its hosts are used; a seat that depends on an unusable host (absent, stale, incomplete …) is unknown. "
    "Exit 0 all placed, 1 any refused, 2 bad input, 3 any unknown or cannot decide."
)


def _time_limit(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"time limit must be more than 0 s, got {text}")
    return value


def _max_moves(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as a number of moves") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--max-moves must be at least 1, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--catalogue, the snapshot source, --add, --allow-moves, --max-moves, --solver, --time-limit, --json."""
    add_catalogue_argument(parser)
    add_source_arguments(parser, multiple=True)
    parser.add_argument(
        "--add",
        metavar="SEAT.yaml",
        action="append",
        default=[],
        help="a YAML file with one seat (or a list of seats) to place too; repeatable",
    )
    parser.add_argument(
        "--allow-moves",
        action="store_true",
        help="let running seats move (each a restart); prints the stop/start order",
    )
    parser.add_argument(
        "--max-moves",
        type=_max_moves,
        default=3,
        metavar="N",
        help="with --allow-moves: at most N running seats move (default 3)",
    )
    parser.add_argument(
        "--solver",
        choices=("cbc", "highs"),
        default="highs",  # placement.plan.planner.DEFAULT_SOLVER, not imported for --help
        help="default: highs (in process, held to --time-limit)",
    )
    parser.add_argument(
        "--time-limit",
        type=_time_limit,
        default=10.0,
        metavar="S",
        help="solver time limit in seconds (default 10); a time-limited answer says so",
    )
    parser.add_argument(
        "--explain",
        choices=("summary", "all"),
        default="summary",
        help="a refused seat: its tightest three cards and a count per rule (default), "
        "or every card with every rule (all)",
    )
    add_window_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON (schema 1, raw byte ints)")


def run(args: argparse.Namespace) -> int:
    """Plan, print, record to the ledger when --ledger is given; exit 0 or 1."""
    from placement.plan.planner import plan

    started = time.perf_counter()
    validate_window(args)
    window = None
    if args.window is not None:
        from placement.cli.plan_window import validate_plan_window

        validate_plan_window(args)
    catalogue = load_catalogue_argument(args)
    now = utc_now()
    cards = resolve_snapshots(source_options(args), catalogue, now)
    snapshots = cards.snapshots
    adds = load_add_files(args.add)
    notice.plan_notice(catalogue, snapshots, adds, args.time_limit)
    with ExitStack() as opened:
        if args.window is not None:
            from placement.cli.plan_window import window_plan

            # The ledger's history stays open while the planner reads windows from it.
            window = opened.enter_context(window_plan(args))
        result = plan(
            catalogue,
            snapshots,
            adds,
            solver=args.solver,
            time_limit=args.time_limit,
            allow_moves=args.allow_moves,
            max_moves=args.max_moves,
            unusable={host: u.reason for host, u in cards.unusable.items()},
            window=window,
        )
    if window is not None:
        from placement.cli.plan_window import worded

        result = worded(result, window.history)
    if args.ledger:
        _record(args.ledger, catalogue, result, adds, now)
    if args.json:
        print(
            json.dumps(
                worded_json({**result.to_json(args.explain), **cards.hosts_json()}), indent=2
            )
        )
    else:
        from placement.cli.plan_text import render_plan  # the tables: not for --json

        hosts = cards.hosts_lines()
        sys.stdout.write("".join(f"{line}\n" for line in hosts) + ("\n" if hosts else ""))
        sys.stdout.write(
            render_plan(result, cards.origins, time.perf_counter() - started, args.explain)
        )
    return {"pass": Exit.OK, "refuse": Exit.REFUSED}.get(result.verdict, Exit.CANNOT_DECIDE)


def plan_inputs(
    catalogue: Catalogue, result: PlanResult, adds: list[tuple[str, Seat]]
) -> dict[str, Any]:
    """What a plan's decisions rest on: the catalogue, the snapshots and the added seats."""
    return {
        "catalogue": catalogue.model_dump(mode="json", by_alias=True),
        "snapshots": [s.to_json_dict() for s in result.snapshots],
        "adds": [seat.model_dump(mode="json", by_alias=True) for _, seat in adds],
    }


def _record(
    path: str,
    catalogue: Catalogue,
    result: PlanResult,
    adds: list[tuple[str, Seat]],
    now: datetime,
) -> None:
    """Append every verdict to the ledger beside its host's snapshot, for the weekly report.

    A read-only ledger (a replica, a read-only mount, mode 0444) was read all the same: the plan
    stands, and a note says that it recorded nothing.
    """
    from inventory.ledger.store import ReadOnlyLedgerError, open_ledger
    from placement.decisions import Decision, inputs_digest, record_decisions

    digest = inputs_digest(plan_inputs(catalogue, result, adds))
    by_host = {snapshot.host: snapshot for snapshot in result.snapshots}
    decisions = [
        Decision(
            worded_verdict(verdict), digest, by_host.get(verdict.host) if verdict.host else None
        )
        for verdict in result.verdicts
    ]
    try:
        with open_ledger(path) as ledger:
            record_decisions(ledger, "plan", decisions, now)
    except ReadOnlyLedgerError as exc:
        print(f"note: {exc}: it was read, and this plan recorded nothing", file=sys.stderr)
