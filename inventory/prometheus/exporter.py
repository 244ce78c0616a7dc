"""Serving gpuplan's metrics: an HTTP /metrics endpoint, or a textfile for node_exporter.

Both poll through a `SnapshotCollector`, so a scrape (or a write) always shows a fresh reading.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from wsgiref.simple_server import WSGIServer

from prometheus_client.exposition import generate_latest, start_http_server
from prometheus_client.registry import CollectorRegistry

from inventory.atomic import replace_file
from inventory.attribution import attribute
from inventory.nvml import NvmlSource
from inventory.snapshot import Snapshot, load_snapshot
from seats.errors import BadInputError
from seats.model import Catalogue

TEXTFILE_NAME = "gpuplan.prom"


def recorded_poll(
    path: str, *, host: str | None, catalogue: Catalogue | None
) -> Callable[[], Snapshot]:
    """A poll that re-reads the snapshot file at `path` on every call.

    The recorded figures and `taken_at` are served as they are (never advanced to now), so a
    reader sees how old they are; `host` renames the snapshot's host; with a catalogue the
    processes are attributed to seats, as the live poller does at capture.
    """

    def poll() -> Snapshot:
        snapshot = load_snapshot(path)
        if host is not None and host != snapshot.host:
            snapshot = snapshot.model_copy(update={"host": host})
        if catalogue is not None:
            snapshot = attribute(snapshot, catalogue)
        return snapshot

    return poll


def live_poll(
    source: NvmlSource, *, host: str, catalogue: Catalogue | None, clock: Callable[[], datetime]
) -> Callable[[], Snapshot]:
    """A poll that reads `source` (NVML, opened once by the caller) at every call."""
    from inventory.poller import take_snapshot

    lock = threading.Lock()

    def poll() -> Snapshot:
        # The HTTP server answers scrapes on threads; one NVML reading at a time.
        with lock:
            return take_snapshot(source, clock(), host, catalogue=catalogue)

    return poll


def serve(registry: CollectorRegistry, port: int, bind: str) -> WSGIServer:
    """Start serving /metrics on `bind:port` on a daemon thread; port 0 picks a free one."""
    try:
        server, _thread = start_http_server(port, addr=bind, registry=registry)
    except OSError as exc:
        raise BadInputError(f"cannot listen on {bind}:{port}: {exc.strerror or exc}") from exc
    return server


def write_textfile(registry: CollectorRegistry, directory: str | Path) -> Path:
    """Write `directory/gpuplan.prom` atomically: a temporary file in the same directory, then rename.

    node_exporter's textfile collector reads only `*.prom`, so it never sees a half-written file.
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise BadInputError(f"--textfile {directory}: no such directory")
    target = folder / TEXTFILE_NAME
    text = generate_latest(registry)
    try:
        replace_file(target, text)
    except OSError as exc:
        raise BadInputError(f"--textfile {directory}: cannot write: {exc.strerror}") from exc
    return target
