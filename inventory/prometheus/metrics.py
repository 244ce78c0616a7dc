"""Prometheus metric families built from a Snapshot: what `gpuplan exporter` serves per scrape.

The names and labels are a contract shared with `inventory.prometheus.reader`, which reads them back.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from inventory.snapshot import Card, Snapshot

CARD_LABELS = ("host", "gpu", "uuid")
PROCESS_LABELS = ("host", "gpu", "uuid", "pid", "seat")
FOREIGN = "foreign"  # seat label of a process no seat's `match` claims

# Metric names, shared with the reader (inventory.prometheus.reader).
CARD_TOTAL = "gpuplan_card_total_bytes"
CARD_RESERVED = "gpuplan_card_reserved_bytes"
CARD_USED = "gpuplan_card_used_bytes"
CARD_FREE = "gpuplan_card_free_bytes"
CARD_MEMORY_VERSION = "gpuplan_card_nvml_memory_version"
CARD_UTILIZATION = "gpuplan_card_utilization_ratio"
CARD_ERROR = "gpuplan_card_error"
CARD_INFO = "gpuplan_card_info"
PROCESS_USED = "gpuplan_process_used_bytes"
HOST_CARDS = "gpuplan_host_cards"
HOST_INFO = "gpuplan_host_info"
POLL_SUCCESS = "gpuplan_poll_success"
POLL_DURATION = "gpuplan_poll_duration_seconds"
SNAPSHOT_TIMESTAMP = "gpuplan_snapshot_timestamp_seconds"


@dataclass(frozen=True)
class Reading:
    """One poll for one scrape: the snapshot (None when the poll failed) and how long it took."""

    host: str
    snapshot: Snapshot | None
    poll_seconds: float
    error: str | None = None


def snapshot_families(reading: Reading) -> list[Metric]:
    """The metric families of one reading, in exposition order.

    A card in error exports only `gpuplan_card_error` (1) and its info; a card read through
    NVML v1 only omits `gpuplan_card_reserved_bytes` and says so with
    `gpuplan_card_nvml_memory_version` 1 (its used bytes then include the driver reserve).
    """
    host = reading.host
    success = GaugeMetricFamily(
        POLL_SUCCESS, "1 when the last NVML poll read the host, 0 when it failed", labels=["host"]
    )
    success.add_metric([host], 0.0 if reading.snapshot is None else 1.0)
    duration = GaugeMetricFamily(
        POLL_DURATION, "seconds the poll for this scrape took", labels=["host"]
    )
    duration.add_metric([host], reading.poll_seconds)
    snapshot = reading.snapshot
    if snapshot is None:
        return [success, duration]
    families = _CardFamilies.empty()
    for card in snapshot.cards:
        families.add(host, card)
    return [success, duration, *_host_families(host, snapshot), *families]


def _host_families(host: str, snapshot: Snapshot) -> list[Metric]:
    """When the figures were read, the host's driver and NVML versions, and its card count."""
    cards = GaugeMetricFamily(HOST_CARDS, "cards NVML reports on the host", labels=["host"])
    cards.add_metric([host], float(len(snapshot.cards)))
    host_info = InfoMetricFamily(
        HOST_INFO.removesuffix("_info"), "driver and NVML versions of the host", labels=["host"]
    )
    host_info.add_metric(
        [host], {"driver": snapshot.driver or "", "nvml_version": snapshot.nvml_version or ""}
    )
    taken = GaugeMetricFamily(
        SNAPSHOT_TIMESTAMP,
        "when the exported figures were read (unix seconds; a recorded snapshot keeps its own time)",
        labels=["host"],
    )
    taken.add_metric([host], float(int(snapshot.taken_at.timestamp())))
    return [taken, host_info, cards]


