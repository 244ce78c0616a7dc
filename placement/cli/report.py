"""`gpuplan report`: the weekly capacity report from the ledger, as Markdown, HTML or JSON.

Reads the ledger only (opened read-only); writes report files under --out, or prints to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from placement.cli.sources import (
    DEFAULT_LEDGER,
    add_catalogue_argument,
    add_host_label_argument,
    load_catalogue_argument,
    parse_age,
    utc_now,
)
from seats.errors import BadInputError, CannotDecideError

if TYPE_CHECKING:
    from inventory.ledger.store import Ledger
    from inventory.snapshot import Snapshot
    from placement.report.from_prometheus import LedgerRecords
    from placement.report.rows import ChartSeries, DriftThreshold, Report, Window
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
        help="write report.<format> (and chart PNGs for md) into DIR, or to FILE.md/.html/.json,"
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
    drawer = None
    if args.format == "md" and args.out:
        # A forked child imports matplotlib for the PNG files (about a third of the charts' cost)
        # while this process aggregates, on the second core and without sharing a GIL. HTML
        # draws SVG in-process (render.html_report).
        drawer = _Drawer.start()
    try:
        if args.prometheus:
            return _prometheus_report(args, catalogue, threshold, week, until, now, drawer)
        if args.step is not None or args.host_label:
            raise BadInputError(
                f"{'--step' if args.step is not None else '--host-label'} goes with --prometheus"
            )
        return _build_and_emit(args, catalogue, threshold, week, until, now, drawer)
    finally:
        if drawer is not None:
            drawer.close()


def _build_and_emit(
    args: argparse.Namespace,
    catalogue: Catalogue,
    threshold: DriftThreshold,
    week: Window | None,
    until: int | None,
    now: datetime,
    drawer: _Drawer | None,
) -> int:
    from inventory.ledger.report_queries import ledger_span, newest_decision_s
    from inventory.ledger.store import open_ledger
    from placement.report.demo import demo_note
    from placement.report.figures import build_report, verifier_probe
    from placement.report.rows import window_since

    args.ledger = args.ledger or DEFAULT_LEDGER
    with open_ledger(args.ledger, readonly=True) as ledger:
        span = ledger_span(ledger.connection)
        if span is None:
            raise CannotDecideError(f"ledger {args.ledger} holds no snapshot yet")
        # By default the window ends at the newest snapshot: a decision recorded later (a
        # check right before the report, a plan months after the last snapshot) never moves
        # it, and is listed beside the window's decisions.
        window = week or window_since(
            args.since or timedelta(days=7), until if until is not None else span[1]
        )
        later = newest_decision_s(ledger.connection)
        records_until = later + 1 if later is not None and week is None and until is None else None
        report = build_report(
            ledger.connection,
            catalogue,
            window,
            _latest_in(ledger, window, span, str(args.ledger)),
            ledger_name=str(args.ledger),
            now=now,
            threshold=threshold,
            probe=verifier_probe,
            on_charts=drawer.send if drawer is not None else None,
            records_until_s=records_until,
        )
        demo = demo_note(ledger.connection)
    return _emit(report, args.format, args.out, demo, drawer)


def _prometheus_report(
    args: argparse.Namespace,
    catalogue: Catalogue,
    threshold: DriftThreshold,
    week: Window | None,
    until: int | None,
    now: datetime,
    drawer: _Drawer | None,
) -> int:
    """The report from Prometheus's series; --ledger adds its decisions and active holds."""
    import time

    from inventory.prometheus.range import PromClient
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
    report, answers = build_prometheus_report(
        PromClient(args.prometheus),
        catalogue,
        window,
        now=now,
        step_s=step,
        threshold=threshold,
        probe=verifier_probe,
        records=records,
        on_charts=drawer.send if drawer is not None else None,
        host_label=args.host_label,
    )
    if os.environ.get("GPUPLAN_TIMINGS"):
        stats = answers.stats
        print(
            f"timings: {stats.queries} queries, {answers.wall_s:.2f} s until every answer was in "
            f"({stats.wait_s:.2f} s of waiting summed over parallel queries), report built "
            f"{time.perf_counter() - started:.2f} s after the first query",
            file=sys.stderr,
        )
        for seconds, promql in stats.slowest:
            # The catalogue's hosts as one long regex hide the rest of the query: shorten them.
            shown = re.sub(r'=~"[^"]{40,}"', '=~"…"', promql)
            print(f"  {seconds:6.2f} s  {shown[:200]}", file=sys.stderr)
    return _emit(report, args.format, args.out, None, drawer)


