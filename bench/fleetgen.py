"""The part of a synthetic fleet both plan benchmarks share: running seats in place, then the
catalogue and one snapshot per host that agree with them to the byte.

Each benchmark chooses its own card shapes, seat sizes and new seats; this module only turns
those choices into the frozen catalogue and snapshots the planner reads.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from inventory.snapshot import Snapshot
from seats.model import Catalogue

MIB = 2**20
TAKEN = datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)

# host → (cards, NVML total bytes per card, driver reserve bytes per card)
Shape = dict[str, tuple[int, int, int]]
Key = tuple[str, int]


def running_fleet(
    rng: random.Random,
    shape: Shape,
    running: int,
    size_bytes: Callable[[Key, int], int],
    keep_free_share: float,
) -> tuple[Catalogue, list[Snapshot]]:
    """Place `running` seats round-robin then at random, each `size_bytes(card, cuda_total)`,
    skipping one that would leave less than `keep_free_share` of the card's CUDA total free.

    The draws happen in one fixed order (card, then size), so a seed gives one fleet.
    """
    free = {(h, c): total - reserve for h, (n, total, reserve) in shape.items() for c in range(n)}
    keys = list(free)
    seats: list[dict[str, Any]] = []
    processes: dict[Key, list[dict[str, Any]]] = {key: [] for key in keys}
    for i in range(running):
        key = keys[i % len(keys)] if i < len(keys) else rng.choice(keys)
        _, total, reserve = shape[key[0]]
        cuda_total = total - reserve
        size = size_bytes(key, cuda_total)
        if free[key] - size < keep_free_share * cuda_total:
            continue
        free[key] -= size
        seats.append(
            {
                "name": f"run{i}",
                "host": key[0],
                "gpus": [key[1]],
                "resident": size,
                "state": "running",
                "match": f"--port {10000 + i}$",
            }
        )
        processes[key].append(
            {"pid": 10000 + i, "used_bytes": size, "cmdline": f"srv --port {10000 + i}"}
        )
    catalogue = Catalogue.model_validate(
        {
            "hosts": {
                h: {
                    "cards": n,
                    "card_total": total,
                    "cuda_context": 1183 * MIB,
                    "margin": 256 * MIB,
                }
                for h, (n, total, _) in shape.items()
            },
            "seats": seats,
        }
    )
    snapshots = [
        Snapshot.model_validate(
            {
                "host": h,
                "taken_at": TAKEN,
                "cards": [
                    {
                        "index": c,
                        "total_bytes": total,
                        "reserved_bytes": reserve,
                        "used_bytes": total - reserve - free[(h, c)],
                        "free_bytes": free[(h, c)],
                        "processes": processes[(h, c)],
                    }
                    for c in range(n)
                ],
            }
        )
        for h, (n, total, reserve) in shape.items()
    ]
    return catalogue, snapshots
