"""`gpuplan holds`: the approvals that count as held now, and ending one by hand."""

from __future__ import annotations

import argparse
import json
from datetime import datetime

from inventory.holds import Hold, when
from placement.cli import sources
from placement.cli.names import did_you_mean
from placement.cli.render import b, table
from seats.errors import BadInputError
from seats.names import escaped

HELP = "list the holds that approved checks keep on their cards, or release one"
DESCRIPTION = """\
A `check --ledger DB` that passes holds its seat's bytes on its cards until a snapshot in that
ledger shows the seat there, the hold expires (--hold-for, default 30m), or it is released here.
Later checks and plans reading the ledger count active holds as held."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ledger",
        metavar="DB",
        default=sources.DEFAULT_LEDGER,
        help=f"the ledger the checks recorded into (default {sources.DEFAULT_LEDGER})",
    )
    parser.add_argument("--release", metavar="SEAT", help="end SEAT's active hold (exit 2 if none)")
    parser.add_argument("--json", action="store_true", help="print JSON (raw byte ints)")


def run(args: argparse.Namespace) -> int:
    from inventory.ledger.store import open_ledger

    now = sources.utc_now()
    if args.release:
        with open_ledger(args.ledger, readonly=True):
            pass  # a missing or foreign file is exit 3 here, never created by a release
        with open_ledger(args.ledger) as ledger:
            ended = ledger.release(args.release, now)
            held = [hold.seat for hold in ledger.holds(now)]
        if not ended:
            raise BadInputError(
                f"ledger {args.ledger}: seat {args.release} has no active hold"
                + did_you_mean(args.release, held)
            )
        print(f"released the hold of {args.release}")
        return 0
    with open_ledger(args.ledger, readonly=True) as ledger:
        holds = ledger.holds(now)
    if args.json:
        print(json.dumps({"schema": 1, "holds": [h.to_json() for h in holds]}, indent=2))
    else:
        print(listing(holds, now))
    return 0


def listing(holds: list[Hold], now: datetime) -> str:
    """One row per hold: seat, host, cards, need per card, by whom, from and until when.

    A time on another day than today (a `--hold-for 2d`, a hold made yesterday) has its date.
    """
    if not holds:
        return "no active holds"
    rows = [
        [
            escaped(h.seat),
            escaped(h.host),
            ",".join(str(c) for c in h.cards),
            b(h.need_bytes),
            escaped(h.user),
            when(h.created_at, now),
            when(h.expires_at, now),
        ]
        for h in holds
    ]
    headers = ["seat", "host", "cards", "need/card", "user", "since", "until"]
    return table(rows, headers, ["left", "left", "left", "right", "left", "left", "left"])
