"""`gpuplan exporter`: Prometheus metrics of this host's cards, polled on every scrape.

Serves /metrics over HTTP until SIGTERM/SIGINT, or writes a node_exporter textfile (once or every S).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from placement.cli.sources import add_catalogue_argument, utc_now
from seats.errors import BadInputError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

HELP = "serve Prometheus metrics of the cards (or write a textfile for node_exporter)"
DESCRIPTION = (
    "Serve Prometheus metrics of this host's cards, read through NVML on every scrape, or of a "
    "recorded snapshot (--from, re-read on every scrape; its figures and time are served as "
    "recorded). --textfile DIR writes DIR/gpuplan.prom for node_exporter instead."
)
DEFAULT_PORT = 9835


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--port, --bind, --host, --catalogue, --from, --textfile, --interval."""
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port to serve on (default {DEFAULT_PORT}; 0: any free)",
    )
    parser.add_argument(
        "--bind",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to listen on (default 127.0.0.1)",
    )
    parser.add_argument(
        "--host",
        metavar="NAME",
        help="host label (default: the catalogue's only host, else this machine's name; "
        "with --from: the snapshot's host)",
    )
    add_catalogue_argument(parser)
    parser.add_argument(
        "--from",
        dest="from_file",
        metavar="SNAPSHOT",
        help="serve a recorded snapshot JSON instead of NVML",
    )
    parser.add_argument(
        "--textfile",
        metavar="DIR",
        help="write DIR/gpuplan.prom atomically for node_exporter's textfile collector, then exit",
    )
    parser.add_argument(
        "--interval",
        type=float,
        metavar="S",
        help="with --textfile: rewrite the file every S seconds until stopped",
    )


def _stop_event() -> tuple[threading.Event, Callable[[], None]]:
    """An event set by SIGTERM or SIGINT (so both end the exporter cleanly), and an undo."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return stop, restore


def _warn(exc: Exception) -> None:
    print(f"warning: poll failed: {exc}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Serve or write until told to stop; 0 on a clean stop."""
    from inventory.prometheus.exporter import live_poll, recorded_poll
    from inventory.prometheus.metrics import SnapshotCollector, registry_for
    from seats.loader import load_catalogue

    if args.interval is not None and args.textfile is None:
        raise BadInputError(
            "--interval goes with --textfile (a served exporter polls on every scrape)"
        )
    if args.interval is not None and args.interval <= 0:
        raise BadInputError(f"--interval must be positive, got {args.interval}")
    if not 0 <= args.port <= 65535:
        raise BadInputError(f"--port must be 0..65535, got {args.port}")
    catalogue = load_catalogue(args.catalogue) if args.catalogue else None

    close: Callable[[], None] = lambda: None  # noqa: E731
    if args.from_file is not None:
        poll = recorded_poll(args.from_file, host=args.host, catalogue=catalogue)
        host = poll().host  # read once now: a bad file is exit 2 at start, not a silent 0 gauge
    else:
        from inventory.nvml import PynvmlSource
        from inventory.poller import default_host

        source = PynvmlSource().open()  # exit 3 without NVML; nvmlInit once, not per scrape
        close = source.close
        host = args.host or default_host(catalogue)
        poll = live_poll(source, host=host, catalogue=catalogue, clock=utc_now)

    registry = registry_for(SnapshotCollector(host, poll, on_error=_warn))
    stop, restore = _stop_event()
    try:
        if args.textfile is not None:
            return _write_textfiles(registry, args.textfile, args.interval, stop)
        return _serve(registry, host, args.port, args.bind, stop)
    finally:
        restore()
        close()


def _write_textfiles(
    registry: CollectorRegistry, folder: str, interval: float | None, stop: threading.Event
) -> int:
    """Write DIR/gpuplan.prom once, or every `interval` seconds until stopped."""
    from inventory.prometheus.exporter import write_textfile

    while True:
        target = write_textfile(registry, folder)
        if interval is None or stop.wait(interval):
            break
    print(f"wrote {target}", file=sys.stderr)
    return 0


def _serve(
    registry: CollectorRegistry, host: str, port: int, bind: str, stop: threading.Event
) -> int:
    """Serve /metrics until stopped."""
    from inventory.prometheus.exporter import serve

    server = serve(registry, port, bind)
    print(
        f"serving {host} on http://{bind}:{server.server_port}/metrics",
        file=sys.stderr,
        flush=True,
    )
    stop.wait()
    server.shutdown()
    server.server_close()
    return 0
