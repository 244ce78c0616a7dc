"""Fleet placement: several hosts of different card counts and sizes, seats free to go to any host,
multi-card seats kept within one host, and the solver against first-fit-decreasing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from inventory.snapshot import Snapshot, save_snapshot
from placement.cli import main
from placement.planner import PlanResult, greedy_assignment, plan
from placement.problem import build_problem, new_seats
from seats.model import Catalogue

MIB = 2**20
GIB = 2**30
TAKEN = datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)
# (NVML total, driver reserve): an 80 GB-class card and an H200 (FACTS.md section 1).
SMALL = (81_559 * MIB, 530 * MIB)
H200 = (150_754_820_096, 644_939_776)


def snapshot(host: str, kind: tuple[int, int], used: list[int]) -> Snapshot:
    """A host whose card i has `used[i]` bytes held by one process (or nothing)."""
    total, reserve = kind
    cards = []
    for i, u in enumerate(used):
        processes = [{"pid": 100 + i, "used_bytes": u, "cmdline": f"srv-{host}-{i}"}] if u else []
        cards.append(
            {
                "index": i,
                "total_bytes": total,
                "reserved_bytes": reserve,
                "used_bytes": u,
                "free_bytes": total - reserve - u,
                "processes": processes,
            }
        )
    return Snapshot.model_validate({"host": host, "taken_at": TAKEN, "cards": cards})


def fleet_catalogue(
    hosts: dict[str, tuple[tuple[int, int], int]], seats: list[dict[str, Any]]
) -> Catalogue:
    return Catalogue.model_validate(
        {
            "hosts": {
                name: {"cards": n, "card_total": kind[0], "margin": 0}
                for name, (kind, n) in hosts.items()
            },
            "seats": seats,
        }
    )


def placed(result: PlanResult) -> dict[str, tuple[str | None, tuple[int, ...]]]:
    return {v.seat: (v.host, v.cards) for v in result.verdicts if v.passed}


def test_a_seat_without_host_goes_to_the_only_host_with_room() -> None:
    # 100 GiB fits only an H200 (139.8 GiB CUDA total), not an 80 GB-class card (79.1 GiB).
    hosts = {"a100s": (SMALL, 4), "h200s": (H200, 2)}
    catalogue = fleet_catalogue(hosts, [{"name": "big", "resident": 100 * GIB}])
    snaps = [snapshot("a100s", SMALL, [0, 0, 0, 0]), snapshot("h200s", H200, [0, 0])]
    result = plan(catalogue, snaps)
    host, cards = placed(result)["big"]
    assert host == "h200s"
    assert len(cards) == 1


def test_a_two_card_seat_stays_on_one_host() -> None:
    # a100s has one free card, h200s one free card: 2 free cards in the fleet, but on
    # different hosts, so a 2-card seat has nowhere to go (rule host).
    hosts = {"a100s": (SMALL, 2), "h200s": (H200, 2)}
    catalogue = fleet_catalogue(hosts, [{"name": "tp", "resident": 30 * GIB, "gpus": 2}])
    snaps = [
        snapshot("a100s", SMALL, [0, 75 * GIB]),
        snapshot("h200s", H200, [135 * GIB, 0]),
    ]
    result = plan(catalogue, snaps)
    (verdict,) = result.verdicts
    assert not verdict.passed
    assert any(reason.rule in ("host", "room") for reason in verdict.reasons)


def test_multi_card_seats_across_differently_sized_hosts() -> None:
    # tp-big (2 × 90 GiB) fits only the H200 host, tp-small (2 × 40 GiB) then only the
    # 4-card host, on two different cards of it.
    hosts = {"a100s": (SMALL, 4), "h200s": (H200, 2)}
    catalogue = fleet_catalogue(
        hosts,
        [
            {"name": "tp-big", "resident": 90 * GIB, "gpus": 2},
            {"name": "tp-small", "resident": 40 * GIB, "gpus": 2},
        ],
    )
    snaps = [snapshot("a100s", SMALL, [0, 0, 50 * GIB, 50 * GIB]), snapshot("h200s", H200, [0, 0])]
    result = plan(catalogue, snaps)
    got = placed(result)
    assert got["tp-big"] == ("h200s", (0, 1))
    host, cards = got["tp-small"]
    assert host == "a100s"
    assert sorted(cards) == [0, 1]  # the only two a100s cards with 40 GiB free
    assert result.optimal


def test_the_solver_places_what_first_fit_decreasing_cannot() -> None:
    # Two cards with 100 GiB free each. FFD: 45+45 | 35+35+20, then the last 20 fits
    # nowhere (5 places). 45+35+20 twice places all six.
    free = 100 * GIB
    total, reserve = H200
    used = total - reserve - free
    hosts = {"h": (H200, 2)}
    sizes = [45, 45, 35, 35, 20, 20]
    catalogue = fleet_catalogue(
        hosts, [{"name": f"s{i}", "resident": w * GIB} for i, w in enumerate(sizes)]
    )
    snaps = [snapshot("h", H200, [used, used])]
    problem = build_problem(catalogue, snaps, new_seats(catalogue))
    assert len(greedy_assignment(problem)) == 5
    for solver in ("cbc", "highs"):
        result = plan(catalogue, snaps, solver=solver)
        assert len(placed(result)) == 6, solver
        assert result.optimal


def test_plan_cli_reads_one_snapshot_per_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = {"a100s": (SMALL, 4), "h200s": (H200, 2)}
    catalogue = tmp_path / "fleet.yaml"
    catalogue.write_text(
        "hosts:\n"
        f"  a100s: {{cards: 4, card_total: {SMALL[0]}}}\n"
        f"  h200s: {{cards: 2, card_total: {H200[0]}}}\n"
        "seats:\n"
        "  - {name: big, resident: 100 GiB}\n"
        "  - {name: tp, resident: 40 GiB, gpus: 2}\n"
    )
    save_snapshot(snapshot("a100s", SMALL, [0, 0, 0, 0]), tmp_path / "a100s.json")
    save_snapshot(snapshot("h200s", H200, [0, 0]), tmp_path / "h200s.json")
    code = main(
        [
            "plan",
            "--catalogue",
            str(catalogue),
            "--snapshot",
            str(tmp_path / "a100s.json"),
            "--snapshot",
            str(tmp_path / "h200s.json"),
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    answer = json.loads(out)
    seats = {s["seat"]: s for s in answer["seats"]}
    assert seats["big"]["host"] == "h200s"
    assert seats["tp"]["verdict"] == "pass"
    assert len(set(seats["tp"]["cards"])) == 2
    assert len(hosts) == len({c["host"] for c in answer["cards"]})