class _CardFamilies(NamedTuple):
    """The per-card and per-process families, in exposition order."""

    total: GaugeMetricFamily
    reserved: GaugeMetricFamily
    used: GaugeMetricFamily
    free: GaugeMetricFamily
    version: GaugeMetricFamily
    utilization: GaugeMetricFamily
    error: GaugeMetricFamily
    info: InfoMetricFamily
    process_used: GaugeMetricFamily

    @classmethod
    def empty(cls) -> _CardFamilies:
        return cls(
            total=GaugeMetricFamily(
                CARD_TOTAL, "NVML total memory of the card", labels=CARD_LABELS
            ),
            reserved=GaugeMetricFamily(
                CARD_RESERVED,
                "driver/firmware reserve (NVML v2); absent when only NVML v1 answered",
                labels=CARD_LABELS,
            ),
            used=GaugeMetricFamily(
                CARD_USED,
                "memory in use, excluding the driver reserve (NVML v2; v1 cards include it)",
                labels=CARD_LABELS,
            ),
            free=GaugeMetricFamily(CARD_FREE, "free memory as NVML reports it", labels=CARD_LABELS),
            version=GaugeMetricFamily(
                CARD_MEMORY_VERSION,
                "NVML memory-info version read: 2 (reserve known) or 1 (used includes the reserve)",
                labels=CARD_LABELS,
            ),
            utilization=GaugeMetricFamily(
                CARD_UTILIZATION,
                "GPU utilisation over NVML's last sample period, 0..1",
                labels=CARD_LABELS,
            ),
            error=GaugeMetricFamily(
                CARD_ERROR,
                "1 when the card failed to read (error label names the NVML error), else 0",
                labels=[*CARD_LABELS, "error"],
            ),
            info=InfoMetricFamily(
                CARD_INFO.removesuffix("_info"), "the card's model name", labels=CARD_LABELS
            ),
            process_used=GaugeMetricFamily(
                PROCESS_USED,
                "memory a compute process holds on the card; seat is the attributed seat or 'foreign'",
                labels=PROCESS_LABELS,
            ),
        )

    def add(self, host: str, card: Card) -> None:
        """One card's samples: error and info always, memory and processes when it read."""
        labels = [host, str(card.index), card.uuid or ""]
        self.error.add_metric([*labels, card.error or ""], 0.0 if card.ok else 1.0)
        self.info.add_metric(labels, {"name": card.name or ""})
        if not card.ok:
            return
        # Card validation guarantees these three figures on a card that is not in error.
        assert card.total_bytes is not None and card.used_bytes is not None
        assert card.free_bytes is not None
        self.total.add_metric(labels, float(card.total_bytes))
        self.used.add_metric(labels, float(card.used_bytes))
        self.free.add_metric(labels, float(card.free_bytes))
        if card.reserved_bytes is not None:
            self.reserved.add_metric(labels, float(card.reserved_bytes))
        self.version.add_metric(labels, 1.0 if card.reserved_bytes is None else 2.0)
        if card.utilization_percent is not None:
            self.utilization.add_metric(labels, card.utilization_percent / 100)
        for process in card.processes:
            # NaN, not 0, when NVML cannot say: a missing figure is never a zero.
            value = math.nan if process.used_bytes is None else float(process.used_bytes)
            self.process_used.add_metric(
                [*labels, str(process.pid), process.seat or FOREIGN], value
            )


class SnapshotCollector(Collector):
    """A collector that polls on every scrape through `poll` and times it.

    `poll` returns the snapshot or raises; a failure is exported as `gpuplan_poll_success` 0
    (and reported through `on_error`) rather than failing the scrape.
    """

    def __init__(
        self,
        host: str,
        poll: Callable[[], Snapshot],
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self._host = host
        self._poll = poll
        self._on_error = on_error

    def read(self) -> Reading:
        """Poll once, timing it."""
        started = time.perf_counter()
        try:
            snapshot = self._poll()
        except Exception as exc:  # any poll failure becomes a 0 gauge; the exporter keeps serving
            if self._on_error is not None:
                self._on_error(exc)
            return Reading(self._host, None, time.perf_counter() - started, str(exc))
        return Reading(snapshot.host, snapshot, time.perf_counter() - started)

    def collect(self) -> Iterator[Metric]:
        """Families of one fresh poll."""
        yield from snapshot_families(self.read())

    def describe(self) -> Iterator[Metric]:
        # Describing must not poll NVML at registration time.
        return iter(())


def registry_for(collector: Collector) -> CollectorRegistry:
    """A registry holding only `collector` (no process or platform metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def render(reading: Reading) -> bytes:
    """The text exposition of one reading."""

    class _Fixed(Collector):
        def collect(self) -> Iterator[Metric]:
            yield from snapshot_families(reading)

    return generate_latest(registry_for(_Fixed()))
