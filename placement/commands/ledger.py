"""`gpuplan ledger`: per card what NVML saw beside what the catalogue declares and holds,
and per seat declared against observed bytes."""

from __future__ import annotations

import argparse
import json
import os
import sys

from placement.sources import (
    add_catalogue_argument,
    add_source_arguments,
    load_catalogue_argument,
    resolve_snapshots,
    utc_now,
)
from seats.errors import Exit

HELP = "show the capacity ledger: per card total, reserve, declared, held, used, free, plannable"
DESCRIPTION = (
    "Read the cards (a snapshot file, NVML now, or the latest snapshot in the ledger) against "
    "the catalogue. Per card: NVML total, driver reserve, declared (catalogue residents of the "
    "running seats placed there), held (reserves for other seats and running seats that are "
    "down), used as NVML sees it, attributed to seats, unexplained (used − attributed), free, "
    "and plannable (free − held − margin). Per seat: declared against observed bytes, and "
    "whether it is present, absent, assumed (no match regex) or planned."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--catalogue, the snapshot source (--snapshot FILE … | --live | --ledger DB), --json."""
    add_catalogue_argument(parser)
    add_source_arguments(parser, multiple=True)
    parser.add_argument("--json", action="store_true", help="print JSON (schema 1, raw byte ints)")


def run(args: argparse.Namespace) -> int:
    """Print the ledger view; warnings to stderr; exit 0."""
    from placement.ledger_view import build_ledger, ledger_json, render_ledger

    catalogue = load_catalogue_argument(args)
    snapshots = resolve_snapshots(args, catalogue, utc_now())
    view = build_ledger(catalogue, snapshots, _sources(args, len(snapshots)))
    for warning in view.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(ledger_json(view), indent=2))
    else:
        sys.stdout.write(render_ledger(view))
    return Exit.OK


def _sources(args: argparse.Namespace, count: int) -> list[str]:
    """Where each snapshot came from, for the header and the messages."""
    if args.live:
        return ["NVML"] * count
    if args.ledger:
        return [f"ledger {args.ledger}"] * count
    paths = args.snapshot or []
    if isinstance(paths, str):
        paths = [paths]
    if len(paths) == count and not any(os.path.isdir(p) for p in paths):
        return list(paths)
    return ["snapshot file"] * count
