"""`gpuplan compact`: keep a ledger's raw moments for a while, and only their hourly rollups after.

Nothing is removed without `--keep-raw`: without it, it says what the ledger holds.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta

from placement.cli import sources
from seats.errors import BadInputError

HELP = "remove raw moments older than --keep-raw, keeping their hourly rollups"
DESCRIPTION = """\
Every snapshot in the ledger is also summed into hourly rollups (per card: samples, lowest free
and when, highest used; per command line on a card: samples, lowest and highest bytes and when).
`--keep-raw 35d` removes the raw snapshots taken before the hour 35 days ago, each batch in its
own transaction, and gives the space back to the file system. `--window` over the removed part is
then judged on the hourly rollups, and says so. Without --keep-raw nothing is removed."""
# Less would leave `--window`'s newest hours without their moments.
MIN_KEEP_RAW = timedelta(hours=1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ledger",
        metavar="DB",
        default=sources.DEFAULT_LEDGER,
        help=f"the ledger to compact (default {sources.DEFAULT_LEDGER})",
    )
    parser.add_argument(
        "--keep-raw",
        metavar="D",
        type=sources.parse_age,
        help="keep the raw moments of the last D (e.g. 35d, at least 1h); older ones are removed "
        "and kept as hourly rollups",
    )


def run(args: argparse.Namespace) -> int:
    """Compact (with --keep-raw) or describe the ledger; 0 done, 2 bad input, 3 ledger failure."""
    from inventory.ledger.rollups import stderr_progress
    from inventory.ledger.store import open_ledger

    keep: timedelta | None = args.keep_raw
    if keep is not None and keep < MIN_KEEP_RAW:
        raise BadInputError(f"--keep-raw {_age(keep)}: at least 1h")
    with open_ledger(args.ledger, readonly=True):
        pass  # a missing or foreign file is exit 3 here, never created by a compaction
    if keep is None:
        with open_ledger(args.ledger, readonly=True) as ledger:
            spans = ledger.raw_spans()
        for span in spans:
            kept = "" if span.since_s is None else f"; before {_t(span.since_s)} rollups only"
            print(
                f"{span.host}: {span.moments:,} raw moment(s), {_t(span.first_s)} → "
                f"{_t(span.last_s)}{kept}"
            )
        print("nothing removed: give --keep-raw D (e.g. 35d) to keep only the last D raw")
        return 0
    cutoff = sources.utc_now() - keep
    with open_ledger(args.ledger) as ledger:
        done = ledger.compact(cutoff, stderr_progress(f"compact {args.ledger}: "))
    if not done:
        print(
            f"nothing to remove: ledger {args.ledger} holds no raw moment older than {_age(keep)}"
        )
        return 0
    for host in done:
        print(
            f"{host.host}: removed {host.removed:,} raw moment(s) taken before "
            f"{_t(host.since_s)} (kept as hourly rollups); {host.kept:,} kept"
        )
    print(f"compacted ledger {args.ledger}", file=sys.stderr)
    return 0


def _t(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _age(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
