"""`gpuplan ledger`: per card what NVML saw beside what the catalogue declares and holds,
and per seat declared against observed bytes."""

from __future__ import annotations

import argparse
import json
import sys

from placement.cli.check_window import add_window_arguments, validate_window
from placement.cli.sources import (
    add_catalogue_argument,
    add_source_arguments,
    load_catalogue_argument,
    resolve_snapshots,
    source_options,
    utc_now,
)
from seats.errors import Exit

HELP = "show the capacity ledger: per card total, reserve, declared, held, used, free, plannable"
DESCRIPTION = """\
Read the cards (a snapshot file, NVML now, or the latest snapshot in the ledger)
against the catalogue and show, per card:

  total        NVML total memory
  reserve      the driver's reserve (NVML v2); "v1" where only NVML v1 answered
  declared     sum of catalogue residents of the running seats pinned to the card
  held         reserves for other seats, plus running seats that are down (absent)
  used         used memory as NVML reports it (v2: the reserve excluded)
  attributed   bytes of the processes a seat's `match` regex claims
  unexplained  used - attributed: foreign processes, leaks (under v1, the reserve)
  free         NVML free memory
  plannable    max(0, free - held - margin): room a new seat may be planned into

and per seat its engine and its declared bytes against the bytes its processes hold,
with a status: present, absent (down, keeps its place), elsewhere (running on another
card), assumed (no `match`, assumed present) or planned."""
EPILOG = """\
examples:
  gpuplan ledger --catalogue seats/catalogue/fv-ml1.yaml \\
                 --snapshot seats/catalogue/fv-ml1.snapshot.json
  GPUPLAN_CATALOGUE=fleet.yaml gpuplan ledger --live --json
  gpuplan ledger --catalogue fleet.yaml --ledger gpuplan-ledger.sqlite
  gpuplan ledger --catalogue fleet.yaml --ledger gpuplan-ledger.sqlite --window 7d

With --window D, per card also: its room now (free - held - margin), its least
room over the window and when, the UTC hours it had less room than now (and who
held more at its least), and the days until the trend of its daily least room
reaches zero.

With a catalogue only its hosts are shown; any other host is ignored, and a
catalogue host that could not be read (absent, stale, incomplete, MIG or
time-sliced) is listed as unusable (also in --json: ignored_hosts, unusable_hosts).

exit codes: 0 shown; 2 bad input (no catalogue, a bad catalogue or snapshot, a
snapshot that contradicts the catalogue); 3 cannot decide (no NVML, a missing
ledger, a snapshot older than --max-age, no catalogue host usable)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--catalogue, the snapshot source (--snapshot FILE … | --live | --ledger DB), --json."""
    # The figure list above is laid out by hand; argparse would reflow it.
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    add_catalogue_argument(parser)
    add_source_arguments(parser, multiple=True)
    add_window_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON (schema 1, raw byte ints)")


def run(args: argparse.Namespace) -> int:
    """Print the ledger view; warnings to stderr; exit 0."""
    from placement.cli.ledger_text import render_ledger
    from placement.cli.notes_text import note_texts
    from placement.cli.reasons_text import worded_json
    from placement.report.ledger_view import build_ledger, ledger_json

    validate_window(args)
    catalogue = load_catalogue_argument(args)
    cards = resolve_snapshots(source_options(args), catalogue, utc_now())
    origins = [cards.origin(s.host) for s in cards.snapshots]
    view = build_ledger(catalogue, cards.snapshots, origins)
    for warning in note_texts(view.warnings):
        print(f"warning: {warning}", file=sys.stderr)
    rooms = None
    if args.window is not None:
        from placement.cli.ledger_window import host_rooms

        rooms = host_rooms(args, catalogue, cards.snapshots)
        from placement.cli.ledger_window import unknown_texts

        for text in unknown_texts(rooms):
            print(f"warning: {text}", file=sys.stderr)
    if args.json:
        data = {**ledger_json(view), **cards.hosts_json()}
        if rooms is not None:
            from placement.cli.ledger_window import with_windows

            data = with_windows(data, rooms)
        print(json.dumps(worded_json(data), indent=2))
    else:
        hosts = cards.hosts_lines()
        sys.stdout.write(
            "".join(f"{line}\n" for line in hosts) + ("\n" if hosts and view.hosts else "")
        )
        sys.stdout.write(render_ledger(view))
        if rooms is not None:
            from placement.cli.ledger_window import render_rooms

            sys.stdout.write("\n" + render_rooms(rooms))
    # Nothing to show is nothing decided: every catalogue host unusable.
    return Exit.OK if view.hosts else Exit.CANNOT_DECIDE
