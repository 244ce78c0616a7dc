"""The exporter's HTTP endpoint: bounded threads, half-sent requests dropped, bursts taken.

Before, each connection got its own thread for as long as it stayed open (1,120 idle
connections → 1,123 threads) and a listen backlog of 5 turned a burst of scrapes into SYN
retries of 1 s and more. Every server here listens on 127.0.0.1 and is stopped by the test.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from inventory.prometheus.exporter import WORKERS, Exporter, Shared, serve
from inventory.prometheus.metrics import SnapshotCollector, registry_for
from inventory.snapshot import Snapshot


def _get(port: int, path: str = "/metrics", method: str = "GET") -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@contextlib.contextmanager
def _half_sent(port: int, count: int) -> Iterator[None]:
    """`count` connections that send a request's first line and never the rest; closed after."""
    with contextlib.ExitStack() as stack:
        for _ in range(count):
            sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=5))
            sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        yield


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for `condition`, which another thread makes true; the bound only fails a stuck test."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"still not {what} after 10 s"
        time.sleep(0.005)  # polling a condition, not waiting for a guessed duration


@pytest.fixture
def exporter(fv_ml1_snapshot: Snapshot) -> Iterator[Exporter]:
    registry = registry_for(SnapshotCollector("fv-ml1", lambda: fv_ml1_snapshot))
    server = serve(registry, 0, "127.0.0.1", read_timeout=0.5)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_it_answers_metrics_and_nothing_else(exporter: Exporter) -> None:
    status, body = _get(exporter.server_port)
    assert status == 200
    assert b"gpuplan_poll_success" in body and b'host="fv-ml1"' in body
    assert _get(exporter.server_port, "/")[0] == 200
    assert _get(exporter.server_port, "/other")[0] == 404
    assert _get(exporter.server_port, "/metrics", "POST")[0] == 405
    assert _get(exporter.server_port, "/metrics", "HEAD") == (200, b"")


@pytest.mark.slow
def test_a_half_sent_request_is_dropped_after_the_read_timeout(exporter: Exporter) -> None:
    with socket.create_connection(("127.0.0.1", exporter.server_port), timeout=5) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: slow\r\n")  # the blank line never comes
        answer = b""
        # The server answers 408 and closes (recv ends with b""); a server that held it would
        # fail this with the socket's own 5 s timeout. How soon it closes is not asserted here.
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408")
    # And a whole request is still answered.
    assert _get(exporter.server_port)[0] == 200


def test_idle_connections_hold_no_threads(exporter: Exporter) -> None:
    before = threading.active_count()
    with _half_sent(exporter.server_port, 200):
        _until(lambda: len(exporter._waiting) == 200, "200 connections waiting")
        during = threading.active_count()
        assert during <= before + WORKERS, f"{during} threads with 200 idle connections"
        assert _get(exporter.server_port)[0] == 200
        assert threading.active_count() <= before + WORKERS


def test_a_burst_of_connections_is_taken_whole(exporter: Exporter) -> None:
    statuses: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(100)

    def scrape() -> None:
        start.wait()
        status, _ = _get(exporter.server_port)
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=scrape) for _ in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert statuses == [200] * 100
    # How long the burst takes (no SYN retry of 1 s) is `make bench`'s (bench/bench_exporter.py);
    # that the kernel queues all of it is the next test's.


def test_the_kernel_queues_a_whole_burst_before_any_accept(fv_ml1_snapshot: Snapshot) -> None:
    # With the I/O loop stopped nothing is accepted, so each connection of the burst is one the
    # listen backlog holds. With the stdlib's backlog of 5 the seventh SYN would be dropped and
    # its connect would wait out the timeout (SYN retries of 1 s, then 3 s …) and fail.
    registry = registry_for(SnapshotCollector("fv-ml1", lambda: fv_ml1_snapshot))
    server = serve(registry, 0, "127.0.0.1")
    server.shutdown()
    try:
        with contextlib.ExitStack() as stack:
            for _ in range(100):
                stack.enter_context(
                    socket.create_connection(("127.0.0.1", server.server_port), timeout=5)
                )
    finally:
        server.server_close()


def test_scrapes_at_once_share_one_render() -> None:
    renders = 0
    release = threading.Event()

    def render() -> bytes:
        nonlocal renders
        renders += 1
        release.wait(timeout=5)
        return b"x"

    arrived = 0
    all_arrived = threading.Event()

    def clock() -> float:  # read once per scrape, under the lock where it picks leader or follower
        nonlocal arrived
        arrived += 1
        if arrived == 20:
            all_arrived.set()
        return 0.0

    shared = Shared(render, clock=clock)
    answers: list[bytes] = []
    threads = [threading.Thread(target=lambda: answers.append(shared())) for _ in range(20)]
    for thread in threads:
        thread.start()
    # The render is held until all 20 have arrived and the last has left the lock, so every
    # scrape arrives while the one render runs, however the threads are scheduled.
    assert all_arrived.wait(timeout=10)
    with shared._lock:
        pass
    release.set()
    for thread in threads:
        thread.join(timeout=5)
    assert answers == [b"x"] * 20
    assert renders == 1
    # A scrape after the flight landed renders afresh.
    release.clear()
    release.set()
    assert shared() == b"x" and renders == 2


def test_a_failed_render_fails_every_waiting_scrape_and_not_the_next() -> None:
    calls = 0

    def render() -> bytes:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("NVML went away")
        return b"ok"

    shared = Shared(render)
    with pytest.raises(RuntimeError, match="NVML went away"):
        shared()
    assert shared() == b"ok"


def test_a_render_serves_the_scrapes_of_its_window_and_no_later() -> None:
    now = [100.0]
    renders: list[float] = []

    def render() -> bytes:
        renders.append(now[0])
        return f"reading of {now[0]:.2f}".encode()

    shared = Shared(render, 0.5, clock=lambda: now[0])
    assert shared() == b"reading of 100.00"
    now[0] = 100.25
    assert shared() == b"reading of 100.00"  # begun 0.25 s before this scrape arrived
    now[0] = 100.5
    assert shared() == b"reading of 100.50"  # 0.5 s on: a fresh reading
    assert renders == [100.0, 100.5]


@pytest.mark.slow
def test_past_the_waiting_limit_it_neither_spins_nor_loses_connections(
    exporter: Exporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inventory.prometheus import exporter as module

    monkeypatch.setattr(module, "MAX_WAITING", 5)
    with _half_sent(exporter.server_port, 10):
        _until(lambda: len(exporter._waiting) == 5, "5 connections waiting")
        selector = exporter._selector
        calls = [0]
        select = selector.select

        def counted(timeout: float | None = None) -> list[object]:
            calls[0] += 1
            return select(timeout)  # type: ignore[return-value]

        monkeypatch.setattr(selector, "select", counted)
        time.sleep(0.3)
        # Idle, the loop wakes every 0.2 s; a listener left readable woke it without pause.
        assert calls[0] <= 5, f"the I/O loop spins with the listener full ({calls[0]} wakes)"
        # The connections past the limit waited in the backlog; a scrape behind them is answered
        # once the half-sent ones time out (0.5 s here).
        assert _get(exporter.server_port)[0] == 200
