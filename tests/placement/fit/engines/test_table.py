"""DESIGN.md's engine table, one table of cases per behaviour: need, gate, pin, refusal text.

Every expected figure is worked out by hand in the case's comment from the engine's rule as
its module's docstring states it (file:line at a named release). The card is fv-ml1's
(docs/facts.md §3): CUDA total 101,972,967,424 B, cuda_context 1,183 MiB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from placement.cli.reasons_text import says_figures, sentence
from placement.fit.engines.base import EngineCard, Refusal
from placement.fit.engines.registry import KINDS, describe, engine
from placement.fit.verdict import Reason
from seats.model import Seat
from seats.units import GiB, MiB, format_bytes

TOTAL = 101_972_967_424
CONTEXT = 1183 * MiB  # 1,240,465,408
FREE_60 = EngineCard(TOTAL, 60 * GiB, CONTEXT)  # engine reads F0 = 63,184,044,032 (58.85 GiB)
FREE_10 = EngineCard(TOTAL, 10 * GiB, CONTEXT)  # engine reads F0 = 9,057 MiB
# An 8B-class model: 16 GiB of weights, 2 GiB outside the KV cache,
# 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B of KV per token.
PROFILE = {
    "weights": 16 * GiB,
    "non_kv": 2 * GiB,
    "kv_bytes_per_token": 131_072,
    "max_model_len": 8192,
}


def reason_of(refusal: Refusal) -> Reason:
    """The reason `fit` makes of a refusal on card 0 (its words are written at the edge)."""
    return Reason(
        refusal.rule,
        0,
        refusal.need_bytes,
        refusal.room_bytes,
        refusal.short_bytes,
        said=refusal.said,
        facts=refusal.facts,
    )


def words(refusal: Refusal) -> str:
    """A refusal's sentence, as `check` and `plan` print it."""
    return sentence(reason_of(refusal).to_json())


def seat(kind: str, resident: int = 30 * GiB, **fields: Any) -> Seat:
    """A planned seat of one engine kind with the given engine fields."""
    return Seat.model_validate(
        {"name": f"{kind}-seat", "resident": resident, "engine": {"kind": kind, **fields}}
    )


@dataclass(frozen=True)
class Case:
    name: str
    seat: Seat
    card: EngineCard
    behaviour: str
    need: int
    refusal: tuple[str, int] | None  # (rule, short bytes) or None when it starts in full
    text: str = ""  # a piece of the refusal's text


REQUEST_GATED = [
    # vLLM 0.11 util 0.11: ceil(0.11 × T) = 11,217,026,417 + context 1,240,465,408 = 12,457,491,825
    # > resident 10,740 MiB, so it is the need; free after context 58.85 GiB ≥ request: it starts.
    Case(
        "vllm 0.11 util 0.11",
        seat("vllm", 10740 * MiB, version="0.11.0", gpu_memory_utilization=0.11),
        FREE_60,
        "request-gated",
        12_457_491_825,
        None,
    ),
    # On a card with 10 GiB free: F0 = 9,057 MiB = 9,496,952,832 < 11,217,026,417: refused,
    # short 1,720,073,585.
    Case(
        "vllm refused by its gate",
        seat("vllm", 10740 * MiB, version="0.11.0", gpu_memory_utilization=0.11),
        FREE_10,
        "request-gated",
        12_457_491_825,
        ("gate", 1_720_073_585),
        "vLLM refuses at start",
    ),
]

