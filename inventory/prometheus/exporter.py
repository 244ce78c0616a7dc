"""Serving gpuplan's metrics: an HTTP /metrics endpoint, or a textfile for node_exporter.

Both poll through a `SnapshotCollector`, so a scrape (or a write) always shows a fresh reading.
The endpoint is a bounded worker pool over the standard library: one I/O thread accepts
connections (a backlog of `BACKLOG` takes a scrape burst) and waits, with epoll, until each
has sent its whole request head; only then does one of `WORKERS` threads answer it. A client
that sends half a request holds a socket until `READ_TIMEOUT_S` after it connected, never a
thread; concurrent scrapes share one render (`Shared`).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from inventory.atomic import replace_file
from inventory.attribution import attribute
from inventory.nvml import NvmlSource
from inventory.snapshot import Snapshot, load_snapshot
from seats.errors import BadInputError
from seats.model import Catalogue

TEXTFILE_NAME = "gpuplan.prom"
# Scrapes within this long of a render's start share it (see `Shared`).
SHARE_WINDOW_S = 0.1
# Workers that answer whole requests: a scrape is a few ms of CPU under one lock (the GIL), so
# more threads only queue; 4 keep one rendering while others write out.
WORKERS = 4
# A request head must arrive whole within this long of connecting, else the connection is closed.
READ_TIMEOUT_S = 10.0
# Connections waiting to be accepted: Prometheus, several of them, and people's curls at once.
BACKLOG = 1024
# A request head larger than this is no scrape.
MAX_HEAD_BYTES = 16 * 1024
# Connections waiting for their request head at most (each a file descriptor, no thread).
MAX_WAITING = 4096


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


class Shared:
    """One render shared by the scrapes that arrive within `window` seconds of its start.

    Fifty scrapers at once each rendering a fresh poll (some 1.5 ms of CPU under the GIL) would
    keep the CPU rendering back to back; instead a scrape that arrives while a render runs, or
    within `window` of its start, is answered with that render's bytes. So every answer is a
    reading begun at most `window` before its scrape arrived (0.1 s for the exporter), and the
    exporter renders at most 1 / `window` times a second however many scrape it.
    """

    def __init__(
        self,
        render: Callable[[], bytes],
        window: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._render = render
        self._window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._started = float("-inf")
        self._flight: Future[bytes] | None = None

    def __call__(self) -> bytes:
        with self._lock:
            now = self._clock()
            flight = self._flight
            leader = flight is None or (
                flight.done() and (now - self._started >= self._window or _failed(flight))
            )
            if leader:
                flight = self._flight = Future()
                self._started = now
        assert flight is not None  # for mypy: set above whenever it was None
        if leader:
            try:
                flight.set_result(self._render())
            except BaseException as exc:  # handed to every scrape that waited on it
                flight.set_exception(exc)
        return flight.result()


def _failed(flight: Future[bytes]) -> bool:
    return flight.exception() is not None


def _response(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class Exporter:
    """A running /metrics endpoint: its port, and `shutdown` to stop it.

    The I/O thread owns the listening socket and every connection still sending its request
    head; whole heads go to the worker pool, which answers and closes (no keep-alive: a scrape
    every 15 s gains nothing from it, and a kept connection would be one more to watch).
    """

    def __init__(
        self,
        listener: socket.socket,
        render: Callable[[], bytes],
        *,
        workers: int,
        read_timeout: float,
    ) -> None:
        self._listener = listener
        self._render = Shared(render, SHARE_WINDOW_S)
        self._read_timeout = read_timeout
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="exporter")
        self._selector = selectors.DefaultSelector()
        self._selector.register(listener, selectors.EVENT_READ)
        self._accepting = True
        # socket → (deadline, head bytes so far)
        self._waiting: dict[socket.socket, tuple[float, bytes]] = {}
        self._stop = threading.Event()
        self.server_port: int = int(listener.getsockname()[1])
        self._thread = threading.Thread(target=self._loop, name="exporter-io", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        sweep_every = min(1.0, self._read_timeout / 4)
        next_sweep = time.monotonic() + sweep_every
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.2):
                if key.fileobj is self._listener:
                    self._accept()
                else:
                    self._read(key.fileobj)  # type: ignore[arg-type]
            now = time.monotonic()
            if now >= next_sweep:
                self._sweep(now)
                next_sweep = now + sweep_every
                # Out of file descriptors a while ago (EMFILE): try accepting again.
                self._listening(len(self._waiting) < MAX_WAITING)
            elif len(self._waiting) < MAX_WAITING // 2:
                self._listening(True)

    def _listening(self, on: bool) -> None:
        """Watch the listener for new connections, or stop (the kernel's backlog holds them)."""
        if on == self._accepting:
            return
        if on:
            self._selector.register(self._listener, selectors.EVENT_READ)
        else:
            self._selector.unregister(self._listener)
        self._accepting = on

    def _accept(self) -> None:
        while True:
            if len(self._waiting) >= MAX_WAITING:
                # A listener left readable would spin this loop: pause until half are gone.
                self._listening(False)
                return
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                # Out of file descriptors: pause until the next sweep rather than spin.
                self._listening(False)
                return
            conn.setblocking(False)
            self._waiting[conn] = (time.monotonic() + self._read_timeout, b"")
            self._selector.register(conn, selectors.EVENT_READ)

    def _read(self, conn: socket.socket) -> None:
        deadline, head = self._waiting[conn]
        try:
            chunk = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(conn)
            return
        head += chunk
        if b"\r\n\r\n" in head or b"\n\n" in head:
            self._selector.unregister(conn)
            del self._waiting[conn]
            self._pool.submit(self._answer, conn, head)
        elif len(head) > MAX_HEAD_BYTES:
            self._drop(conn, _response("431 Request Header Fields Too Large", b""))
        else:
            self._waiting[conn] = (deadline, head)

    def _sweep(self, now: float) -> None:
        """Close every connection whose request head did not arrive in time."""
        late = [conn for conn, (deadline, _) in self._waiting.items() if deadline <= now]
        for conn in late:
            self._drop(conn, _response("408 Request Timeout", b""))

    def _drop(self, conn: socket.socket, answer: bytes = b"") -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        self._waiting.pop(conn, None)
        with contextlib.suppress(OSError):
            if answer:
                conn.send(answer)
        with contextlib.suppress(OSError):
            conn.close()

    def _answer(self, conn: socket.socket, head: bytes) -> None:
        try:
            conn.setblocking(True)
            # Writing the answer gets the same time a request head gets to arrive.
            conn.settimeout(self._read_timeout)
            conn.sendall(self._respond(head))
        except OSError:
            pass
        except Exception as exc:  # a render that failed: say so, keep serving
            print(f"warning: scrape failed: {exc}", file=sys.stderr, flush=True)
            with contextlib.suppress(OSError):
                conn.sendall(_response("500 Internal Server Error", b"scrape failed\n"))
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def _respond(self, head: bytes) -> bytes:
        line = head.split(b"\n", 1)[0].decode("latin-1").strip().split()
        if len(line) != 3 or not line[2].startswith("HTTP/"):
            return _response("400 Bad Request", b"")
        method, target = line[0], line[1].split("?", 1)[0]
        if target not in ("/", "/metrics"):
            return _response("404 Not Found", b"gpuplan exporter: metrics are at /metrics\n")
        if method not in ("GET", "HEAD"):
            return _response("405 Method Not Allowed", b"")
        body = self._render()
        answer = _response("200 OK", body, CONTENT_TYPE_LATEST)
        return answer[: len(answer) - len(body)] if method == "HEAD" else answer

    def shutdown(self) -> None:
        """Stop answering: the I/O loop ends, waiting connections close, then the workers."""
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in list(self._waiting):
            self._drop(conn)
        self._pool.shutdown(wait=True)
        self._selector.close()

    def server_close(self) -> None:
        """Close the listening socket (after `shutdown`)."""
        self._listener.close()


def serve(
    registry: CollectorRegistry,
    port: int,
    bind: str,
    *,
    workers: int = WORKERS,
    read_timeout: float = READ_TIMEOUT_S,
    backlog: int = BACKLOG,
) -> Exporter:
    """Start serving /metrics on `bind:port` (port 0 picks a free one); see the module doc."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((bind, port))
        listener.listen(backlog)
    except OSError as exc:
        listener.close()
        raise BadInputError(f"cannot listen on {bind}:{port}: {exc.strerror or exc}") from exc
    listener.setblocking(False)
    return Exporter(
        listener, lambda: generate_latest(registry), workers=workers, read_timeout=read_timeout
    )


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
