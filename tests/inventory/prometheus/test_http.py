"""Prometheus over HTTP: one deadline for the whole answer, broken answers, and credentials.

DESIGN.md "Never yes by accident" and "Text from outside": a query's whole answer arrives
within `--timeout` (default 10 s) or is exit 3, however slowly it trickles; a truncated or
malformed answer is exit 3 (it was a traceback with exit 1, which means "refused"); basic auth
comes from $GPUPLAN_PROMETHEUS_USER/_PASSWORD, a netrc or the URL, and a URL's userinfo and
query string never appear in any message or in --json. Every server here listens on 127.0.0.1
and stops on its own within seconds.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from inventory.prometheus import reader as p
from inventory.snapshot import Snapshot
from placement.cli.main import main
from seats.errors import CannotDecideError, Exit
from tests.conftest import FV_ML1_CATALOGUE
from tests.inventory.prometheus.test_reader import FakePrometheus, fleet_of

# A drip server gives up after this long and closes, so a reader without a whole-answer deadline
# fails the test in bounded time ("cut short", not "did not arrive whole within 1 s") instead of
# hanging it. The message is what shows the deadline cut it off; how soon after the deadline is
# not asserted here (a loaded machine may be late by any amount).
DRIP_GIVES_UP_S = 8.0


class RawServer:
    """A TCP server on 127.0.0.1 that answers every connection with `respond(conn)`."""

    def __init__(self, respond: object) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.respond = respond
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(2.0)
            try:
                conn.recv(65536)  # the request; its content does not matter here
                self.respond(conn, self.stop)  # type: ignore[operator]
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        # Shutting the listener down wakes a waiting accept now, not at its 0.2 s timeout.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(timeout=2)
        self.sock.close()


def _answer() -> bytes:
    return (
        json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
        + b" " * 4000
    )


def _drip(conn: socket.socket, stop: threading.Event) -> None:
    """A valid answer, one byte every 10 ms: 4 s per kilobyte, each read well inside any timeout."""
    body = _answer()
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
    )
    started = time.monotonic()
    for byte in body:
        if stop.is_set() or time.monotonic() - started > DRIP_GIVES_UP_S:
            return
        conn.sendall(bytes([byte]))
        stop.wait(0.01)  # the pace of the trickle; ends at once when the test closes the server


def _truncated(conn: socket.socket, stop: threading.Event) -> None:
    body = _answer()
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body[:40]
    )


def _fixed(body: bytes) -> object:
    def respond(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )

    return respond


@pytest.fixture
def drip() -> Iterator[RawServer]:
    server = RawServer(_drip)
    try:
        yield server
    finally:
        server.close()


def _read(url: str, timeout: float = 10.0) -> p.Fleet:
    now = datetime.now(UTC)
    return p.read_fleet(url, now=now, max_age=timedelta(minutes=15), timeout=timeout)


@pytest.mark.slow
def test_a_trickling_answer_stops_at_the_deadline(drip: RawServer) -> None:
    with pytest.raises(CannotDecideError, match=r"did not arrive whole within 1 s") as caught:
        _read(drip.url, timeout=1.0)
    assert caught.value.exit_code == Exit.CANNOT_DECIDE


@pytest.mark.slow
def test_check_with_timeout_exits_3_within_it(
    drip: RawServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "check",
            "vllm-voices",
            "--gpu",
            "0",
            "--catalogue",
            str(FV_ML1_CATALOGUE),
            "--prometheus",
            drip.url,
            "--timeout",
            "1",
        ]
    )
    assert code == Exit.CANNOT_DECIDE
    assert "did not arrive whole within 1 s" in capsys.readouterr().err


@pytest.mark.slow
def test_report_with_timeout_exits_3_within_it(
    drip: RawServer, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", "--catalogue", str(FV_ML1_CATALOGUE), "--prometheus", drip.url]
    code = main([*argv, "--since", "1h", "--timeout", "1"])
    assert code == Exit.CANNOT_DECIDE
    assert "did not arrive whole within 1 s" in capsys.readouterr().err


def test_reports_default_deadline_is_60_s() -> None:
    from placement.cli.main import build_parser

    args = build_parser("report").parse_args(["report", "--prometheus", "http://p:9090"])
    assert args.timeout == 60.0


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "vllm-voices", "--gpu", "0", "--prometheus", "http://p:9090"],
        ["plan", "--prometheus", "http://p:9090"],
        ["snapshot", "--prometheus", "http://p:9090"],
    ],
    ids=["check", "plan", "snapshot"],
)
def test_the_default_deadline_is_10_s_for_the_whole_answer(argv: list[str]) -> None:
    from placement.cli.main import build_parser
    from placement.cli.sources import DEFAULT_PROMETHEUS_TIMEOUT_S, SourceOptions, source_options

    assert DEFAULT_PROMETHEUS_TIMEOUT_S == 10.0
    assert SourceOptions().timeout == 10.0
    # What a command line without --timeout reaches the reader with, not only the constant.
    args = build_parser(argv[0]).parse_args(argv)
    assert args.timeout == 10.0 and source_options(args).timeout == 10.0


def test_a_truncated_answer_is_exit_3() -> None:
    server = RawServer(_truncated)
    try:
        with pytest.raises(CannotDecideError, match=r"cut short \(40 bytes read"):
            _read(server.url)
    finally:
        server.close()


@pytest.mark.parametrize(
    "body",
    [
        b'{"status": "success", "data": [1, 2]}',
        b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": 7, "value": [1, "2"]}]}}',
        b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}}',
        b'{"status": "success", "data": {"resultType": "vec',
        b"[" * 100_000,
    ],
    ids=["data-list", "labels-int", "no-value", "cut-json", "deep"],
)
def test_a_malformed_answer_is_exit_3(body: bytes) -> None:
    server = RawServer(_fixed(body))
    try:
        with pytest.raises(CannotDecideError, match=r"Prometheus at http://127\.0\.0\.1:\d+"):
            _read(server.url)
    finally:
        server.close()


# Credentials.

USER = "gpu-reader"
PASSWORD = "s3cr/et:pw"  # a test secret: it must never be printed
QUERY_SECRET = "qs-token-7731"


def _authorised(expected: tuple[str, str], fake: FakePrometheus) -> None:
    token = base64.b64encode(f"{expected[0]}:{expected[1]}".encode()).decode()
    handler = fake.server.RequestHandlerClass

    class Auth(handler):  # type: ignore[valid-type,misc]
        def do_GET(self) -> None:
            if self.headers.get("Authorization") != f"Basic {token}":
                body = b"Unauthorized\n"
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="prometheus"')
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

    fake.server.RequestHandlerClass = Auth


@pytest.fixture
def guarded(fv_ml1_snapshot: Snapshot) -> Iterator[FakePrometheus]:
    server = FakePrometheus()
    now = datetime.now(UTC).replace(microsecond=0)
    server.serve(fleet_of(fv_ml1_snapshot.model_copy(update={"taken_at": now}), at=now.timestamp()))
    _authorised((USER, PASSWORD), server)
    try:
        yield server
    finally:
        server.close()


def _check(url: str) -> list[str]:
    return [
        "check",
        "vllm-voices",
        "--gpu",
        "0",
        "--catalogue",
        str(FV_ML1_CATALOGUE),
        "--prometheus",
        url,
        "--json",
    ]


def _with_userinfo(url: str, user: str = USER, password: str = "s3cr%2Fet%3Apw") -> str:
    return url.replace("http://", f"http://{user}:{password}@") + f"/?token={QUERY_SECRET}"


def _no_secret(text: str) -> None:
    for secret in ("s3cr", "%2Fet", QUERY_SECRET, "token="):
        assert secret not in text, f"{secret!r} printed"


def test_basic_auth_from_the_environment(
    guarded: FakePrometheus,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    assert main(_check(guarded.url)) == Exit.CANNOT_DECIDE
    err = capsys.readouterr().err
    assert "HTTP 401" in err and p.USER_ENV in err
    monkeypatch.setenv(p.USER_ENV, USER)
    monkeypatch.setenv(p.PASSWORD_ENV, PASSWORD)
    # Judged (vllm-voices' process carries no command line through Prometheus, so the seat is
    # judged as a new one beside itself and refused): what matters is that it was read.
    assert main(_check(guarded.url)) == Exit.REFUSED
    out = capsys.readouterr().out
    assert json.loads(out)["verdict"] == "refuse"
    _no_secret(out)


def test_basic_auth_from_a_netrc(
    guarded: FakePrometheus,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1\n  login {USER}\n  password {PASSWORD}\n")
    netrc.chmod(0o600)
    monkeypatch.delenv(p.USER_ENV, raising=False)
    monkeypatch.setenv("NETRC", str(netrc))
    assert main(_check(guarded.url)) == Exit.REFUSED
    assert json.loads(capsys.readouterr().out)["verdict"] == "refuse"


def test_a_url_with_userinfo_works_and_never_shows_it(
    guarded: FakePrometheus,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv(p.USER_ENV, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    assert main(_check(_with_userinfo(guarded.url))) == Exit.REFUSED
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["verdict"] == "refuse" and data["snapshot"]["host"] == "fv-ml1"
    _no_secret(captured.out + captured.err)
    # The query string the URL carried went to the server, beside gpuplan's own parameters.
    assert all(seen.get("token") == [QUERY_SECRET] for seen in guarded.seen)


@pytest.mark.parametrize("where", ["refused", "unreachable", "bad-url", "error-body"])
def test_no_message_shows_the_credentials(
    guarded: FakePrometheus,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    monkeypatch.delenv(p.USER_ENV, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    url = _with_userinfo(guarded.url, password="wrong-s3cr%2Fet")
    if where == "unreachable":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        url = f"http://{USER}:s3cr%2Fet@127.0.0.1:{port}/?token={QUERY_SECRET}"
    elif where == "bad-url":
        url = f"http://{USER}:s3cr%2Fet@127.0.0.1:notaport/?token={QUERY_SECRET}"
    elif where == "error-body":
        url = _with_userinfo(guarded.url)
        guarded.default = (503, b'{"status": "error", "errorType": "x", "error": "down"}')
        guarded.answers.clear()
    code = main(_check(url))
    captured = capsys.readouterr()
    assert code in (Exit.BAD_INPUT, Exit.CANNOT_DECIDE)
    assert "prometheus" in captured.err.lower()
    _no_secret(captured.out + captured.err)
    assert json.loads(captured.out)["error"]["exit"] == code