SHARE_OF_FREE = [
    # SGLang m = 0.30: floor(0.30 × 63,184,044,032) = 18,955,213,209 (+ context 1,240,465,408
    # = 20,195,678,617) < resident 30 GiB: the need is the resident; W 16 GiB < m × F0: starts.
    Case(
        "sglang m 0.30",
        seat("sglang", mem_fraction_static=0.3, profile=PROFILE),
        FREE_60,
        "share-of-free",
        30 * GiB,
        None,
    ),
    # m = 0.25: floor(0.25 × F0) = 15,796,011,008 ≤ W = 17,179,869,184: "Not enough memory",
    # short 1,383,858,176.
    Case(
        "sglang refused: weights reach its share",
        seat("sglang", mem_fraction_static=0.25, profile=PROFILE),
        FREE_60,
        "share-of-free",
        30 * GiB,
        ("gate", 1_383_858_176),
        "Not enough memory. Please try to increase --mem-fraction-static.",
    ),
    # m = 0.9 with no profile: floor(0.9 × F0) = 56,865,639,628 + context = 58,106,105,036.
    Case(
        "sglang m 0.9 takes its share of free",
        seat("sglang", mem_fraction_static=0.9),
        FREE_60,
        "share-of-free",
        58_106_105_036,
        None,
    ),
    # TGI default f = 1.0 leaves ceil(0.1 × T) = 10,197,296,743 free: it takes
    # 64,424,509,440 − 10,197,296,743 = 54,227,212,697.
    Case(
        "tgi default fraction",
        seat("tgi", 20 * GiB),
        FREE_60,
        "share-of-free",
        54_227_212_697,
        None,
    ),
    # f = 0.9 leaves ceil(0.19 × T) = 19,374,863,811: it takes 45,049,645,629.
    Case(
        "tgi f 0.9",
        seat("tgi", 20 * GiB, cuda_memory_fraction=0.9),
        FREE_60,
        "share-of-free",
        45_049_645_629,
        None,
    ),
    # f = 0.9 with a profile: KV = F0 − W − N − level = 43,856,691,200 − 19,374,863,811
    # = 24,481,827,389 → 186,781 tokens < max_total_tokens 400,000: refused at start;
    # need 400,000 × 131,072 = 52,428,800,000 against 186,781 × 131,072 = 24,481,759,232.
    Case(
        "tgi max_total_tokens above its KV",
        seat("tgi", 20 * GiB, cuda_memory_fraction=0.9, max_total_tokens=400_000, profile=PROFILE),
        FREE_60,
        "share-of-free",
        45_049_645_629,
        ("kv_capacity", 52_428_800_000 - 24_481_759_232),
        "max_total_tokens 400,000 > 186,781 tokens its KV cache holds here "
        '("Not enough memory to handle `max_total_tokens`")',
    ),
    # TGI's warm-up with 50 GiB of weights: F0 − W − N = 63,184,044,032 − 55,834,574,848
    # = 7,349,469,184 ≤ its level 10,197,296,743, so nothing is left for KV: refused at start.
    # It needs W + N + level + 1 = 66,031,871,592 of the 63,184,044,032 it reads free: short
    # 2,847,827,560. Its need is its resident (60 GiB > free − level = 54,227,212,697).
    Case(
        "tgi refused: its load reaches its level",
        seat("tgi", 60 * GiB, profile={**PROFILE, "weights": 50 * GiB}),
        FREE_60,
        "share-of-free",
        60 * GiB,
        ("gate", 2_847_827_560),
        "Not enough memory to handle … prefill tokens",
    ),
    # TensorRT-LLM f 0.9 (default): KV = floor(0.9 × (F0 − W − N)) = floor(0.9 × 43,856,691,200)
    # = 39,471,022,080 (301,140 tokens); need W + N + KV + context = 60,038,840,320.
    Case(
        "trtllm default fraction",
        seat("trtllm", profile=PROFILE),
        FREE_60,
        "share-of-free",
        60_038_840_320,
        None,
    ),
    # 60 GiB of weights: F0 − W − N = 63,184,044,032 − 66,571,993,088 < 0 leaves no KV cache.
    # A byte of KV needs floor(0.9 × after) ≥ 1, after ≥ ceil(1 / 0.9) = 2: it needs
    # W + N + 2 = 66,571,993,090 of 63,184,044,032, short 3,387,949,058; it holds
    # W + N + context = 67,812,458,496.
    Case(
        "trtllm refused: its load leaves no KV cache",
        seat("trtllm", profile={**PROFILE, "weights": 60 * GiB}),
        FREE_60,
        "share-of-free",
        67_812_458_496,
        ("gate", 3_387_949_058),
        "leave no free memory for a KV cache",
    ),
    # max_tokens 65,536 caps it: KV = 8 GiB; W + N + KV + context = 26 GiB + 1,183 MiB
    # < resident 30 GiB.
    Case(
        "trtllm max_tokens pins its KV",
        seat("trtllm", profile=PROFILE, max_tokens=65_536),
        FREE_60,
        "share-of-free",
        30 * GiB,
        None,
    ),
]

