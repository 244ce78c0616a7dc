"""A week of one-minute snapshots of one 8-card host as JSON Lines (what `snapshot --json
--interval 60` prints), for the import benchmark and its test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

GIB = 2**30
MIB = 2**20
TOTAL = 150_754_820_096  # an H200's NVML total (docs/facts.md)
RESERVED = 652_214_272
START = datetime(2026, 9, 14, 3, 0, tzinfo=UTC)
WEEK_MINUTES = 7 * 24 * 60


def lines(minutes: int = WEEK_MINUTES, cards: int = 8, host: str = "bench-h1") -> Iterator[str]:
    """One JSON line per minute: each card runs a vLLM server whose bytes wander by the hour, and
    card 1 an afternoon Ollama load (14:00–15:59 UTC)."""
    for minute in range(minutes):
        at = START + timedelta(minutes=minute)
        card_list = []
        for index in range(cards):
            serve = 40 * GIB + ((minute * 7 + index * 13) % 97) * MIB
            processes = [
                {
                    "pid": 4000 + index,
                    "used_bytes": serve,
                    "cmdline": f"python3 -m vllm.entrypoints.openai.api_server --port {8000 + index}",
                    "seat": f"seat-{index}",
                }
            ]
            if index == 1 and at.hour in (14, 15):
                processes.append(
                    {"pid": 7000, "used_bytes": 20 * GIB, "cmdline": "ollama serve", "seat": None}
                )
            used = sum(p["used_bytes"] for p in processes) + 500 * MIB
            card_list.append(
                {
                    "index": index,
                    "uuid": f"GPU-bench-{index:04d}",
                    "name": "NVIDIA H200",
                    "total_bytes": TOTAL,
                    "reserved_bytes": RESERVED,
                    "used_bytes": used,
                    "free_bytes": TOTAL - RESERVED - used,
                    "processes": processes,
                }
            )
        snapshot = {
            "schema": 1,
            "host": host,
            "taken_at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "driver": "580.95.05",
            "cards": card_list,
        }
        yield json.dumps(snapshot)


def write(path: Path, minutes: int = WEEK_MINUTES, cards: int = 8) -> Path:
    """The file at `path`, one snapshot a line."""
    with open(path, "w", encoding="utf-8") as handle:
        for line in lines(minutes, cards):
            handle.write(line + "\n")
    return path
