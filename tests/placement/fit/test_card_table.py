"""One table of cases, in the shape of kube-scheduler's `noderesources/fit_test.go`, run through
every consumer of the card model: the verifier (`judge`, the rule names it gives), the planner's
pruning (`PairTable`) and both greedy placers, which may be looser than the verifier, never
stricter.

Each case is (card state, seat, holds, want reasons). Cards are H200s (docs/facts.md §1: NVML
total 150,754,820,096 B, driver reserve 644,939,776 B, so a CUDA total of 150,109,880,320 B).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from inventory.holds import Hold
from inventory.snapshot import Snapshot, with_holds
from placement.cli.notes_text import note_texts
from placement.cli.reasons_text import reason_text
from placement.fit.card import card_model
from placement.fit.verify import judge
from placement.plan.greedy import best_fit, first_fit
from placement.plan.problem import NewSeat, build_problem
from seats.model import Catalogue

GIB = 2**30
MIB = 2**20
TOTAL = 150_754_820_096
RESERVED = 644_939_776
CUDA_TOTAL = TOTAL - RESERVED
CONTEXT = 1_277 * MIB  # docs/facts.md §1: context + NCCL + cuBLAS, 1,276.8 MiB
TAKEN = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Case:
    name: str
    seat: dict[str, Any]
    want: set[str]
    used_gib: int = 50  # the co-tenant's bytes on the card (a foreign process)
    holds: tuple[tuple[str, int, int], ...] = ()  # (seat, need, requested)
    running: tuple[dict[str, Any], ...] = ()  # running seats declared on card 0
    reserves: tuple[dict[str, Any], ...] = ()
    own_gib: int = 0  # the new seat's own processes on the card now (a redeploy)
    text: str = ""  # a phrase the binding reason must say
    extra: dict[str, Any] = field(default_factory=dict)


def vllm(util: float, *, kv: int | None = None) -> dict[str, Any]:
    engine: dict[str, Any] = {"kind": "vllm", "version": "0.11.0", "gpu_memory_utilization": util}
    if kv is not None:
        engine["kv_cache_memory"] = kv
    return engine


# svc-a's request at util 0.315 on an H200, as vLLM computed it: ceil(0.315 × 150,109,880,320).
SVC_A_REQUEST = 47_284_612_301

CASES = (
    Case("fits", {"resident": 40 * GIB}, set()),
    Case("room", {"resident": 99 * GIB}, {"room"}),
    Case(
        "gate",
        {"resident": 40 * GIB, "engine": vllm(0.7, kv=10 * GIB)},
        {"gate"},
        text="vLLM's gate",
    ),
    Case(
        "reserve held whole",
        {"resident": 10 * GIB},
        {"reserve"},
        used_gib=0,
        reserves=({"name": "big-hold", "gpu": 0, "bytes": "card", "for": ["big"]},),
        text="held for big (big-hold)",
    ),
    Case(
        # What is left of a reserve whose seat runs is that seat's: named beside room, and
        # no "free N on card 0" is offered, since only a process's bytes can be freed.
        "reserve in use: its own seat runs, the rest is theirs",
        {"resident": 40 * GIB},
        {"room", "reserve"},
        used_gib=0,
        running=({"name": "big", "resident": "60 GiB", "gpus": [0]},),
        reserves=({"name": "big-hold", "gpu": 0, "bytes": "card", "for": ["big"]},),
        text="big-hold keeps 79.80 GiB for big",
        extra={"no_nearest": "on card 0"},
    ),
    Case(
        "hold takes the room",
        {"resident": 40 * GIB},
        {"hold"},
        holds=(("tts-a", 60 * GIB, 0),),
        text="approved for tts-a",
    ),
    Case(
        "hold counts in the new seat's gate",
        {"resident": 10 * GIB, "engine": vllm(0.3, kv=4 * GIB)},
        {"gate"},
        holds=(("tts-a", 50 * GIB, 0),),
    ),
    Case(
        "the new seat would leave the hold's own gate short",
        {"resident": 20 * GIB},
        {"hold"},
        holds=(("tts-a", 10 * GIB, 70 * GIB),),
        text="would leave tts-a's approved gate short (it requests",
    ),
    Case(
        # Measured on an H200 with a 50 GiB co-tenant: svc-a approved at util 0.315, then
        # svc-b at the same util; once svc-a started, svc-b's real gate refused it.
        "H200: the second approval is refused by the first one's gate",
        {"resident": 44 * GIB, "engine": vllm(0.315)},
        {"gate", "hold"},
        holds=(("svc-a", SVC_A_REQUEST + CONTEXT, SVC_A_REQUEST),),
    ),
    Case("redeploy: its own bytes are freed first", {"resident": 80 * GIB}, set(), own_gib=40),
    # A redeploy's hold replaces its seat's running bytes, never adds to them (issue 32 item 4):
    # llama8b runs 40 GiB on the card and was approved again at 41 GiB asking 40 GiB. The card
    # has 99.80 GiB free; the hold counts the 1 GiB beyond what llama8b holds now, and its own
    # gate reads llama8b's 40 GiB freed (139.80 − 1.25 − 80 = 58.55 GiB ≥ 40 GiB).
    Case(
        "a redeploy's hold counts only its need beyond its seat's running bytes",
        {"resident": 80 * GIB},
        set(),
        used_gib=0,
        running=({"name": "llama8b", "resident": "40 GiB", "gpus": [0]},),
        holds=(("llama8b", 41 * GIB, 40 * GIB),),
    ),
    Case(
        # 99 GiB: 0.80 GiB of room without the hold, 0.20 GiB short with its 1 GiB beyond.
        "a redeploy's hold still takes what it adds",
        {"resident": 99 * GIB},
        {"hold"},
        used_gib=0,
        running=({"name": "llama8b", "resident": "40 GiB", "gpus": [0]},),
        holds=(("llama8b", 41 * GIB, 0),),
        text="1.00 GiB approved for llama8b at 14:00Z by ci, until 14:30Z (a redeploy: "
        "41.00 GiB in place of the 40.00 GiB it holds here now)",
    ),
    Case(
        "exclusive on an occupied card",
        {"resident": 10 * GIB, "exclusive": True},
        {"exclusive"},
    ),
    Case(
        "beside an exclusive running seat",
        {"resident": 10 * GIB},
        {"exclusive"},
        used_gib=0,
        running=({"name": "solo", "resident": "20 GiB", "gpus": [0], "exclusive": True},),
    ),
    # Every engine by its own rule (DESIGN.md, Engines), beside the 50 GiB co-tenant: the card
    # has 89.80 GiB free, and an engine meets 88.55 GiB once its context is up.
    Case(
        "SGLang unpinned beside a co-tenant: unbounded, with the pin that would pass",
        {
            "resident": 20 * GIB,
            "engine": {
                "kind": "sglang",
                "mem_fraction_static": 0.3,
                "profile": {
                    "weights": "8 GiB",
                    "non_kv": "2 GiB",
                    "kv_bytes_per_token": 131072,
                    "max_model_len": 32768,
                },
            },
        },
        {"unbounded"},
        # 20 − 8 − 2 GiB − 1,277 MiB of context leave 8.75 GiB of KV: 71,704 tokens of 128 KiB,
        # and 0.190 × 88.55 GiB of free is the first share that holds the weights and that pool.
        text="pin it (--mem-fraction-static 0.190 --max-total-tokens 71704)",
    ),
    Case(
        "SGLang pinned, its static share within its resident",
        {
            "resident": 30 * GIB,
            "engine": {"kind": "sglang", "mem_fraction_static": 0.3, "max_total_tokens": 65536},
        },
        set(),
    ),
    Case(
        # 0.3 × 88.55 GiB = 26.56 GiB: weights of 30 GiB reach it ("Not enough memory").
        "SGLang's own refusal: weights reach its fraction of free",
        {
            "resident": 45 * GIB,
            "weights": 30 * GIB,
            "engine": {"kind": "sglang", "mem_fraction_static": 0.3, "max_total_tokens": 65536},
        },
        {"gate"},
        text="SGLang refuses at start",
    ),
    Case(
        # Its need is 0.9 × 88.55 GiB + its context = 80.95 GiB, within the 89.80 GiB free.
        "SGLang's share of free is its need, and the card has it",
        {
            "resident": 20 * GIB,
            "engine": {"kind": "sglang", "mem_fraction_static": 0.9, "max_total_tokens": 65536},
        },
        set(),
    ),
    Case(
        "TGI without --cuda-memory-fraction beside a co-tenant: unbounded",
        {"resident": 20 * GIB, "engine": {"kind": "tgi"}},
        {"unbounded"},
    ),
    Case(
        "TensorRT-LLM without max_tokens beside a co-tenant: unbounded",
        {"resident": 20 * GIB, "engine": {"kind": "trtllm"}},
        {"unbounded"},
    ),
    Case(
        "Ollama larger than the card's free: it spills onto the CPU",
        {"resident": 95 * GIB, "engine": {"kind": "ollama"}},
        {"spill"},
        text="runs on the CPU",
    ),
    Case("Ollama that fits", {"resident": 20 * GIB, "engine": {"kind": "ollama"}}, set()),
    Case(
        "llama.cpp with --fit larger than the card's free: spill",
        {"resident": 95 * GIB, "engine": {"kind": "llamacpp"}},
        {"spill"},
        text="off the card",
    ),
    Case(
        "llama.cpp with -ngl is fixed: room alone",
        {"resident": 95 * GIB, "engine": {"kind": "llamacpp", "n_gpu_layers": 99}},
        {"room"},
    ),
    Case(
        "an unpinned share-of-free engine alone on its card takes it: no unbounded",
        {"resident": 20 * GIB, "engine": {"kind": "tgi"}},
        set(),
        used_gib=0,
    ),
)


def catalogue_of(case: Case) -> Catalogue:
    seats = [
        {"host": "h200", "state": "running", **seat} for seat in case.running
    ]  # no match: assumed present
    if any(r["for"] == ["big"] for r in case.reserves) and not any(
        s["name"] == "big" for s in case.running
    ):
        seats.append({"name": "big", "resident": "100 GiB", "state": "planned"})
    return Catalogue.model_validate(
        {
            "hosts": {"h200": {"cards": 1, "cuda_context": f"{CONTEXT} B", "margin": "0 B"}},
            "reserves": [{"host": "h200", **r} for r in case.reserves],
            "seats": seats,
        }
    )


def snapshot_of(case: Case) -> Snapshot:
    used = case.used_gib * GIB + sum(int(s["resident"].split()[0]) * GIB for s in case.running)
    processes = []
    if case.used_gib:
        processes.append({"pid": 100, "used_bytes": case.used_gib * GIB, "cmdline": "co-tenant"})
    for i, seat in enumerate(case.running):
        size = int(seat["resident"].split()[0]) * GIB
        processes.append({"pid": 200 + i, "used_bytes": size, "seat": seat["name"]})
    if case.own_gib:
        used += case.own_gib * GIB
        processes.append({"pid": 300, "used_bytes": case.own_gib * GIB, "seat": "new"})
    snapshot = Snapshot.model_validate(
        {
            "schema": 1,
            "host": "h200",
            "taken_at": TAKEN.isoformat(),
            "cards": [
                {
                    "index": 0,
                    "total_bytes": TOTAL,
                    "reserved_bytes": RESERVED,
                    "used_bytes": used,
                    "free_bytes": CUDA_TOTAL - used,
                    "processes": processes,
                }
            ],
        }
    )
    holds = [
        Hold(seat, "h200", (0,), need, TAKEN, TAKEN + timedelta(minutes=30), "ci", None, asked)
        for seat, need, asked in case.holds
    ]
    return with_holds([snapshot], holds)[0]


def new_seat(case: Case) -> NewSeat:
    from seats.model import Seat

    return NewSeat(Seat.model_validate({"name": "new", "host": "h200", **case.seat}), "table")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_verifier_gives_the_rules_of_the_table(case: Case) -> None:
    verdict = judge(catalogue_of(case), snapshot_of(case), new_seat(case).seat, [0], mode="check")
    assert {r.rule for r in verdict.reasons} == case.want, verdict.reasons
    assert verdict.passed == (not case.want)
    # Every VERDICT names its engine (DESIGN.md, Engines).
    engine = verdict.to_json()["engine"]
    assert engine["kind"] == case.seat.get("engine", {}).get("kind", "other")
    assert engine["behaviour"] in ("request-gated", "share-of-free", "self-fitting", "fixed")
    if case.text:
        assert any(case.text in reason_text(r) for r in verdict.reasons), verdict.reasons
    if "no_nearest" in case.extra:
        assert note_texts(verdict.nearest) and not any(
            case.extra["no_nearest"] in hint for hint in note_texts(verdict.nearest)
        ), note_texts(verdict.nearest)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_pruning_and_both_placers_are_never_stricter(case: Case) -> None:
    catalogue, snapshot, new = catalogue_of(case), snapshot_of(case), new_seat(case)
    passed = judge(catalogue, snapshot, new.seat, [0], mode="plan").passed
    problem = build_problem(catalogue, [snapshot], [new])
    entry = problem.pair("new", "h200", 0)
    placed = {
        "first": "new" in first_fit(problem),
        "best": "new" in best_fit(problem),
    }
    if passed:
        assert entry is not None
        assert placed == {"first": True, "best": True}
    # Where the table's rule is the card's alone (no util to propose), pruning agrees exactly.
    if case.want and "engine" not in case.seat:
        assert entry is None and placed == {"first": False, "best": False}


def test_the_card_model_copies_add_and_remove_a_seat() -> None:
    case = CASES[7]  # a gated hold of 10 GiB asking 70 GiB, beside a 50 GiB co-tenant
    model = card_model(catalogue_of(case), "h200", snapshot_of(case).cards[0])
    free = CUDA_TOTAL - 50 * GIB
    assert model.free_bytes == free
    assert model.hold_bytes == 10 * GIB
    assert model.gate_free_bytes() == free - CONTEXT - 10 * GIB
    # tts-a's own gate, judged again: the most new load that keeps it.
    assert model.hold_cap_bytes() == free - CONTEXT - 70 * GIB
    placed = model.with_seat("x", 5 * GIB)
    assert placed.placed == {"x": 5 * GIB} and model.placed == {}
    # The copy's figures meet the placed seat: its gate free, the hold's gate and the room.
    assert placed.gate_free_bytes() == model.gate_free_bytes() - 5 * GIB
    assert placed.hold_cap_bytes() == free - CONTEXT - 70 * GIB - 5 * GIB
    assert placed.plannable_bytes == model.plannable_bytes - 5 * GIB
    # Taking tts-a off frees its hold for everyone; the original is untouched.
    gone = placed.without_seat("tts-a")
    assert gone.holds == () and gone.hold_cap_bytes() is None and model.holds != ()
    assert gone.without_seat("x").placed == {}
    assert gone.without_seat("x").gate_free_bytes() == free - CONTEXT