SELF_FITTING = [
    # llama.cpp --fit: room = F0 − 1,024 MiB = 9,057 − 1,024 = 8,033 MiB; the resident less its
    # context wants 12,288 − 1,183 = 11,105 MiB: 3,072 MiB (3 GiB) spill onto the CPU; it
    # holds 8,033 + 1,183 = 9,216 MiB.
    Case(
        "llamacpp fits itself",
        seat("llamacpp", 12 * GiB),
        FREE_10,
        "self-fitting",
        9216 * MiB,
        ("spill", 3072 * MiB),
        "3.00 GiB of the model off the card",
    ),
    # Ollama: min(free − 0 − 457 MiB, F0 − 1,024 MiB) = min(9,783, 8,033) = 8,033 MiB: the same
    # 3,072 MiB spill.
    Case(
        "ollama fits itself",
        seat("ollama", 12 * GiB),
        FREE_10,
        "self-fitting",
        9216 * MiB,
        ("spill", 3072 * MiB),
        "runs on the CPU",
    ),
    # OLLAMA_GPU_OVERHEAD 2 GiB: 10,240 − 2,048 − 457 = 7,735 MiB; spill 11,105 − 7,735 = 3,370 MiB.
    Case(
        "ollama with its overhead",
        seat("ollama", 12 * GiB, gpu_overhead="2 GiB"),
        FREE_10,
        "self-fitting",
        (7735 + 1183) * MiB,
        ("spill", 3370 * MiB),
        "OLLAMA_GPU_OVERHEAD",
    ),
    # A seat that fits starts in full: 4 GiB − context < 8,033 MiB.
    Case("llamacpp small", seat("llamacpp", 4 * GiB), FREE_10, "self-fitting", 4 * GiB, None),
]

FIXED = [
    # -ngl set by the user stops the fitting: its resident, no start-up check (room alone).
    Case(
        "llamacpp -ngl",
        seat("llamacpp", 12 * GiB, n_gpu_layers=99),
        FREE_10,
        "fixed",
        12 * GiB,
        None,
    ),
    Case(
        "llamacpp --fit off",
        seat("llamacpp", 12 * GiB, fit=False),
        FREE_10,
        "fixed",
        12 * GiB,
        None,
    ),
    Case("ollama num_gpu", seat("ollama", 12 * GiB, num_gpu=20), FREE_10, "fixed", 12 * GiB, None),
    Case("other", seat("other", 12 * GiB), FREE_10, "fixed", 12 * GiB, None),
]


@pytest.mark.parametrize(
    "case", [*REQUEST_GATED, *SHARE_OF_FREE, *SELF_FITTING, *FIXED], ids=lambda c: c.name
)
def test_engine_table(case: Case) -> None:
    found = engine(case.seat.engine.kind)
    assert found.behaviour(case.seat.engine) == case.behaviour
    assert found.need_bytes(case.seat, case.card) == case.need
    # The start-up check first, then the KV capacity (TGI's is a refusal at start too).
    refusal = found.gate(case.seat, case.card) or found.kv_capacity(case.seat, case.card)
    if case.refusal is None:
        assert refusal is None
        return
    assert isinstance(refusal, Refusal)
    assert (refusal.rule, refusal.short_bytes) == case.refusal
    assert case.text in words(refusal)


@pytest.mark.parametrize(
    "case", [*REQUEST_GATED, *SHARE_OF_FREE, *SELF_FITTING, *FIXED], ids=lambda c: c.name
)
def test_words_that_say_their_figures_say_each_once(case: Case) -> None:
    # A refusal whose words say its need, room and short is printed alone: each said once.
    found = engine(case.seat.engine.kind)
    refusal = found.gate(case.seat, case.card)
    if refusal is None or not says_figures(reason_of(refusal)):
        return
    figures = {format_bytes(refusal.need_bytes), format_bytes(refusal.room_bytes)}
    figures.add(format_bytes(refusal.short_bytes))
    for figure in figures:
        assert len(re.findall(r"(?<![\d.])" + re.escape(figure), words(refusal))) == 1, figure


def test_the_spills_and_sglangs_gate_say_their_figures() -> None:
    spills = [c for c in SELF_FITTING if c.refusal is not None and c.refusal[0] == "spill"]
    gates = [c for c in SHARE_OF_FREE if c.refusal is not None and c.refusal[0] == "gate"]
    for case in [*spills, *gates]:
        refusal = engine(case.seat.engine.kind).gate(case.seat, case.card)
        # TGI's and TensorRT-LLM's words name none of the three: their figures come before them.
        says = case.seat.engine.kind not in {"tgi", "trtllm"}
        assert refusal is not None and says_figures(reason_of(refusal)) == says, case.name


