"""Benchmarks of the Prometheus side: one exporter scrape of 8 cards, and a 128-host fleet read.

`run()` returns a Markdown section for `make bench`; figures are medians on this machine.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from inventory.fake import FakeNvml, h200_idle_card
from inventory.nvml import RawProcess
from inventory.poller import take_snapshot
from inventory.prometheus.exporter import recorded_poll, serve
from inventory.prometheus.metrics import (
    Reading,
    SnapshotCollector,
    registry_for,
    render,
    snapshot_families,
)
from inventory.prometheus.reader import (
    QUERIES,
    QueryResults,
    Sample,
    build_fleet,
    parse_response,
    query_url,
    read_fleet,
)
from inventory.snapshot import Snapshot, save_snapshot

GIB = 2**30
CARDS = 8
PROCESSES = 4
HOSTS = 128
SCRAPE_TARGET_MS = 20.0
FLEET_TARGET_S = 2.0


def _median_s(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm: imports, first connection, caches
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fake_nvml() -> FakeNvml:
    return FakeNvml(
        h200_idle_card(
            card,
            tuple(RawProcess(9000 + card * 10 + n, (n + 1) * GIB) for n in range(PROCESSES)),
        )
        for card in range(CARDS)
    )


def _host_snapshot(host: str, now: datetime) -> Snapshot:
    snapshot = take_snapshot(_fake_nvml(), now, host, read_cmdline=lambda pid: f"vllm --port {pid}")
    return snapshot


def _scrape_ms(registry_poll: Callable[[], Snapshot]) -> tuple[float, int]:
    registry = registry_for(SnapshotCollector("bench", registry_poll))
    server = serve(registry, 0, "127.0.0.1")
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    size = 0

    def scrape() -> None:
        nonlocal size
        with urllib.request.urlopen(url, timeout=10) as response:
            size = len(response.read())

    try:
        return _median_s(scrape, 200) * 1e3, size
    finally:
        server.shutdown()
        server.server_close()


def exporter_scrape() -> list[str]:
    """HTTP GET /metrics of an exporter over 8 FakeNvml H200 cards, 4 processes each."""
    now = datetime.now(UTC)
    fake = _fake_nvml()
    live_ms, size = _scrape_ms(
        lambda: take_snapshot(fake, now, "bench", read_cmdline=lambda pid: None)
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.json"
        save_snapshot(_host_snapshot("bench", now), path)
        recorded_ms, _ = _scrape_ms(recorded_poll(str(path), host=None, catalogue=None))
    verdict = "meets" if max(live_ms, recorded_ms) < SCRAPE_TARGET_MS else "MISSES"
    return [
        "| scrape of `gpuplan exporter`, 8 cards × 4 processes | median | target |",
        "|---|---|---|",
        f"| poll through the poller over FakeNvml, render, HTTP ({size:,} bytes) | {live_ms:.2f} ms | < {SCRAPE_TARGET_MS:.0f} ms |",
        f"| `--from` a snapshot file (re-read per scrape), render, HTTP | {recorded_ms:.2f} ms | < {SCRAPE_TARGET_MS:.0f} ms |",
        "",
        f"Median of 200 scrapes over loopback, one connection each; {verdict} the target. A real "
        "NVML reading adds about 40 µs per card (docs/facts.md §1), 0.3 ms for 8 cards.",
    ]


class _Fleet(Collector):
    """Every host's families merged by name, as one endpoint (one TYPE line per family)."""

    def __init__(self, snapshots: list[Snapshot]) -> None:
        self.snapshots = snapshots

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        for snapshot in self.snapshots:
            for family in snapshot_families(Reading(snapshot.host, snapshot, 0.001)):
                if family.name in merged:
                    merged[family.name].samples.extend(family.samples)
                else:
                    merged[family.name] = family
        yield from merged.values()


def _recorded_answers(snapshots: list[Snapshot], at: float) -> dict[str, bytes]:
    """The four instant-query answers as Prometheus's API would write them for this fleet."""
    samples: list[Sample] = []
    for index, snapshot in enumerate(snapshots):
        text = render(Reading(snapshot.host, snapshot, 0.001)).decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = {
                    "__name__": s.name,
                    **s.labels,
                    "instance": f"10.1.{index // 250}.{index % 250}:9835",
                    "job": "gpuplan",
                }
                value = f"{s.value:.0f}" if s.value == int(s.value) else repr(s.value)
                samples.append(Sample(labels, value, at))
    times = [
        Sample({k: v for k, v in s.labels.items() if k != "__name__"}, f"{at:.3f}", at)
        for s in samples
        if s.name == "gpuplan_poll_success"
    ]

    def vector(series: list[Sample]) -> bytes:
        result = [{"metric": dict(s.labels), "value": [s.at, s.value]} for s in series]
        return json.dumps(
            {"status": "success", "data": {"resultType": "vector", "result": result}}
        ).encode()

    return {"gpuplan": vector(samples), "times": vector(times), "empty": vector([])}


