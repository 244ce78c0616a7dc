"""`gpuplan report`: the weekly capacity report from the ledger, as Markdown, HTML or JSON.

Reads the ledger only (opened read-only); writes report files under --out, or prints to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from placement.cli.sources import (
    DEFAULT_LEDGER,
    DEFAULT_REPORT_TIMEOUT_S,
    add_catalogue_argument,
    add_host_label_argument,
    add_timeout_argument,
    load_catalogue_argument,
    parse_age,
    utc_now,
)
from seats.errors import BadInputError, CannotDecideError

if TYPE_CHECKING:
    from inventory.history.ledger import LedgerHistory
    from inventory.ledger.store import Ledger
    from inventory.snapshot import Snapshot
    from placement.report.from_prometheus import LedgerRecords
    from placement.report.rows import DriftThreshold, Report, Window
    from seats.model import Catalogue

HELP = "the weekly capacity report from the ledger (Markdown, HTML with charts, or JSON)"
DESCRIPTION = (
    "What the ledger saw in a window (default: the 7 days up to its newest snapshot): the largest "
    "seat that fits each card now, per-card and per-seat memory (nearest-rank p50/p95/max), drift "
    "against the catalogue, reserves broken, foreign processes, decisions, LoRA carriers, and charts. "
    "Exit 0; 2 bad arguments; 3 a missing, empty or foreign ledger."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--ledger, --catalogue, --since | --week, --until, --format, --out, --drift-threshold."""
    parser.add_argument(
        "--ledger",
        metavar="DB",
        default=None,
        help=f"the SQLite ledger to read (default {DEFAULT_LEDGER}); with --prometheus, the "
        "ledger whose decisions and holds the report adds",
    )
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help="build the report from this Prometheus's series of gpuplan's exporter (and DCGM's) "
        "instead of a ledger of snapshots; the catalogue's hosts only",
    )
    parser.add_argument(
        "--step",
        type=parse_age,
        default=None,
        metavar="AGE",
        help="with --prometheus: the resolution of per-seat sums, first/last times and broken "
        "reserves (default 1m); larger is lighter on Prometheus",
    )
    add_timeout_argument(parser, DEFAULT_REPORT_TIMEOUT_S)
    add_host_label_argument(parser)
    add_catalogue_argument(parser)
    window = parser.add_mutually_exclusive_group()
    window.add_argument(
        "--since",
        type=parse_age,
        default=None,
        metavar="AGE",
        help="the window: this long up to --until (default 7d)",
    )
    window.add_argument(
        "--week",
        metavar="YYYY-Www",
        help="an ISO week instead, e.g. 2026-W38 (Monday 00:00 UTC on)",
    )
    parser.add_argument(
        "--until",
        metavar="ISO",
        help="end of a --since window, e.g. 2026-09-16T14:00:00Z (default: the newest snapshot;"
        " with --prometheus, now)",
    )
    parser.add_argument(
        "--format", choices=("md", "html", "json"), default="md", help="output format (default md)"
    )
    parser.add_argument(
        "--json", action="store_const", dest="format", const="json", help="same as --format json"
    )
    parser.add_argument(
        "--out",
        metavar="DIR|FILE",
        help="write report.<format> (and chart SVGs for md) into DIR, or to FILE.md/.html/.json,"
        " instead of stdout",
    )
    parser.add_argument(
        "--drift-threshold",
        default="5%,1GiB",
        metavar="P%,BYTES",
        help="flag a seat whose drift reaches either bound (default 5%%,1GiB)",
    )