def by_kind(case: tuple[Any, ...]) -> str:
    """A case's test id: its seat's engine kind."""
    return str(case[0].engine.kind)


KV_CAPACITY = [
    # SGLang m 0.30: pool floor((18,955,213,209 − 17,179,869,184) / 131,072) = 13,544 tokens
    # < --context-length 16,384; short (16,384 − 13,544) × 131,072 = 372,244,480.
    (
        seat("sglang", mem_fraction_static=0.3, context_length=16_384, profile=PROFILE),
        FREE_60,
        372_244_480,
    ),
    # TensorRT-LLM max_tokens 4,096 (< f × free): 4,096 tokens under the profile's 8,192;
    # short 4,096 × 131,072 = 536,870,912.
    (seat("trtllm", max_tokens=4096, profile=PROFILE), FREE_60, 536_870_912),
    # llama.cpp -c 8,192 over -np 4: 2,048 a slot; short 6,144 × 131,072 = 805,306,368.
    (seat("llamacpp", ctx_size=8192, parallel=4, profile=PROFILE), FREE_60, 805_306_368),
    # Ollama num_ctx 2,048 under 8,192: the same 805,306,368.
    (seat("ollama", num_ctx=2048, profile=PROFILE), FREE_60, 805_306_368),
    # Enough: llama.cpp -c 8,192 in one slot holds the 8,192.
    (seat("llamacpp", ctx_size=8192, profile=PROFILE), FREE_60, None),
]


@pytest.mark.parametrize("case", KV_CAPACITY, ids=by_kind)
def test_kv_capacity(case: tuple[Seat, EngineCard, int | None]) -> None:
    short_seat, card, short = case
    refusal = engine(short_seat.engine.kind).kv_capacity(short_seat, card)
    if short is None:
        assert refusal is None
    else:
        assert refusal is not None and refusal.rule == "kv_capacity"
        assert refusal.short_bytes == short


PINNED = [
    # (seat, pinned?): a share-of-free engine not pinned is `unbounded` beside anything else.
    (seat("sglang", mem_fraction_static=0.3), False),
    (seat("sglang", mem_fraction_static=0.3, max_total_tokens=65_536), True),
    (seat("tgi"), False),
    (seat("tgi", cuda_memory_fraction=0.3), True),
    (seat("trtllm", free_gpu_memory_fraction=0.2), False),
    (seat("trtllm", max_tokens=65_536), True),
    (seat("vllm", version="0.34.0"), False),
    (seat("vllm", version="0.34.0", kv_cache_memory="2 GiB"), True),
    (seat("llamacpp"), False),
    (seat("llamacpp", n_gpu_layers=99), True),
    (seat("ollama"), False),
    (seat("ollama", num_gpu=20), True),
    (seat("other"), True),
]


@pytest.mark.parametrize("case", PINNED, ids=by_kind)
def test_pinned(case: tuple[Seat, bool]) -> None:
    pinned_seat, expected = case
    assert engine(pinned_seat.engine.kind).pinned(pinned_seat.engine) is expected


def test_vllm_from_034_without_bytes_is_a_share_of_free() -> None:
    # docs/facts.md §2: 0.34's extensible KV cache skips the gate; with kv_cache_memory it is back.
    assert engine("vllm").behaviour(seat("vllm", version="0.34.0").engine) == "share-of-free"
    pinned = seat("vllm", version="0.34.0", kv_cache_memory="8 GiB").engine
    assert engine("vllm").behaviour(pinned) == "request-gated"


