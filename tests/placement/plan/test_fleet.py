"""Fleet placement: several hosts of different card counts and sizes, seats free to go to any host,
multi-card seats kept within one host, and the solver against first-fit-decreasing."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from inventory.attribution import attribute
from inventory.snapshot import Snapshot, save_snapshot
from placement.cli.main import main
from placement.fit.consistency import check_snapshots
from placement.fit.engines import gate_rule
from placement.fit.verify import (
    CardStates,
    card_catalogues,
    host_catalogues,
    judge,
    start_util,
    verify_placement,
)
from placement.plan.planner import (
    PlanResult,
    card_rows,
    explain_refusal,
    greedy_assignment,
    plan,
)
from placement.plan.problem import (
    PairTable,
    Problem,
    _pair,
    build_problem,
    new_seats,
)
from placement.plan.verified import verified
from seats.errors import BadInputError
from seats.model import Catalogue

MIB = 2**20
GIB = 2**30
TAKEN = datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)
# (NVML total, driver reserve): an 80 GB-class card and an H200 (docs/facts.md §1).
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


def a100s_and_h200s(tmp_path: Path, seats: str, *, a100s_used: list[int]) -> Path:
    """fleet.yaml with hosts a100s (4 SMALL cards) and h200s (2 empty H200s) and `seats` (YAML
    list lines), beside a100s.json and h200s.json; the catalogue's path."""
    catalogue = tmp_path / "fleet.yaml"
    catalogue.write_text(
        "hosts:\n"
        f"  a100s: {{cards: 4, card_total: {SMALL[0]}}}\n"
        f"  h200s: {{cards: 2, card_total: {H200[0]}}}\n"
        "seats:\n" + seats
    )
    save_snapshot(snapshot("a100s", SMALL, a100s_used), tmp_path / "a100s.json")
    save_snapshot(snapshot("h200s", H200, [0, 0]), tmp_path / "h200s.json")
    return catalogue


def test_plan_cli_reads_one_snapshot_per_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = {"a100s": (SMALL, 4), "h200s": (H200, 2)}
    catalogue = a100s_and_h200s(
        tmp_path,
        "  - {name: big, resident: 100 GiB}\n  - {name: tp, resident: 40 GiB, gpus: 2}\n",
        a100s_used=[0, 0, 0, 0],
    )
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


# --- Fleet-size shortcuts give the answers of the plain loops they replace -------------------