def _ledger_records(path: str, window: Window, now: datetime) -> LedgerRecords:
    """The decisions in the window and the holds active now, from the ledger at `path`."""
    from inventory.ledger.report_queries import decisions_in
    from inventory.ledger.store import open_ledger
    from placement.report.from_prometheus import LedgerRecords
    from placement.report.rows import hold_rows

    with open_ledger(path, readonly=True) as ledger:
        return LedgerRecords(
            name=str(path),
            decisions=tuple(decisions_in(ledger.connection, window.start_s, window.end_s)),
            holds=hold_rows(ledger.holds(now)),
            expired_holds=hold_rows(ledger.holds_expired_unseen(window.start, window.end, now)),
        )


def _latest_in(
    ledger: Ledger, window: Window, span: tuple[int, int, int], name: str
) -> list[Snapshot]:
    """Each host's newest snapshot inside the window; exit 3 when the window holds none."""
    from inventory.ledger.report_queries import newest_per_host

    newest = newest_per_host(ledger.connection, window.start_s, window.end_s)
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


def _emit(
    report: Report, fmt: str, out: str | None, demo: str | None, drawer: _Drawer | None = None
) -> int:
    from placement.report.charts import chart_filename, detail_series, seat_colours
    from placement.report.render import blocks, html_report, to_markdown

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
    # Markdown without --out has nowhere to put PNG files: it prints without charts.
    draw = target is not None
    colours = seat_colours(name for s in report.charts for name, _ in s.layers)
    shown = detail_series(report.charts)
    pngs: list[bytes | None] = [None] * len(shown)
    if draw:
        drawn = drawer.receive(shown) if drawer is not None else None
        pngs = list(drawn) if drawn is not None else _render_all(shown, colours)
    charts = [(s, chart_filename(s), png) for s, png in zip(shown, pngs, strict=True)]
    fleet = _fleet_chart(report.charts) if draw else None
    if fmt == "md" and target is not None:
        for _, name, png in [*charts, (None, *fleet)] if fleet else charts:
            if png is not None:
                (target / name).write_bytes(png)
    items = blocks(report, charts if draw else [], demo=demo, fleet=fleet)
    return _write(to_markdown(items), target, filename)


def _fleet_chart(series: Sequence[ChartSeries]) -> tuple[str, bytes] | None:
    """The hosts' small multiples of headroom, for a report of more than one host."""
    from placement.report.charts import FLEET_FILENAME, render_fleet

    if len({s.host for s in series}) < 2:
        return None
    return FLEET_FILENAME, render_fleet(series)


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