def _parse_until(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise BadInputError(
            f"--until {text!r}: write a UTC time like 2026-09-16T14:00:00Z"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


def run(args: argparse.Namespace) -> int:
    """Build the report and write or print it; exit 0."""
    from placement.report.rows import parse_threshold, parse_week

    catalogue = load_catalogue_argument(args)
    threshold = parse_threshold(args.drift_threshold)
    week: Window | None = parse_week(args.week) if args.week else None
    if week is not None and args.until:
        raise BadInputError("--until goes with --since, not with --week")
    until = _parse_until(args.until) if args.until else None
    now = utc_now()
    if args.prometheus:
        return _prometheus_report(args, catalogue, threshold, week, until, now)
    if args.step is not None or args.host_label:
        raise BadInputError(
            f"{'--step' if args.step is not None else '--host-label'} goes with --prometheus"
        )
    return _build_and_emit(args, catalogue, threshold, week, until, now)


def _build_and_emit(
    args: argparse.Namespace,
    catalogue: Catalogue,
    threshold: DriftThreshold,
    week: Window | None,
    until: int | None,
    now: datetime,
) -> int:
    from inventory.history.ledger import LedgerHistory
    from inventory.ledger.store import open_ledger
    from placement.report.demo import demo_note
    from placement.report.figures import build_report, verifier_probe
    from placement.report.rows import window_since

    args.ledger = args.ledger or DEFAULT_LEDGER
    with open_ledger(args.ledger, readonly=True) as ledger:
        history = LedgerHistory(ledger.connection)
        span = history.span()
        if span is None:
            raise CannotDecideError(f"ledger {args.ledger} holds no snapshot yet")
        # By default the window ends at the newest snapshot: a decision recorded later (a
        # check right before the report, a plan months after the last snapshot) never moves
        # it, and is listed beside the window's decisions.
        window = week or window_since(
            args.since or timedelta(days=7), until if until is not None else span[1]
        )
        later = history.newest_decision_s()
        records_until = later + 1 if later is not None and week is None and until is None else None
        report = build_report(
            history,
            catalogue,
            window,
            _latest_in(ledger, history, window, span, str(args.ledger)),
            ledger_name=str(args.ledger),
            now=now,
            threshold=threshold,
            probe=verifier_probe,
            records_until_s=records_until,
        )
        demo = demo_note(ledger.connection)
    return _emit(report, args.format, args.out, demo)


def _prometheus_report(
    args: argparse.Namespace,
    catalogue: Catalogue,
    threshold: DriftThreshold,
    week: Window | None,
    until: int | None,
    now: datetime,
) -> int:
    """The report from Prometheus's series; --ledger adds its decisions and active holds."""
    import time

    from inventory.history.prometheus import PromClient, PrometheusHistory
    from placement.report.figures import verifier_probe
    from placement.report.from_prometheus import build_prometheus_report
    from placement.report.rows import window_since

    step = int(args.step.total_seconds()) if args.step is not None else 60
    if step < 1:
        raise BadInputError("--step must be at least 1s")
    window = week or window_since(
        args.since or timedelta(days=7), until if until is not None else int(now.timestamp())
    )
    records = _ledger_records(args.ledger, window, now) if args.ledger else None
    started = time.perf_counter()
    history = PrometheusHistory(
        PromClient(args.prometheus, timeout=args.timeout), step_s=step, host_label=args.host_label
    )
    report, answers = build_prometheus_report(
        history,
        catalogue,
        window,
        now=now,
        threshold=threshold,
        probe=verifier_probe,
        records=records,
        charts=args.format != "json",  # JSON prints no chart
    )
    if os.environ.get("GPUPLAN_TIMINGS"):
        stats = answers.answers.stats
        print(
            f"timings: {stats.queries} queries, {answers.answers.wall_s:.2f} s until every answer was in "
            f"({stats.wait_s:.2f} s of waiting summed over parallel queries), report built "
            f"{time.perf_counter() - started:.2f} s after the first query",
            file=sys.stderr,
        )
        for seconds, promql in stats.slowest:
            # The catalogue's hosts as one long regex hide the rest of the query: shorten them.
            shown = re.sub(r'=~"[^"]{40,}"', '=~"…"', promql)
            print(f"  {seconds:6.2f} s  {shown[:200]}", file=sys.stderr)
    return _emit(report, args.format, args.out, None)


def _ledger_records(path: str, window: Window, now: datetime) -> LedgerRecords:
    """The decisions in the window and the holds active now, from the ledger at `path`."""
    from inventory.history.ledger import LedgerHistory
    from inventory.ledger.store import open_ledger
    from placement.report.from_prometheus import LedgerRecords
    from placement.report.rows import hold_rows

    with open_ledger(path, readonly=True) as ledger:
        return LedgerRecords(
            name=str(path),
            decisions=tuple(
                LedgerHistory(ledger.connection).decisions(window.start_s, window.end_s)
            ),
            holds=hold_rows(ledger.holds(now)),
            expired_holds=hold_rows(ledger.holds_expired_unseen(window.start, window.end, now)),
        )


def _latest_in(
    ledger: Ledger,
    history: LedgerHistory,
    window: Window,
    span: tuple[int, int, int],
    name: str,
) -> list[Snapshot]:
    """Each host's newest snapshot inside the window; exit 3 when the window holds none."""
    newest = history.newest_per_host(window.start_s, window.end_s)
    if not newest:
        first = datetime.fromtimestamp(span[0], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        last = datetime.fromtimestamp(span[1], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        raise CannotDecideError(
            f"ledger {name} holds no snapshot in {window.label} "
            f"(it holds {span[2]:,} from {first} to {last})"
        )
    latest: list[Snapshot] = []
    for host, seconds in newest:
        moment = datetime.fromtimestamp(int(seconds), UTC)
        latest += list(ledger.snapshots(host, moment, moment + timedelta(seconds=1)))
    return latest


def _emit(report: Report, fmt: str, out: str | None, demo: str | None) -> int:
    from placement.report.render import blocks, draw_charts, html_report, to_markdown

    _warn_hosts(report)

    target, filename = out_target(out, fmt)
    if fmt == "json":
        data = report.to_json()
        if demo:
            data["demo"] = demo
        text = json.dumps(data, indent=2) + "\n"
        return _write(text, target, filename)
    if fmt == "html":
        return _write(html_report(report, demo), target, filename)
    # Markdown without --out has nowhere to put the SVG files: it prints without charts.
    if target is None:
        return _write(to_markdown(blocks(report, [], demo=demo)), target, filename)
    charts, fleet = draw_charts(report)
    for name, svg in [*((n, svg) for _, n, svg in charts), *([fleet] if fleet else [])]:
        if svg is not None:
            (target / name).write_text(svg, encoding="utf-8")
    items = blocks(report, charts, demo=demo, fleet=fleet)
    return _write(to_markdown(items), target, filename)


def _warn_hosts(report: Report) -> None:
    """Hosts left out, on stderr too (the report lists them on stdout, or in --json)."""
    for host in report.ignored_hosts:
        print(
            f"warning: {host} is not in the catalogue: its series are ignored "
            "(nothing is planned, checked or reported on a host the catalogue does not describe)",
            file=sys.stderr,
        )
    for u in report.unusable_hosts:
        print(f"warning: {u.host}: {u.reason}", file=sys.stderr)


_SUFFIXES = {".md": "md", ".html": "html", ".htm": "html", ".json": "json"}


def out_target(out: str | None, fmt: str) -> tuple[Path | None, str]:
    """(directory, file name) for --out: a directory gets `report.<fmt>`, a file name is kept.

    `--out weekly.html` writes that file (its format must agree with --format); anything else
    is a directory, created when missing (charts of a Markdown report go beside the file).
    """
    default = f"report.{fmt}"
    if not out:
        return None, default
    path = Path(out)
    named = _SUFFIXES.get(path.suffix.lower())
    if named is not None:
        if named != fmt:
            raise BadInputError(
                f"--out {out}: a .{named} file name, but the format is {fmt} "
                f"(pass --format {named}, or a directory)"
            )
        directory, default = path.parent, path.name
    else:
        directory = path
    if directory.exists() and not directory.is_dir():
        raise BadInputError(f"--out {out}: {directory} is a file, not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInputError(f"--out {out}: cannot create the directory ({exc.strerror})") from exc
    return directory, default


def _write(text: str, target: Path | None, name: str) -> int:
    if target is None:
        sys.stdout.write(text)
        return 0
    path = target / name
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)
    print(f"wrote {path}")
    return 0
