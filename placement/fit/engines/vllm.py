"""vLLM behind the Engine protocol: the rule itself stays in this package's `__init__`.

The gate, util, need and flags of vLLM (FACTS.md §2; read in vLLM 0.10.2, 0.33.0, 0.34.0)
are the functions of `placement.fit.engines`; this module answers the protocol with them so
that the registry lists vLLM beside the others. Behaviour: request-gated up to 0.33 and with
`kv_cache_memory`; from 0.34 without it, a share of free (a declared util only caps it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from placement.fit.engines import engine_flags, gate_rule, need_bytes, passes_gate, requested_bytes
from placement.fit.engines.base import (
    Behaviour,
    Card,
    Learned,
    Refusal,
    argv_mentions,
    as_fraction,
    flag_value,
    gib,
    image_matches,
)
from seats.model import Engine as EngineSpec
from seats.model import Seat

# vLLM's own byte suffixes: uppercase binary, lowercase decimal (DESIGN.md, Commands).
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGTkmgt]?)\s*$")
_SCALE = {
    "": 1,
    "K": 2**10,
    "M": 2**20,
    "G": 2**30,
    "T": 2**40,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
}


class VLLM:
    """vLLM's OpenAI server (`vllm serve`, `-m vllm.entrypoints.openai.api_server`)."""

    kind = "vllm"
    title = "vLLM"
    # Its log is read by placement/check/vllm_log.py (`learn --vllm-log`).
    log_reader = "vllm-log"
    commands = ("vllm serve", "python -m vllm.entrypoints.openai.api_server")
    images = ("vllm/vllm-openai",)

    def behaviour(self, spec: EngineSpec) -> Behaviour:
        """request-gated when its gate applies, else a share of free."""
        rule = gate_rule(spec, propose=False)
        return "request-gated" if rule.gating == "gated" and rule.checks_gate else "share-of-free"

    def recognise(self, argv: Sequence[str], image: str | None = None) -> bool:
        """`vllm serve`, the api_server module, or the vllm-openai image."""
        if argv_mentions(argv, "vllm") and "serve" in argv:
            return True
        if any(word.startswith("vllm.entrypoints") for word in argv):
            return True
        return image_matches(image, self.images)

    def read_flags(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None
    ) -> dict[str, object]:
        """--gpu-memory-utilization and --kv-cache-memory-bytes."""
        found: dict[str, object] = {}
        util = as_fraction(flag_value(argv, "--gpu-memory-utilization"))
        if util is not None:
            found["gpu_memory_utilization"] = util
        text = flag_value(argv, "--kv-cache-memory-bytes", "--kv-cache-memory")
        match = _SIZE.match(text or "")
        if match is not None and int(match.group(1)) > 0:
            found["kv_cache_memory"] = int(match.group(1)) * _SCALE[match.group(2)]
        return found

    def need_bytes(self, seat: Seat, card: Card) -> int:
        """The resident, or ceil(util × total) + context where its KV grows to its request."""
        rule = gate_rule(seat.engine, propose=False)
        return need_bytes(
            seat.resident_bytes,
            rule.kv_cache_bytes,
            rule.util,
            card.cuda_total_bytes,
            card.cuda_context_bytes,
        )

    def gate(self, seat: Seat, card: Card) -> Refusal | None:
        """free after context < ceil(util × total) refuses (when its gate applies)."""
        rule = gate_rule(seat.engine, propose=False)
        if rule.gating != "gated" or not rule.checks_gate or rule.util is None:
            return None
        requested = requested_bytes(rule.util, card.cuda_total_bytes)
        if passes_gate(card.engine_free_bytes, requested):
            return None
        return Refusal(
            "gate",
            requested,
            card.engine_free_bytes,
            f"vLLM refuses at start: {gib(card.engine_free_bytes)} free < util {rule.util} × "
            f"{gib(card.cuda_total_bytes)} = {gib(requested)}",
        )

    def kv_capacity(self, seat: Seat, card: Card) -> Refusal | None:
        """Left to placement/fit/kv.py, which judges vLLM's second refusal today."""
        return None

    def pinned(self, spec: EngineSpec) -> bool:
        """Not unbounded: a util or kv_cache_memory, or a version that gates by default."""
        return gate_rule(spec, propose=False).gating != "unbounded"

    def pin_flags(self, seat: Seat, card: Card) -> tuple[str, ...]:
        """Its declared util and kv_cache_memory as flags."""
        rule = gate_rule(seat.engine, propose=False)
        return engine_flags(
            rule.util if rule.source == "declared" else None, rule.kv_cache_bytes, proposed=False
        )

    def kv_tokens(self, seat: Seat, card: Card) -> int | None:
        """Left to placement/fit/kv.py, which judges vLLM's second refusal today."""
        return None

    def learn(self, lines: Sequence[str]) -> Learned:
        """vLLM's log is read by placement/check/vllm_log.py (`learn --vllm-log`)."""
        return Learned(self.kind, missing=("vLLM's lines: use `gpuplan learn SEAT --vllm-log`",))


ENGINE = VLLM()