def random_fleet(seed: int, hosts: int = 6) -> tuple[Catalogue, list[Snapshot], list[Any]]:
    """A seeded fleet with what the shortcuts must respect: reserves (some for seats of other
    hosts), absent running seats, exclusive seats, host-less and pinned planned seats, vLLM
    seats with declared, proposed and default utils, two-card seats, a card in error."""
    rng = random.Random(seed)
    names = [f"h{i}" for i in range(hosts)]
    shapes = {
        name: (SMALL if i % 2 else H200, rng.choice([2, 4, 8])) for i, name in enumerate(names)
    }
    seats: list[dict[str, Any]] = []
    processes: dict[tuple[str, int], list[dict[str, Any]]] = {}
    used: dict[tuple[str, int], int] = {}
    for name, ((total, reserve), n) in shapes.items():
        for c in range(n):
            cuda = total - reserve
            size = int(cuda * rng.uniform(0.0, 0.7)) // MIB * MIB
            key = (name, c)
            used[key] = size
            processes[key] = []
            if size:
                i = len(seats)
                seat: dict[str, Any] = {
                    "name": f"run{i}",
                    "host": name,
                    "gpus": [c],
                    "resident": size,
                    "state": "running",
                    "match": f"--port {9000 + i}$",
                    "exclusive": rng.random() < 0.05,
                }
                seats.append(seat)
                if rng.random() < 0.9:  # else down: absent, keeps its place
                    processes[key].append(
                        {"pid": 9000 + i, "used_bytes": size, "cmdline": f"srv --port {9000 + i}"}
                    )
                else:
                    used[key] = 0
    new: list[dict[str, Any]] = []
    for j in range(4 * hosts):
        data: dict[str, Any] = {
            "name": f"new{j}",
            "resident": rng.randint(2, 70) * GIB,
            "priority": rng.choice([0, 0, 1, 2]),
        }
        roll = rng.random()
        if roll < 0.15:
            data["gpus"] = 2
        elif roll < 0.25:
            host = rng.choice(names)
            data["host"] = host
            data["gpus"] = [rng.randrange(shapes[host][1])]
        elif roll < 0.3:
            data["host"] = rng.choice(names)
        if rng.random() < 0.06:
            data["exclusive"] = True
        kind = rng.random()
        if kind < 0.3:
            data["engine"] = {"kind": "vllm", "version": "0.11.0", "kv_cache_memory": 2 * GIB}
        elif kind < 0.45:
            data["engine"] = {"kind": "vllm", "version": "0.11.0"}
        elif kind < 0.6:
            data["engine"] = {
                "kind": "vllm",
                "version": "0.11.0",
                "gpu_memory_utilization": rng.choice([0.2, 0.45, 0.7]),
            }
        elif kind < 0.7:
            # A request well above the resident: the gate binds before room does.
            data["engine"] = {
                "kind": "vllm",
                "version": "0.11.0",
                "gpu_memory_utilization": rng.choice([0.3, 0.5]),
                "kv_cache_memory": GIB,
            }
        new.append(data)
    # new0 already runs a process on card 0 of the first host (a redeploy): a card that
    # names the seat.
    new[0]["match"] = "srv-redeploy new0$"
    processes[(names[0], 0)].append({"pid": 1, "used_bytes": GIB, "cmdline": "srv-redeploy new0"})
    used[(names[0], 0)] += GIB
    reserves = []
    for r in range(hosts // 2):
        host = rng.choice(names)
        owner = rng.choice(new)["name"] if r % 2 else rng.choice(seats)["name"]
        reserves.append(
            {
                "name": f"hold{r}",
                "host": host,
                "gpu": rng.randrange(shapes[host][1]),
                "bytes": rng.choice(["card", 20 * GIB]),
                "for": [owner],
            }
        )
    catalogue = Catalogue.model_validate(
        {
            "hosts": {
                name: {
                    "cards": n,
                    "card_total": kind[0],
                    "cuda_context": 1183 * MIB,
                    "margin": 256 * MIB,
                }
                for name, (kind, n) in shapes.items()
            },
            "reserves": reserves,
            "seats": seats + [{**data, "state": "planned"} for data in new],
        }
    )
    snaps = []
    for name, ((total, reserve), n) in shapes.items():
        cards = []
        for c in range(n):
            card: dict[str, Any] = {
                "index": c,
                "total_bytes": total,
                "reserved_bytes": reserve,
                "used_bytes": used[(name, c)],
                "free_bytes": total - reserve - used[(name, c)],
                "processes": processes[(name, c)],
            }
            if name == names[-1] and c == 0:
                card = {"index": c, "error": "GpuIsLost", "processes": []}
            cards.append(card)
        snaps.append(Snapshot.model_validate({"host": name, "taken_at": TAKEN, "cards": cards}))
    return catalogue, snaps, []


def eager_pairs(problem: Problem) -> tuple[dict[Any, int], dict[Any, int]]:
    """The plain seat × host × card loop the lazy PairTable replaces."""
    need: dict[Any, int] = {}
    gate: dict[Any, int] = {}
    residents = {new.name: new.seat.resident_bytes for new in problem.seats}
    for new in problem.seats:
        seat = new.seat
        rule = gate_rule(seat.engine, propose=True)
        for host, slots in problem.hosts.items():
            if seat.host is not None and seat.host != host:
                continue
            ok_slots = [slot for slot in slots if slot.ok]
            if len(ok_slots) < seat.card_count:
                continue
            util = None
            if seat.card_count > 1:
                util = start_util(
                    seat, rule, [s.cuda_total for s in ok_slots], ok_slots[0].cuda_context_bytes
                )
            for slot in ok_slots:
                if seat.pinned_cards is not None and slot.index not in seat.pinned_cards:
                    continue
                if seat.card_count == 1:
                    util = start_util(seat, rule, [slot.cuda_total], slot.cuda_context_bytes)
                pair = _pair(seat, rule, util, slot, residents)
                if pair is not None:
                    need[(seat.name, host, slot.index)] = pair[0]
                    if pair[1] is not None:
                        gate[(seat.name, host, slot.index)] = pair[1]
    return need, gate


def first_fit_reference(problem: Problem) -> dict[str, tuple[str, tuple[int, ...]]]:
    """First-fit-decreasing that tries every eligible host in order (no skipping)."""
    order = sorted(
        problem.seats,
        key=lambda new: (
            -new.seat.priority,
            -new.seat.resident_bytes * new.seat.card_count,
            new.name,
        ),
    )
    load: dict[tuple[str, int], int] = defaultdict(int)
    members: dict[tuple[str, int], list[str]] = defaultdict(list)
    exclusive = {new.name for new in problem.seats if new.seat.exclusive}
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    for new in order:
        name = new.name
        for host in problem.eligible_hosts(name):
            fitting = []
            for slot in problem.hosts[host]:
                pair = (name, host, slot.index)
                if pair not in problem.need:
                    continue
                if members[slot.key] and (
                    name in exclusive or any(m in exclusive for m in members[slot.key])
                ):
                    continue
                held = slot.absent_bytes + sum(
                    max(0, r.reserve_bytes - r.running_own_bytes)
                    for r in slot.reserves
                    if name not in r.for_
                )
                after = load[slot.key] + problem.need[pair]
                if after > slot.free_bytes - slot.margin_bytes - held:
                    continue
                bounds = [
                    problem.gate_bound.get((m, host, slot.index))
                    for m in [*members[slot.key], name]
                ]
                if any(b is not None and after > b for b in bounds):
                    continue
                fitting.append(slot.index)
                if len(fitting) == new.seat.card_count:
                    break
            if len(fitting) == new.seat.card_count:
                for index in fitting:
                    load[(host, index)] += problem.need[(name, host, index)]
                    members[(host, index)].append(name)
                out[name] = (host, tuple(fitting))
                break
    return out


@pytest.mark.parametrize("seed", range(12))
def test_lazy_pairs_match_the_plain_loop_in_value_and_order(seed: int) -> None:
    catalogue, snaps, _ = random_fleet(seed)
    seats = new_seats(catalogue)
    asked_first = build_problem(catalogue, snaps, seats)
    # Ask a few pairs before anything is enumerated: the answer must not depend on when.
    probes = [
        (n.name, h, s.index)
        for n in seats[::3]
        for h, slots in asked_first.hosts.items()
        for s in slots
    ]
    early = {p: (p in asked_first.need, asked_first.gate_bound.get(p)) for p in probes}
    need, gate = eager_pairs(asked_first)
    assert list(asked_first.need.items()) == list(need.items())
    assert list(asked_first.gate_bound.items()) == list(gate.items())
    assert early == {p: (p in need, gate.get(p)) for p in probes}
    fresh = build_problem(catalogue, snaps, seats)
    for limit in (0, 1, len(need) - 1, len(need), len(need) + 1):
        assert fresh.pairs_exceed(limit) == (len(need) > limit)
    for new in seats:
        hosts = [
            host
            for host, slots in fresh.hosts.items()
            if sum((new.name, host, s.index) in need for s in slots) >= new.seat.card_count
        ]
        assert fresh.eligible_hosts(new.name) == hosts
        assert fresh.has_eligible_host(new.name) == bool(hosts)


@pytest.mark.parametrize("seed", range(12))
def test_first_fit_with_host_skipping_places_as_the_plain_scan(seed: int) -> None:
    catalogue, snaps, _ = random_fleet(seed, hosts=10)
    problem = build_problem(catalogue, snaps, new_seats(catalogue))
    reference = first_fit_reference(build_problem(catalogue, snaps, new_seats(catalogue)))
    assert greedy_assignment(problem) == reference
    assert reference  # the fleet places something


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_judging_through_a_host_view_gives_the_whole_catalogues_verdict(seed: int) -> None:
    catalogue, snaps, _ = random_fleet(seed)
    views = host_catalogues(catalogue)
    card_views = card_catalogues(catalogue)
    attributed = [attribute(s, catalogue) for s in snaps]
    problem = build_problem(catalogue, snaps, new_seats(catalogue))
    placements = verified(problem, greedy_assignment(problem))[0]
    for snap in attributed:
        here = [p for p in placements if p.host == snap.host]
        for new in problem.seats[:8]:
            one = new.seat.model_copy(update={"gpus": 1, "host": None})
            for card in snap.cards:
                whole = judge(catalogue, snap, one, [card.index], others=placements)
                part = judge(views[snap.host], snap, one, [card.index], others=here)
                cut = judge(
                    card_views[(snap.host, card.index)], snap, one, [card.index], others=here
                )
                assert part == whole
                assert part.figures == whole.figures
                assert cut == whole
                assert cut.figures == whole.figures
    # card_views={}: every card read through the whole catalogue, as before the views.
    whole_rows = card_rows(catalogue, attributed, placements, card_views={})
    assert card_rows(catalogue, attributed, placements) == whole_rows
    assert whole_rows == [
        row
        for snap in attributed
        for row in card_rows(
            views[snap.host], [snap], [p for p in placements if p.host == snap.host]
        )
    ]
    by_host = verify_placement(catalogue, attributed, placements, views={})
    assert verify_placement(catalogue, attributed, placements) == by_host
    assert (
        verify_placement(catalogue, attributed, placements, views=views, card_views=card_views)
        == by_host
    )


def test_a_snapshot_check_still_numbers_seats_as_the_file_does() -> None:
    # Host b's snapshot skips card 1; seats[2] is pinned there. The message names seats[2]
    # (the whole catalogue's index), not its place in b's part of the catalogue.
    hosts = {"a": (SMALL, 2), "b": (SMALL, 2)}
    catalogue = fleet_catalogue(
        hosts,
        [
            {"name": "x", "host": "a", "gpus": [0], "resident": GIB, "state": "running"},
            {"name": "y", "host": "a", "gpus": [1], "resident": GIB, "state": "running"},
            {"name": "z", "host": "b", "gpus": [1], "resident": GIB, "state": "running"},
        ],
    )
    skipped = snapshot("b", SMALL, [0, 0]).model_copy()
    cards = (skipped.cards[0], skipped.cards[1].model_copy(update={"index": 2}))
    skipped = skipped.model_copy(update={"cards": cards})
    with pytest.raises(BadInputError, match=r"seats\[2\] 'z' is pinned to card b:1"):
        check_snapshots(catalogue, [snapshot("a", SMALL, [0, 0]), skipped], ["a.json", "b.json"])


@pytest.mark.slow
def test_a_roomy_fleet_is_placed_asking_few_pairs_per_seat() -> None:
    # 60 hosts × 4 empty H200 cards; 240 seats of 20–60 GiB, some naming their host. Placing
    # them and bounding the seat count must not work out every seat × card pair (57,600):
    # the cost of a fleet plan has to grow with the fleet, not with its square.
    hosts = {f"h{i:02d}": (H200, 4) for i in range(60)}
    rng = random.Random(3)
    seats: list[dict[str, Any]] = []
    for j in range(240):
        seat: dict[str, Any] = {"name": f"s{j}", "resident": rng.randint(20, 60) * GIB}
        if j % 5 == 0:
            seat["host"] = f"h{rng.randrange(60):02d}"
        if j % 7 == 0:
            seat["gpus"] = 2
        seats.append(seat)
    catalogue = fleet_catalogue(hosts, seats)
    snaps = [snapshot(name, H200, [0, 0, 0, 0]) for name in hosts]
    problem = build_problem(catalogue, snaps, new_seats(catalogue))
    assert all(problem.has_eligible_host(new.name) for new in problem.seats)
    assigned = greedy_assignment(problem)
    assert isinstance(problem.need, PairTable)
    assert problem.need.worked_out <= 10 * len(problem.seats)
    assert assigned == first_fit_reference(build_problem(catalogue, snaps, new_seats(catalogue)))
    assert len(assigned) > 200  # a few seats that name a host find it full


@pytest.mark.parametrize("seed", range(8))
def test_explaining_with_shared_card_states_says_the_same(seed: int) -> None:
    # Refused seats are explained card by card, beside the same placements.
    catalogue, snaps, _ = random_fleet(seed)
    problem = build_problem(catalogue, snaps, new_seats(catalogue))
    placements = verified(problem, greedy_assignment(problem))[0]
    placed_names = {p.seat.name for p in placements}
    refused = [new for new in problem.seats if new.name not in placed_names]
    assert refused
    shared: CardStates = {}
    for new in refused + refused:  # the second round reads only shared states
        alone = explain_refusal(problem, new, placements)
        assert explain_refusal(problem, new, placements, None, shared) == alone
    assert shared


def test_plan_cli_summarises_a_refusal_on_many_cards_unless_explain_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # huge fits no card: room binds on all six. a100s card 1 is the fullest: the tightest three
    # are the H200s, then a100s card 0.
    huge = "  - {name: huge, resident: 200 GiB}\n"
    catalogue = a100s_and_h200s(tmp_path, huge, a100s_used=[0, 20 * GIB, 0, 0])
    base = ["plan", "--catalogue", str(catalogue)]
    base += ["--snapshot", str(tmp_path / "a100s.json"), "--snapshot", str(tmp_path / "h200s.json")]

    def answer(*extra: str) -> str:
        assert main([*base, *extra]) == 1
        return capsys.readouterr().out

    out = answer()
    lines = out[out.index("REFUSED  huge") :].splitlines()
    assert [line.split()[1] for line in lines[1:4]] == ["a100s:0", "h200s:0", "h200s:1"]
    assert lines[4] == (
        "  … the tightest 3 of 6 cards; in all: room on 6 cards (--explain all lists every one)"
    )
    every = answer("--explain", "all")
    cards = [line.split()[1] for line in every.splitlines() if line.startswith("  card ")]
    assert len(cards) == 6
    assert "tightest" not in every
    summary = json.loads(answer("--json"))["seats"][0]
    assert summary["reason_counts"] == {"room": 6}
    assert [(r["host"], r["card"]) for r in summary["reasons"]] == [
        ("a100s", 0),
        ("h200s", 0),
        ("h200s", 1),
    ]
    full = json.loads(answer("--json", "--explain", "all"))["seats"][0]
    assert "reason_counts" not in full
    assert len(full["reasons"]) == 6
