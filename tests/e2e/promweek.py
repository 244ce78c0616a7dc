"""A host's snapshots as the Prometheus that scraped its `gpuplan exporter` would hold them.

Each snapshot is attributed with the catalogue and turned into the exporter's own metric families
(`inventory.prometheus.metrics.snapshot_families`), stamped with the time it was scraped, written
as OpenMetrics and backfilled with `promtool tsdb create-blocks-from openmetrics`. The same
snapshots stored in a ledger are then the same week from the other source. Shared with bench/.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from inventory.attribution import attribute
from inventory.prometheus.metrics import Reading, snapshot_families
from inventory.snapshot import Snapshot
from seats.model import Catalogue
from tests.e2e.harness import openmetrics_blocks

BLOCK_S = 2 * 3600  # promtool's block length: one input file per block reads each sample once


def _labels(labels: dict[str, str]) -> str:
    def quoted(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{k}="{quoted(v)}"' for k, v in sorted(labels.items()))


def openmetrics(
    snapshots: Iterable[Snapshot],
    catalogue: Catalogue | None,
    scraped_s: Callable[[Snapshot], float] = lambda s: s.taken_at.timestamp(),
) -> dict[int, str]:
    """OpenMetrics text of the snapshots' scrapes, one document per 2-hour block (by its start)."""
    blocks: dict[int, dict[str, list[str]]] = {}
    for snapshot in snapshots:
        attributed = attribute(snapshot, catalogue) if catalogue is not None else snapshot
        at = scraped_s(snapshot)
        families = blocks.setdefault(int(at) - int(at) % BLOCK_S, {})
        for family in snapshot_families(Reading(snapshot.host, attributed, 0.01)):
            for sample in family.samples:
                if math.isnan(sample.value):
                    continue  # a figure NVML could not give is not exported as a number
                families.setdefault(sample.name, []).append(
                    f"{sample.name}{{{_labels(sample.labels)}}} {sample.value!r} {at:.3f}"
                )
    out: dict[int, str] = {}
    for start, families in blocks.items():
        lines: list[str] = []
        for name, samples in families.items():
            lines.append(f"# TYPE {name} gauge")
            # Samples of one series in time order: they were appended scrape by scrape, and a
            # stable sort by series keeps that order.
            lines.extend(sorted(samples, key=lambda line: line.rsplit(" ", 2)[0]))
        out[start] = "\n".join([*lines, "# EOF", ""])
    return out


def backfill(
    snapshots: Iterable[Snapshot],
    catalogue: Catalogue | None,
    workdir: Path,
    promtool: str,
    *,
    scraped_s: Callable[[Snapshot], float] = lambda s: s.taken_at.timestamp(),
    parallel: int = 4,
) -> Path:
    """The snapshots' scrapes as TSDB blocks under workdir/data (its path)."""
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    texts = []
    for start, text in sorted(openmetrics(snapshots, catalogue, scraped_s).items()):
        path = workdir / f"scrapes-{start}.om"
        path.write_text(text)
        texts.append(path)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(lambda path: openmetrics_blocks(promtool, path, data), texts))
    return data
