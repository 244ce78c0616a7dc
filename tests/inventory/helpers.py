"""Builders of snapshots for the inventory tests: many cards, one-second steps, stable figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from inventory.snapshot import Card, Process, Snapshot

GIB = 2**30
MIB = 2**20
T0 = datetime(2026, 9, 16, 14, 0, 0, tzinfo=UTC)


def make_snapshot(
    host: str = "fv-ml1", minute: int = 0, cards: int = 8, processes: int = 2
) -> Snapshot:
    """A full snapshot `minute` minutes after T0: each card with `processes` attributed processes."""
    total = 97_871 * MIB
    reserved = 622 * MIB
    built = []
    for index in range(cards):
        procs = tuple(
            Process(
                pid=1000 + index * 10 + n,
                used_bytes=(n + 1) * GIB + minute,
                cmdline=f"python3 -m vllm.entrypoints.openai.api_server --port {8000 + index * 10 + n}",
                seat=f"seat-{index}-{n}",
            )
            for n in range(processes)
        )
        used = sum(p.used_bytes or 0 for p in procs)
        built.append(
            Card(
                index=index,
                uuid=f"GPU-{host}-{index}",
                name="NVIDIA H200",
                total_bytes=total,
                reserved_bytes=reserved,
                used_bytes=used,
                free_bytes=total - reserved - used,
                utilization_percent=minute % 101,
                processes=procs,
            )
        )
    return Snapshot(
        host=host,
        taken_at=T0 + timedelta(minutes=minute),
        driver="580.159.04",
        nvml_version="13.580.159.04",
        cards=tuple(built),
    )
