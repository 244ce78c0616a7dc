"""`gpuplan init`: a starter catalogue of a host as it runs now, from NVML or a snapshot JSON.

The building is `placement.cli.starter`; this module reads the snapshot, measures
`cuda_context` where it can, and writes the file, never over an existing one.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from inventory.snapshot import Snapshot
    from placement.fit.engines.base import HostFiles

HELP = "write a starter catalogue of a host as it runs now"
DESCRIPTION = (
    "Write a starter catalogue of one host: its cards, its cuda_context (calibrated with "
    "PyTorch where it is installed and --live, else a stated default), and every process as a "
    "running seat with its resident bytes, an anchored match regex unique to it and the engine "
    "flags its command line sets, each line commented with where it came from. Reads NVML "
    "(--live, the default) or a snapshot JSON taken elsewhere (--from FILE). It never "
    "overwrites a file."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--live | --from FILE, --host, --out, --no-calibrate."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--live", action="store_true", help="read this host's cards through NVML (the default)"
    )
    source.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="read a snapshot JSON (gpuplan snapshot --out FILE, taken on the host)",
    )
    parser.add_argument(
        "--host",
        metavar="H",
        help="host name (default: this machine's; with --from it must be the snapshot's)",
    )
    parser.add_argument(
        "--out", metavar="FILE", help="write the catalogue to FILE (refused if FILE exists)"
    )
    parser.add_argument(
        "--no-calibrate",
        action="store_true",
        help="with --live: write the default cuda_context instead of measuring it with PyTorch",
    )


def run(args: argparse.Namespace) -> int:
    """Write the starter catalogue; exit 0, 2 bad input or FILE exists, 3 no NVML."""
    from placement.cli.snapshot import read_from
    from placement.cli.starter import starter_catalogue
    from seats.errors import BadInputError
    from seats.loader import parse_catalogue, read_yaml

    if args.out is not None and os.path.lexists(args.out):
        raise BadInputError(
            f"{args.out}: the file exists; init never overwrites one (choose another --out)"
        )
    files_of: Callable[[int], HostFiles] | None = None
    if args.from_file is not None:
        snapshot, source = read_from(args.from_file, args.host, None), args.from_file
        context, note = _default_context("the snapshot was taken elsewhere")
    else:
        snapshot = _live(args.host)
        source = f"NVML of {snapshot.host}"
        context, note = _calibrated(snapshot, args.no_calibrate)
        files_of = _process_files()
    starter = starter_catalogue(
        snapshot,
        source=source,
        cuda_context_bytes=context,
        cuda_context_note=note,
        files_of=files_of,
    )
    # What init writes, plan reads: a catalogue that would not load is a bug here, not output.
    parse_catalogue(read_yaml(starter.text, args.out or "<init>"), args.out or "<init>")
    for warning in starter.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.out is None:
        sys.stdout.write(starter.text)
        return 0
    try:
        with open(args.out, "x", encoding="utf-8") as handle:
            handle.write(starter.text)
    except FileExistsError as exc:  # created since the check above
        raise BadInputError(f"{args.out}: the file exists; init never overwrites one") from exc
    except OSError as exc:
        raise BadInputError(f"{args.out}: cannot write it: {exc.strerror}") from exc
    print(
        f"wrote {args.out}: host {snapshot.host}, {starter.seats} running seat(s)", file=sys.stderr
    )
    return 0


def _live(host: str | None) -> Snapshot:
    from inventory.poller import live_snapshot
    from placement.cli.sources import consistent, utc_now

    snapshot = live_snapshot(catalogue=None, now=utc_now(), host=host)
    return consistent(snapshot, f"NVML of {snapshot.host}", snapshot.taken_at)


def _process_files() -> Callable[[int], HostFiles] | None:
    """Each running process's own view of the files (an engine may name its model from them);
    None where the processes are a replay's ($GPUPLAN_FAKE_NVML), not this host's."""
    from inventory.poller import FAKE_ENV
    from placement.cli.starter import process_files

    return None if os.environ.get(FAKE_ENV) else process_files


def _default_context(why: str) -> tuple[int, str]:
    from placement.cli.starter import DEFAULT_CUDA_CONTEXT_BYTES

    return DEFAULT_CUDA_CONTEXT_BYTES, (
        f"default, not measured ({why}): 1,276.8 MiB measured on an idle H200 (docs/facts.md §1); "
        "measure yours with gpuplan calibrate"
    )


def _calibrated(snapshot: Snapshot, skip: bool) -> tuple[int, str]:
    """Measured with PyTorch on the first working card, else the default and why."""
    from inventory.calibrate import measure, torch_available
    from inventory.poller import FAKE_ENV
    from seats.errors import CannotDecideError

    if skip:
        return _default_context("--no-calibrate")
    if os.environ.get(FAKE_ENV):
        return _default_context(f"${FAKE_ENV} replays a snapshot")
    if not torch_available():
        return _default_context("no PyTorch in this Python")
    card = next((c.index for c in snapshot.cards if c.ok), None)
    if card is None:
        return _default_context("no card answered")
    try:
        calibration = measure(card)
    except CannotDecideError as exc:
        return _default_context(f"calibration failed: {exc}")
    context = calibration.cuda_context_bytes()
    runs = len(calibration.runs)
    return context, f"measured: {runs} fresh PyTorch process(es) on card {card}, the largest"