def fleet_read() -> list[str]:
    """Building 128 hosts × 8 cards from recorded query answers, and from a real Prometheus."""
    now = datetime.now(UTC).replace(microsecond=0)
    snapshots = [_host_snapshot(f"node-{i:03d}", now) for i in range(HOSTS)]
    answers = _recorded_answers(snapshots, now.timestamp())
    max_age = timedelta(minutes=15)

    def build() -> int:
        results = QueryResults(
            gpuplan=parse_response(answers["gpuplan"], "recorded", "q"),
            gpuplan_times=parse_response(answers["times"], "recorded", "q"),
        )
        fleet = build_fleet(results, now=now, max_age=max_age)
        assert len(fleet.snapshots) == HOSTS, fleet.problems[:1]
        return len(fleet.snapshots)

    build_s = _median_s(build, 5)
    series = json.loads(answers["gpuplan"])["data"]["result"]
    lines = [
        f"| reading a {HOSTS}-host fleet ({HOSTS * CARDS} cards, {len(series):,} series) | median | target |",
        "|---|---|---|",
        f"| JSON parse + build from a recorded answer ({len(answers['gpuplan']) / 2**20:.1f} MiB) | {build_s * 1e3:.0f} ms | < {FLEET_TARGET_S:.0f} s |",
    ]
    real = _real_prometheus(snapshots)
    if real is None:
        lines.append("| the same through a real Prometheus | not run: prometheus not installed | |")
    else:
        whole, answering = real
        lines.append(
            f"| `read_fleet` against a real Prometheus 2 (4 HTTP queries + build) | {whole * 1e3:.0f} ms | < {FLEET_TARGET_S:.0f} s |"
        )
        lines.append(
            f"| of which Prometheus answering the 4 queries (HTTP, bodies read) | {answering * 1e3:.0f} ms | |"
        )
    lines += [
        "",
        "The real Prometheus scrapes one loopback endpoint that serves all 128 hosts' gpuplan "
        "metrics, rendered once (2 s interval); `read_fleet` then runs its four instant queries over HTTP and "
        "builds every snapshot. Median of 5 after one warm-up.",
    ]
    return lines


def _real_prometheus(snapshots: list[Snapshot]) -> tuple[float, float] | None:
    from tests.e2e.harness import (
        Processes,
        StaticMetrics,
        prometheus_binary,
        start_prometheus,
        wait_until,
    )

    binary = prometheus_binary()
    if binary is None:
        return None
    # 128 exporters' worth of text, rendered once.
    server = StaticMetrics(generate_latest(registry_for(_Fleet(snapshots))))
    processes = Processes()
    try:
        with tempfile.TemporaryDirectory() as folder:
            url = start_prometheus(processes, binary, [server.target], Path(folder), interval="2s")
            max_age = timedelta(days=1)

            def complete() -> bool:
                fleet = read_fleet(url, now=datetime.now(UTC), max_age=max_age)
                return len(fleet.snapshots) == len(snapshots)

            wait_until(complete, 60, "Prometheus to scrape the 128-host endpoint")

            def answers() -> None:
                at = datetime.now(UTC)
                for promql in QUERIES:
                    with urllib.request.urlopen(query_url(url, promql, at), timeout=30) as reply:
                        reply.read()

            whole = _median_s(lambda: read_fleet(url, now=datetime.now(UTC), max_age=max_age), 5)
            return whole, _median_s(answers, 5)
    finally:
        processes.stop_all()
        server.close()


def run() -> str:
    """The Markdown section of the Prometheus benchmarks."""
    load = os.getloadavg()[0]
    context = f"Load average {load:.1f} on {os.cpu_count()} cores when the run began (a shared machine inflates these)."
    return "\n".join(["## Prometheus", "", context, "", *exporter_scrape(), "", *fleet_read(), ""])


if __name__ == "__main__":
    print(run())
