"""`gpuplan pack`: how many cards of one size hold every non-retired seat of the catalogue.

Prints the assignment, the proven lower bound and whether the answer is optimal.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from placement.cli import notice
from placement.cli.notes_text import note_texts
from placement.cli.reasons_text import worded_json
from placement.cli.sources import add_catalogue_argument, load_catalogue_argument
from seats.errors import BadInputError
from seats.units import ByteSizeError, parse_bytes

if TYPE_CHECKING:
    from placement.pack.packer import PackResult

HELP = "fewest cards of one size that hold the catalogue's seats"
DESCRIPTION = (
    "Pack every non-retired seat of the catalogue (running and planned alike) onto the fewest "
    "cards of one size: how many cards to buy. Each card offers --card-bytes (a CUDA total) "
    "less the catalogue's largest margin; reserves and gates play no part. Exclusive and "
    "unbounded seats take a card each, a seat of N cards takes N different cards. A lower "
    "bound (Martello-Toth L2) and first-fit-decreasing come first; an arc-flow integer "
    "program runs only when they differ. Exit 0 with a packing (optimal or not), 1 when a "
    "seat is larger than a card, 2 on bad input."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--catalogue, --card-bytes, --snapshot, --solver, --time-limit, --json."""
    add_catalogue_argument(parser)
    parser.add_argument(
        "--card-bytes",
        metavar="B",
        help="room seats share on one card, as a CUDA total (e.g. '94.97 GiB'); "
        "required unless --snapshot gives it",
    )
    parser.add_argument(
        "--snapshot",
        metavar="FILE",
        help="take the card size from this snapshot (the smallest CUDA total of its cards)",
    )
    parser.add_argument(
        "--solver",
        choices=("cbc", "highs"),
        default="highs",
        help="default: highs (in process, stops at its own time limit); cbc runs as a subprocess",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds for the integer program (default 60); on reaching it the best packing "
        "found is shown with optimal false",
    )
    parser.add_argument("--json", action="store_true", help="print JSON (schema 1, raw bytes)")


def card_bytes_argument(args: argparse.Namespace) -> tuple[int, str]:
    """The card size and where it came from: --card-bytes, else the snapshot's smallest card."""
    from placement.cli.render import b

    if args.card_bytes is not None and args.snapshot is not None:
        raise BadInputError(
            "pass --card-bytes or --snapshot, not both: each gives the card size "
            f"(--card-bytes {args.card_bytes}, --snapshot {args.snapshot})"
        )
    if args.card_bytes is not None:
        try:
            value = parse_bytes(args.card_bytes, "--card-bytes", allow_zero=False)
        except ByteSizeError as exc:
            raise BadInputError(str(exc)) from exc
        return value, "--card-bytes"
    if args.snapshot is not None:
        from inventory.snapshot import load_snapshot
        from placement.cli.sources import consistent, utc_now

        snapshot = consistent(load_snapshot(args.snapshot), args.snapshot, utc_now())
        totals = sorted(
            card.cuda_total_bytes
            for card in snapshot.cards
            if card.ok and card.cuda_total_bytes is not None
        )
        if not totals:
            raise BadInputError(f"{args.snapshot}: no card was read, so it gives no card size")
        if totals[0] != totals[-1]:
            print(
                f"warning: {args.snapshot} has cards of {b(totals[0])} to "
                f"{b(totals[-1])}; packing onto the smallest",
                file=sys.stderr,
            )
        return totals[0], f"{args.snapshot} ({snapshot.host})"
    raise BadInputError(
        "pack needs the card size: pass --card-bytes B (what a CUDA process calls total, "
        "e.g. '94.97 GiB') or --snapshot FILE"
    )


def run(args: argparse.Namespace) -> int:
    """Pack and print; 0 with a packing, 1 when a seat is larger than a card."""
    from placement.pack.packer import pack_seats

    if args.time_limit <= 0:
        raise BadInputError(f"--time-limit must be positive, got {args.time_limit:g}")
    catalogue = load_catalogue_argument(args)
    card_bytes, origin = card_bytes_argument(args)
    notice.pack_notice(catalogue, args.time_limit)
    result = pack_seats(catalogue, card_bytes, solver=args.solver, time_limit=args.time_limit)
    if args.json:
        # card_bytes is a CUDA total: cuda_total_bytes names it as every other JSON does.
        data = {**result.to_json(), "cuda_total_bytes": result.card_bytes, "card_source": origin}
        print(json.dumps(worded_json(data), indent=2))
    else:
        print(render(result, origin))
    for note in note_texts(result.notes):
        print(f"warning: {note}", file=sys.stderr)
    return 0


def render(result: PackResult, origin: str) -> str:
    """The text answer: a headline, the counts, one row per card."""
    from placement.cli.render import b, table

    how = result.method
    if result.solver is not None:
        how = f"{result.solver.upper()} {result.method}, {result.status}"
    lines = [
        f"pack · {result.seats} seats on cards of {b(result.card_bytes)} from {origin}"
        f" (room {b(result.room_bytes)} after a {b(result.margin_bytes)} margin)"
        f" · {how} · {result.seconds:.2f} s",
        f"cards needed: {result.cards_needed}   lower bound: {result.lower_bound}   "
        f"first-fit-decreasing: {result.greedy_cards}   "
        + ("optimal" if result.optimal else "NOT proven optimal"),
        "",
    ]
    rows = [
        [
            card.card,
            b(card.used_bytes),
            b(card.free_bytes),
            " ".join(card.seats) + (f"  ({card.whole})" if card.whole else ""),
        ]
        for card in result.cards
    ]
    lines.append(table(rows, ("card", "used", "free", "seats"), ["left", "right", "right", "left"]))
    return "\n".join(lines)
