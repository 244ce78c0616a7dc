"""`gpuplan rules`: the Prometheus recording rules that keep gpuplan's hourly rollups.

Prints the rule file, or writes it atomically with --out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from seats.errors import BadInputError

HELP = "print Prometheus recording rules that keep the hourly rollups"
DESCRIPTION = (
    "Print a Prometheus rule file (one group, gpuplan-rollups, every minute) recording, per "
    "series of `gpuplan exporter`, the samples, the lowest and the highest value over the last "
    "hour: the hourly rollups the report and --window read. Check it with `promtool check rules`."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--out."""
    parser.add_argument(
        "--out", metavar="FILE", help="write the rule file here (atomically) instead of stdout"
    )


def run(args: argparse.Namespace) -> int:
    """Print or write the rule file; 0, or 2 for bad input."""
    from inventory.prometheus.hours import recording_rules, render_recording_rules
    from placement.cli.alerts import write_atomically

    text = render_recording_rules()
    if args.out is None:
        sys.stdout.write(text)
        return 0
    if Path(args.out).is_dir():
        raise BadInputError(f"--out {args.out}: is a directory; name the rule file to write")
    target = write_atomically(Path(args.out), text)
    print(f"wrote {len(recording_rules())} rules to {target}", file=sys.stderr)
    return 0