def _render_all(series: Sequence[ChartSeries], colours: dict[str, str]) -> list[bytes | None]:
    """Every card's PNG; with four or more cards and two cores, a forked child draws half.

    Drawing is pure Python and C under the GIL, so threads would not help. A bare fork (no
    process pool) inherits matplotlib and the figure already built and costs little; the
    child hands its PNGs back through a pipe. Any failure falls back to drawing here.
    """
    from placement.report.charts import figure_for, render_chart

    if len(series) < 4 or (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"):
        return [render_chart(s, colours=colours) for s in series]
    figure_for()  # built once, before the fork: both processes reuse it
    half = (len(series) + 1) // 2
    mine, theirs = series[:half], series[half:]
    child = _fork_drawing(theirs, colours)
    pngs: list[bytes | None] = [render_chart(s, colours=colours) for s in mine]
    drawn = _collect(child, len(theirs))
    if drawn is None:
        drawn = [render_chart(s, colours=colours) for s in theirs]
    return pngs + list(drawn)


def _fork_drawing(series: Sequence[ChartSeries], colours: dict[str, str]) -> tuple[int, int] | None:
    """(pid, read end of a pipe) of a child drawing `series`; None when it cannot fork."""
    import gc
    import pickle

    from placement.report.charts import render_chart

    try:
        read, write = os.pipe()
    except OSError:
        return None
    # Frozen objects are left alone by the child's collector, so it copies far fewer pages.
    gc.freeze()
    try:
        pid = os.fork()
    except OSError:
        gc.unfreeze()
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the child: draw, send, and leave without running the parent's exit code
        status = 1
        try:
            os.close(read)
            data = pickle.dumps([render_chart(s, colours=colours) for s in series])
            with os.fdopen(write, "wb") as pipe:
                pipe.write(data)
            status = 0
        finally:
            os._exit(status)
    gc.unfreeze()
    os.close(write)
    return pid, read


def _collect(child: tuple[int, int] | None, count: int) -> list[bytes] | None:
    """The child's PNGs, or None when it failed (the caller draws them itself)."""

    if child is None:
        return None
    pid, read = child
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        return None
    return _unpickle_pngs(data, count)


def _unpickle_pngs(data: bytes, count: int) -> list[bytes] | None:
    """`count` PNGs pickled by a child of ours, or None when they did not all come back."""
    import pickle

    if not data:
        return None
    try:
        pngs = pickle.loads(data)
    except (pickle.UnpicklingError, EOFError):
        return None
    if not isinstance(pngs, list) or len(pngs) != count:
        return None
    if not all(isinstance(png, bytes) for png in pngs):
        return None
    return pngs


class _Drawer:
    """A forked child that imports matplotlib at once, then draws the charts it is sent.

    It splits them with a child of its own (`_render_all`), answers through a pipe, and leaves
    with os._exit. Any failure on either side makes `receive` return None: the caller draws.
    """

    def __init__(self, pid: int, requests: int, answers: int) -> None:
        self.pid: int | None = pid
        self.requests: int | None = requests
        self.answers: int | None = answers
        self.sent: int | None = None  # how many charts the child was sent

    @classmethod
    def start(cls) -> _Drawer | None:
        """Fork the drawer; None where fork or pipes are unavailable (draw in-process then)."""
        import gc

        if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
            return None
        try:
            request_read, request_write = os.pipe()
            answer_read, answer_write = os.pipe()
        except OSError:
            return None
        gc.freeze()  # the child's collector then leaves the inherited objects (and pages) alone
        try:
            pid = os.fork()
        except OSError:
            gc.unfreeze()
            for fd in (request_read, request_write, answer_read, answer_write):
                os.close(fd)
            return None
        if pid == 0:
            status = 1
            try:
                os.close(request_write)
                os.close(answer_read)
                status = _drawer_main(request_read, answer_write)
            finally:
                os._exit(status)
        gc.unfreeze()
        os.close(request_read)
        os.close(answer_write)
        return cls(pid, request_write, answer_read)

    def send(self, series: Sequence[ChartSeries]) -> None:
        """Hand the child the charts to draw (it starts at once); colours as `_emit` picks them."""
        import pickle

        from placement.report.charts import detail_series, seat_colours

        if self.requests is None:
            return
        colours = seat_colours(name for s in series for name, _ in s.layers)
        shown = detail_series(series)
        self.sent = len(shown)
        try:
            with os.fdopen(self.requests, "wb") as pipe:
                self.requests = None
                pipe.write(pickle.dumps((shown, colours)))
        except OSError:
            self.sent = None

    def receive(self, series: Sequence[ChartSeries]) -> list[bytes] | None:
        """Every card's PNG from the child, or None when it failed or drew other charts."""
        if self.answers is None or self.sent != len(series):
            self.close()
            return None
        try:
            with os.fdopen(self.answers, "rb") as pipe:
                self.answers = None
                data = pipe.read()
        except OSError:
            return None
        finally:
            self.close()
        return _unpickle_pngs(data, len(series))

    def close(self) -> None:
        """Release the pipes and reap the child; one whose charts are not wanted is stopped."""
        import contextlib
        import signal

        unused = self.requests is not None or self.answers is not None
        for fd in (self.requests, self.answers):
            if fd is not None:
                os.close(fd)
        self.requests = self.answers = None
        if self.pid is not None:
            if unused:  # an error ended the report: do not wait for the child's charts
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = None


def _drawer_main(requests: int, answers: int) -> int:
    """The drawer child's work: 0 when it answered, 1 when it had nothing to draw."""
    import pickle
    import threading

    from placement.report.charts import figure_for

    # A thread takes the request in as soon as it comes (the parent's write would otherwise wait
    # on a full pipe for this import); it waits in read(), without the GIL.
    received: list[bytes] = []

    def take() -> None:
        with os.fdopen(requests, "rb") as pipe:
            received.append(pipe.read())

    reader = threading.Thread(target=take, daemon=True)
    reader.start()
    figure_for(warm=True)  # while the parent still aggregates
    reader.join()
    data = received[0] if received else b""
    if not data:  # the parent failed before the charts: nothing to draw
        return 1
    series, colours = pickle.loads(data)
    pngs = _render_all(series, colours)
    with os.fdopen(answers, "wb") as pipe:
        pipe.write(pickle.dumps(pngs))
    return 0


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
