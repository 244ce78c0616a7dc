"""`gpuplan alerts`: the catalogue as a Prometheus rule file over `gpuplan exporter`'s metrics.

Prints the file, or writes it atomically with --out; what the file leaves out is said on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from inventory.atomic import replace_file
from placement.cli.sources import add_catalogue_argument, load_catalogue_argument
from placement.report.thresholds import DEFAULT_FOR, DRIFT_BYTES, DRIFT_PERCENT
from seats.errors import BadInputError
from seats.units import format_bytes

HELP = "print Prometheus alerting rules derived from the catalogue"
DESCRIPTION = (
    "Print a Prometheus rule file (one group, gpuplan) over the metrics of `gpuplan exporter`: "
    "reserves broken, cards below their margin, seats drifting or down, foreign memory, "
    "exporters down and cards in error, for the catalogue's hosts and seats only. "
    "Check it with `promtool check rules`."
)
DEFAULT_DRIFT = f"{DRIFT_PERCENT:g}%,{format_bytes(DRIFT_BYTES, precision=0).replace(' ', '')}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--catalogue, --for, --drift-threshold, --out."""
    add_catalogue_argument(parser)
    parser.add_argument(
        "--for",
        dest="for_",
        default=DEFAULT_FOR,
        metavar="DURATION",
        help=f"how long a condition holds before its alert fires (default {DEFAULT_FOR})",
    )
    parser.add_argument(
        "--drift-threshold",
        default=DEFAULT_DRIFT,
        metavar="P%,BYTES",
        help=f"a seat drifts when its bytes are off its resident by either bound "
        f"(default {DEFAULT_DRIFT.replace('%', '%%')}, as the report)",
    )
    parser.add_argument(
        "--out", metavar="FILE", help="write the rule file here (atomically) instead of stdout"
    )


def run(args: argparse.Namespace) -> int:
    """Print or write the rule file; 0, or 2 for bad input."""
    # Imported here: they pull in prometheus_client, which every other command can do without.
    from placement.report.alerts import build_alerts, parse_for, render_rules
    from placement.report.rows import parse_threshold

    for_ = parse_for(args.for_)
    threshold = parse_threshold(args.drift_threshold)
    if args.out is not None and Path(args.out).is_dir():
        raise BadInputError(f"--out {args.out}: is a directory; name the rule file to write")
    catalogue = load_catalogue_argument(args)
    alerts = build_alerts(catalogue, for_=for_, threshold=threshold)
    text = render_rules(alerts, source=Path(args.catalogue).name)
    for note in alerts.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    target = write_atomically(Path(args.out), text)
    print(f"wrote {len(alerts.rules)} rules to {target}", file=sys.stderr)
    return 0


def write_atomically(target: Path, text: str) -> Path:
    """Write `text` to a temporary file beside `target`, then rename it over `target`.

    Prometheus reloading mid-write then reads the old file or the new one, never half of one.
    """
    folder = target.parent
    if not folder.is_dir():
        raise BadInputError(f"--out {target}: no such directory {folder}")
    try:
        replace_file(target, text.encode("utf-8"))
    except OSError as exc:
        raise BadInputError(f"--out {target}: cannot write: {exc.strerror}") from exc
    return target
