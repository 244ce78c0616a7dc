"""Writes fv-ml1-week.jsonl beside it: a week of fv-ml1 at 30-minute steps, as JSON Lines (what
`gpuplan snapshot --json --interval 1800` prints), for the README's `check --window` examples.

Card 0 holds the seed's cyberprev (47,100 MiB) and gen-small (36,900 MiB) as they really are
(docs/facts.md §3); card 1 an Ollama that loads a 20 GiB model every afternoon, 14:00–15:59
UTC, and drops it after. Synthetic: run `python examples/week/make_week.py` to write it again.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

MIB, GIB = 2**20, 2**30
TOTAL, RESERVED = 97_871 * MIB, 622 * MIB  # fv-ml1's cards (docs/facts.md §3)
START = datetime(2026, 9, 14, 0, 0, tzinfo=UTC)
STEP = timedelta(minutes=30)
VLLM = "python3 -m vllm.entrypoints.openai.api_server --model {} --port {}"


def card(index: int, processes: list[tuple[int, int, str]]) -> dict[str, object]:
    used = sum(b for _, b, _ in processes)
    return {
        "index": index,
        "uuid": f"GPU-fv-ml1-{index}",
        "name": "NVIDIA H100 NVL",
        "total_bytes": TOTAL,
        "reserved_bytes": RESERVED,
        "used_bytes": used,
        "free_bytes": TOTAL - RESERVED - used,
        "processes": [
            {"pid": p, "used_bytes": b, "cmdline": c, "seat": None} for p, b, c in processes
        ],
    }


def lines() -> list[str]:
    out = []
    at = START
    while at < START + timedelta(days=7):
        card0 = [
            (4101, 47_100 * MIB, VLLM.format("cyberprev", 8021)),
            (4117, 36_900 * MIB, VLLM.format("gen-small", 8023)),
        ]
        card1 = [(5301, 20 * GIB, "/usr/bin/ollama serve")] if at.hour in (14, 15) else []
        snapshot = {
            "schema": 1,
            "host": "fv-ml1",
            "taken_at": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "driver": "580.159.04",
            "cards": [card(0, card0), card(1, card1)],
        }
        out.append(json.dumps(snapshot))
        at += STEP
    return out


if __name__ == "__main__":
    target = Path(__file__).with_name("fv-ml1-week.jsonl")
    target.write_text("\n".join(lines()) + "\n", encoding="utf-8")
