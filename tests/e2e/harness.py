"""Processes for end-to-end runs: `gpuplan exporter`s and a real Prometheus on 127.0.0.1.

Each process runs in its own process group and is stopped by `Processes.stop_all`, which the
fixtures call as a finalizer, so nothing outlives a failed test. Shared with bench/.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PROMETHEUS = "prometheus"


def prometheus_binary() -> str | None:
    """Path of Debian's prometheus (installed by .ci/run), or None."""
    return shutil.which(PROMETHEUS) or (
        "/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None
    )


def prometheus_and_promtool() -> tuple[str, str]:
    """(prometheus, promtool), installed when missing and allowed; the test is skipped without."""
    import pytest

    binary, promtool = install_prometheus(), shutil.which("promtool")
    if binary is None or promtool is None:
        pytest.skip("Debian's prometheus (with promtool) is not installed; .ci/run installs it")
    return binary, promtool


def install_prometheus() -> str | None:
    """Install Debian's prometheus when missing and allowed (root with apt-get); its path or None."""
    found = prometheus_binary()
    if found or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", PROMETHEUS],
    ):
        done = subprocess.run(command, env=env, capture_output=True, timeout=300, check=False)
        if done.returncode != 0:
            return None
    return prometheus_binary()


def free_port() -> int:
    """A port free on 127.0.0.1 now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Processes:
    """Started processes, each in its own session; `stop_all` ends every one of them."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def start(self, argv: Sequence[str], **kwargs: object) -> subprocess.Popen[str]:
        process: subprocess.Popen[str] = subprocess.Popen(  # type: ignore[call-overload]
            list(argv), text=True, start_new_session=True, **kwargs
        )
        self.started.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for process in self.started:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
        self.started.clear()


def start_exporter(
    processes: Processes,
    snapshot: Path,
    *,
    catalogue: Path | None = None,
    host: str | None = None,
) -> subprocess.Popen[str]:
    """Start `gpuplan exporter --port 0 --from SNAPSHOT`; `exporter_port` waits for its port."""
    argv = [sys.executable, "-m", "placement", "exporter", "--port", "0", "--from", str(snapshot)]
    if catalogue is not None:
        argv += ["--catalogue", str(catalogue)]
    if host is not None:
        argv += ["--host", host]
    return processes.start(argv, stderr=subprocess.PIPE)


def exporter_port(process: subprocess.Popen[str]) -> int:
    """The port a started exporter listens on, from its first line on stderr."""
    assert process.stderr is not None
    line = process.stderr.readline()  # "serving HOST on http://127.0.0.1:PORT/metrics"
    if "/metrics" not in line:
        raise RuntimeError(f"exporter did not start: {line}{process.stderr.read()}")
    return int(line.rsplit(":", 1)[1].split("/", 1)[0])


def start_prometheus(
    processes: Processes,
    binary: str,
    targets: Sequence[str],
    workdir: Path,
    *,
    interval: str = "1s",
    scrape_configs: str | None = None,
) -> str:
    """Start Prometheus on a free loopback port scraping `targets` every `interval`; its URL.

    `scrape_configs`: the YAML list of jobs to use instead of one `gpuplan` job over `targets`.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    listed = ", ".join(f"'{target}'" for target in targets)
    jobs = scrape_configs or (
        f"  - job_name: gpuplan\n    static_configs: [{{targets: [{listed}]}}]\n"
    )
    config.write_text(
        f"global: {{scrape_interval: {interval}, scrape_timeout: {interval}, evaluation_interval: 1m}}\n"
        "scrape_configs:\n" + jobs
    )
    return _serve(processes, binary, workdir, [f"--storage.tsdb.path={workdir / 'data'}"], 20)


def _serve(
    processes: Processes, binary: str, workdir: Path, flags: Sequence[str], ready_s: float
) -> str:
    """Start Prometheus on `workdir`'s prometheus.yml and a free loopback port; its URL once ready."""
    port = free_port()
    log = (workdir / "prometheus.log").open("w")
    processes.start(
        [
            binary,
            f"--config.file={workdir / 'prometheus.yml'}",
            *flags,
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    url = f"http://127.0.0.1:{port}"
    wait_until(
        lambda: _ready(url), ready_s, f"Prometheus at {url} ready ({workdir / 'prometheus.log'})"
    )
    return url


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_until(predicate: object, seconds: float, what: str) -> None:
    """Poll `predicate()` every 0.1 s until true; RuntimeError naming `what` after `seconds`."""
    assert callable(predicate)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {seconds:g} s waiting for {what}")


class StaticMetrics:
    """A /metrics endpoint serving fixed text (a fake dcgm-exporter, or many hosts at once)."""

    def __init__(self, body: bytes) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass  # keep test output clean

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.target = f"127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_prometheus_on(
    processes: Processes, binary: str, data: Path, workdir: Path, *, max_samples: int | None = None
) -> str:
    """Start Prometheus over an existing TSDB (e.g. backfilled blocks), scraping nothing; its URL.

    Retention is unbounded: backfilled weeks may lie further back than the default 15 days.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1m}\nscrape_configs: []\n")
    flags = [f"--storage.tsdb.path={data}", "--storage.tsdb.retention.time=100y"]
    if max_samples is not None:
        flags.append(f"--query.max-samples={max_samples}")
    return _serve(processes, binary, workdir, flags, 60)


# --- TSDB blocks with promtool ------------------------------------------------------------------


def openmetrics_blocks(promtool: str, text: Path, data: Path) -> None:
    """The samples of an OpenMetrics file written as blocks into `data` (the file then removed)."""
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(text), str(data)],
        check=True,
        capture_output=True,
        timeout=1800,
    )
    text.unlink()


def rule_blocks(
    promtool: str, url: str, rules: Path, out: Path, start_s: int, end_s: int, timeout: int = 600
) -> Path:
    """The blocks (in `out`) of the rule file evaluated over [start_s, end_s] against the
    Prometheus at `url`, at each group's interval and offset, as a running server records them."""
    subprocess.run(
        [
            promtool, "tsdb", "create-blocks-from", "rules", "-q", f"--url={url}",
            f"--start={start_s}", f"--end={end_s}", f"--output-dir={out}", str(rules),
        ],
        check=True, capture_output=True, timeout=timeout,
    )  # fmt: skip
    return out


def merged_tsdb(target: Path, *sources: Path) -> Path:
    """A TSDB directory holding the blocks of each source (copied)."""
    target.mkdir()
    for source in sources:
        for block in source.iterdir():
            if block.is_dir() and (block / "meta.json").exists():
                shutil.copytree(block, target / block.name)
    return target