PINS = [
    # SGLang: KV room = 30 GiB − 16 − 2 GiB − 1,183 MiB = 11,105 MiB → 11,105 × 8 = 88,840 tokens;
    # m × F0 ≥ W + T × c = 17,179,869,184 + 11,644,436,480 = 28,824,305,664 → m ≥ 0.45619…
    # → 0.457 (floor(0.456 × F0) = 28,811,924,078 is short).
    (
        seat("sglang", profile=PROFILE),
        FREE_60,
        ("--mem-fraction-static", "0.457", "--max-total-tokens", "88840"),
    ),
    # TGI: take(f) = free − (1 − 0.9 f) × T ≤ 20 GiB ⇔ f ≤ (R − free + T) / 0.9 T = 0.6431… → 0.643;
    # its request cap from the KV room 20 − 18 GiB − 1,183 MiB = 865 MiB → 6,920 tokens.
    (
        seat("tgi", 20 * GiB, profile=PROFILE),
        FREE_60,
        ("--cuda-memory-fraction", "0.643", "--max-total-tokens", "6920"),
    ),
    # TensorRT-LLM: max_tokens from the same 11,105 MiB of KV room; its fraction stays.
    (
        seat("trtllm", profile=PROFILE),
        FREE_60,
        ("--kv_cache_free_gpu_memory_fraction", "0.9", "kv_cache_config.max_tokens=88840"),
    ),
    # llama.cpp: all layers, -c min(88,840, max_model_len 8,192 × 1 slot) = 8,192, --fit off.
    (seat("llamacpp", profile=PROFILE), FREE_60, ("-ngl", "999", "-c", "8192", "--fit", "off")),
    # Ollama: num_ctx as llama.cpp's; OLLAMA_GPU_OVERHEAD = free − 457 MiB − resident
    # = 61,440 − 457 − 30,720 = 30,263 MiB = 31,733,055,488.
    (
        seat("ollama", profile=PROFILE),
        FREE_60,
        ("num_gpu", "999", "num_ctx", "8192", "OLLAMA_GPU_OVERHEAD=31733055488"),
    ),
    (seat("other"), FREE_60, ()),
]


@pytest.mark.parametrize("case", PINS, ids=by_kind)
def test_pin_flags_from_bytes(case: tuple[Seat, EngineCard, tuple[str, ...]]) -> None:
    pinned, card, flags = case
    assert engine(pinned.engine.kind).pin_flags(pinned, card) == flags


def test_a_pinned_sglang_takes_what_it_was_pinned_to() -> None:
    # The pin's own arithmetic, run back through the rule: with m and T from pin_flags the pool
    # is T × c and the seat holds W + N + T × c + context = exactly its 30 GiB.
    base = seat("sglang", profile=PROFILE)
    flags = engine("sglang").pin_flags(base, FREE_60)
    pinned = seat(
        "sglang",
        profile=PROFILE,
        mem_fraction_static=float(flags[1]),
        max_total_tokens=int(flags[3]),
    )
    assert engine("sglang").gate(pinned, FREE_60) is None
    assert engine("sglang").kv_tokens(pinned, FREE_60) == 88_840
    assert engine("sglang").need_bytes(pinned, FREE_60) == 30 * GiB


def test_every_kind_of_the_catalogue_has_an_engine() -> None:
    assert set(KINDS) == {"vllm", "sglang", "tgi", "trtllm", "llamacpp", "ollama", "other"}
    for kind in KINDS:
        assert engine(kind).kind == kind


def test_a_verdict_describes_its_engine() -> None:
    # The VERDICT's `engine` object: {kind, version, behaviour}, version None where unknown.
    assert describe(seat("llamacpp", n_gpu_layers=99).engine) == {
        "kind": "llamacpp",
        "version": None,
        "behaviour": "fixed",
    }
    assert describe(seat("sglang", version="0.5.8").engine)["behaviour"] == "share-of-free"


@pytest.mark.slow
def test_an_engine_module_is_imported_only_when_used() -> None:
    # A fresh interpreter: the registry lists module names; asking for one kind imports that one.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from placement.fit.engines import registry\n"
        "def loaded():\n"
        "    return sorted(k.rsplit('.', 1)[1] for k in sys.modules"
        " if k.startswith('placement.fit.engines.') and k.rsplit('.', 1)[1] in registry.KINDS)\n"
        "print(loaded())\n"
        "registry.engine('sglang')\n"
        "print(loaded())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "['sglang']"]


def test_every_engine_names_its_own_pin_flags() -> None:
    # rule `unbounded` prints pin_hint() where pin_flags gives nothing: each engine's names its
    # own flags, never the generic fallback of the base class.
    from placement.fit.engines.base import NoRequest

    generic = NoRequest().pin_hint()
    hints = {kind: engine(kind).pin_hint() for kind in KINDS if kind != "other"}
    assert hints["llamacpp"] == "-ngl, -c and --fit off"
    assert hints["ollama"] == "num_gpu, num_ctx and OLLAMA_GPU_OVERHEAD"
    assert generic not in hints.values()
