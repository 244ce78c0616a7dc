"""TensorRT-LLM (PyTorch backend): a share of what is free after its weights and warm-up.

Read in NVIDIA/TensorRT-LLM at b35ac1b6 (tensorrt_llm/version.py: 1.2.0rc2),
tensorrt_llm/_torch/pyexecutor/_util.py, class KvCacheCreator. With f =
`kv_cache_config.free_gpu_memory_fraction` (default 0.9: "Default is 90%. If both `max_tokens`
and `free_gpu_memory_fraction` are specified, memory corresponding to the minimum will be used",
tensorrt_llm/llmapi/llm_args.py, KvCacheConfig), T the card's total, peak its own peak during a
warm-up run (torch peak + everything used outside torch on the card), c the KV bytes of a token:

- available_kv_mem = (T − peak + the estimation run's KV) × f (_util.py:114-130, `_cal_max_memory`);
  since peak counts every byte used on the card but its warm-up KV, this is f × (what is free
  after its weights and activation peak): KV = floor(f × (F0 − W − N)).
- `max_tokens` M given: KV = min(KV, M × c); the cache then holds KV // c tokens
  (`configure_kv_cache_capacity`, the "handle max_tokens" block right after `_cal_max_memory`).
  M is the byte pin: KV = M × c whatever is free, as long as f × free covers it.
- No start-up gate of its own: a cache smaller than `max_seq_len` shortens max_seq_len
  (the KV cache manager updates it, `_create_kv_cache_manager`): rule `kv_capacity`.
- Unpinned on a shared card it is `unbounded`: f × free squeezes whoever starts after it.
- Start-up lines (learn): "Memory used after loading model weights (inside torch) …: X GiB",
  "Peak memory during memory usage profiling (torch + non-torch): P GiB, available KV cache
  memory …: K GiB, fraction is set f, kv size is c." and "Estimated max memory in KV cache : M GiB"
  (all logger.info in `_cal_max_memory` / `configure_kv_cache_capacity`); the C++ KV cache
  manager's "[MemUsageChange] Allocated A GiB for max tokens in paged KV cache (N)."
  (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp, `KVCacheManager::allocatePools`, "%0.2f
  GiB" of cacheSizeBytes / 2**30 and N = blocks × tokens per block). The PyTorch backend
  builds its KV cache twice: first a small one for the estimation run (max_tokens from the
  warm-up requests, its own "Allocated … (N)" line), then the real one after profiling; the
  reader takes the last. max_model_len is the model's length ("max_seq_len is not specified,
  using inferred value N", model_engine.py `_init_max_seq_len`); the "max_seq_len=N,
  max_num_requests=…" line (`create_py_executor_instance`) shows it as cut to the cache.
  Read against a trtllm-serve 1.1.0rc3 log (tests/placement/fit/engines/data/trtllm/).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction

from placement.fit.engines.base import (
    Behaviour,
    EngineCard,
    HostFiles,
    Learned,
    LogScan,
    ModelName,
    NoRequest,
    Refusal,
    StartUpMarks,
    WholeNames,
    floor_times,
    free_after_load,
    profile_need,
    room_tokens,
    share_or,
    short_context,
    tokens_in,
)
from placement.fit.engines.note import note
from seats.model import Engine as EngineSpec
from seats.model import Seat

DEFAULT_FRACTION = Decimal("0.9")
_WEIGHTS = re.compile(
    r"Memory used after loading model weights \(inside torch\)[^:]*: ([\d.]+) GiB"
)
_PEAK = re.compile(
    r"Peak memory during memory usage profiling \(torch \+ non-torch\): ([\d.]+) GiB.*?"
    r"fraction is set ([\d.]+), kv size (?:per token )?is (\d+)"
)
_ESTIMATED = re.compile(r"Estimated max memory in KV cache : ([\d.]+) GiB")
_ALLOCATED = re.compile(r"Allocated ([\d.]+) GiB for max tokens in paged KV cache \((\d+)\)")
_INFERRED = re.compile(r"max_seq_len is not specified, using inferred value (\d+)")
_AT_START = re.compile(r"\bmax_seq_len=(\d+), max_num_requests=")
# One start-up: its version line (printed again by each worker, before any figure) to uvicorn's.
MARKS = StartUpMarks(
    begins=(re.compile(r"\[TensorRT-LLM\] TensorRT-LLM version: "),),
    ready=(re.compile(r"Application startup complete|Uvicorn running on"),),
    figures=(_WEIGHTS, _PEAK, _ESTIMATED, _ALLOCATED),
    failed=(re.compile(r"Traceback \(most recent call last\)"),),
)


# trtllm-serve's flags gpuplan reads (tensorrt_llm/commands/serve.py, click options spelled with
# `_`). click takes whole names only ("No such option: --tp. Did you mean --tp_size?"), reads
# `--name=value` or `--name value`, and keeps the last of a repeated option.
PARSER = WholeNames(
    "TensorRT-LLM's trtllm-serve (click)",
    (("--kv_cache_free_gpu_memory_fraction",), ("--max_seq_len",), ("--tp_size",), ("--pp_size",)),
)


class TensorRTLLM(NoRequest):
    """NVIDIA TensorRT-LLM's `trtllm-serve`."""

    kind = "trtllm"
    title = "TensorRT-LLM"
    log_reader = "learn"
    start_up = MARKS
    # trtllm-serve runs its model in MPI pool workers (tensorrt_llm/llmapi/mpi_session.py,
    # MpiPoolSession: mpi4py's MPIPoolExecutor), which mpi4py starts as `python -m
    # mpi4py.futures.server` (mpi4py/futures/_lib.py, client_spawn): the processes that hold
    # its GPU memory. Any mpi4py pool worker on a card is taken for TensorRT-LLM's.
    commands = ("trtllm-serve", "python -m mpi4py.futures.server")
    # Every server's pool workers have that one command line: a worker is its server's (the
    # `trtllm-serve` among its ancestors, MPI's orted between them), never its own.
    workers = ("python -m mpi4py.futures.server",)
    images = ("nvidia/tensorrt-llm",)
    # nvcr.io/nvidia/tensorrt-llm/release tags a release by tensorrt_llm.__version__: `1.0.0`,
    # `1.3.0rc1`, `1.1.0rc2.post2` (docs: installation/containers.html, "Container image tags").
    version_tag = re.compile(r"v?(?P<version>\d+\.\d+\.\d+(?:rc\d+)?(?:\.post\d+)?)(?:-.*)?")
    # trtllm-serve --tp_size and --pp_size (docs: commands/trtllm-serve), 1 each by default.
    parallel_flags = (("--tp_size",), ("--pp_size",))

    def behaviour(self, spec: EngineSpec) -> Behaviour:
        """A share of free after its weights; `max_tokens` with a profile pins the bytes."""
        return "share-of-free"

    parser = PARSER

    def model_name(self, argv: Sequence[str], files: HostFiles | None) -> ModelName | None:
        """`trtllm-serve [serve] MODEL`: its model is its first argument (docs: commands/
        trtllm-serve, `trtllm-serve serve <model>`, `serve` the default command)."""
        for i, word in enumerate(argv):
            if word.rsplit("/", 1)[-1] != "trtllm-serve":
                continue
            rest = list(argv[i + 1 :])
            if rest[:1] == ["serve"]:
                rest = rest[1:]
            if rest and not rest[0].startswith("-"):
                return ModelName(rest[0], note("model_argument", usage="trtllm-serve MODEL"))
        return None

    def read_flags(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> dict[str, object]:
        """--kv_cache_free_gpu_memory_fraction and --max_seq_len (max_tokens lives in its
        --extra_llm_api_options YAML, which is not read here); FlagError for a value click
        refuses or a fraction outside (0, 1]."""
        found = PARSER.values(argv)
        fields: dict[str, object] = {}
        share = PARSER.number(found, "--kv_cache_free_gpu_memory_fraction", kind="fraction")
        if share is not None:
            fields["free_gpu_memory_fraction"] = float(share[0])
        length = PARSER.number(found, "--max_seq_len")
        if length is not None:
            fields["max_seq_len"] = length[0]
        return fields

    def share(self, seat: Seat) -> Decimal:
        """The declared f, or 0.9."""
        return share_or(seat.engine.free_gpu_memory_fraction, DEFAULT_FRACTION)

    def kv_bytes(self, seat: Seat, card: EngineCard) -> int | None:
        """min(floor(f × (F0 − W − N)), M × c): needs a profile."""
        profile = seat.engine.profile
        after = free_after_load(seat, card)
        if profile is None or after is None:
            return None
        kv = floor_times(self.share(seat), max(0, after))
        cap = seat.engine.max_tokens
        return kv if cap is None else min(kv, cap * profile.kv_bytes_per_token)

    def need_bytes(self, seat: Seat, card: EngineCard) -> int:
        """weights + non_kv + KV + context with a profile, at least the resident; without one,
        at least f × free (its KV alone takes that share of what the weights leave)."""
        kv = self.kv_bytes(seat, card)
        if kv is not None:
            return profile_need(seat, card, kv)
        floor = floor_times(self.share(seat), card.engine_free_bytes) + card.cuda_context_bytes
        return (
            seat.resident_bytes
            if seat.engine.max_tokens is not None
            else max(seat.resident_bytes, floor)
        )

    def gate(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """No start-up check of free memory of its own (a short cache shortens max_seq_len), but
        a load that leaves no byte of KV cache fails: it needs weights + non_kv + graphs +
        ceil(1 / f) of what it reads free (floor(f × after) ≥ 1 ⇔ after ≥ ceil(1 / f))."""
        after = free_after_load(seat, card)
        if after is None:
            return None
        least = -(-1 // Fraction(self.share(seat)))
        if after >= least:
            return None
        return Refusal(
            "gate",
            card.engine_free_bytes - after + least,
            card.engine_free_bytes,
            "trtllm_gate",
        )

    def kv_tokens(self, seat: Seat, card: EngineCard) -> int | None:
        """KV bytes // c."""
        return tokens_in(seat, self.kv_bytes(seat, card))

    def kv_capacity(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """A cache below max_seq_len (else the profile's length): it shortens max_seq_len."""
        profile = seat.engine.profile
        wanted = seat.engine.max_seq_len or (profile.max_model_len if profile else None)
        return short_context(
            seat,
            self.kv_tokens(seat, card),
            wanted,
            "trtllm_kv",
        )

    def pinned(self, spec: EngineSpec) -> bool:
        """kv_cache_config.max_tokens fixes its KV cache."""
        return spec.max_tokens is not None

    def pin_flags(self, seat: Seat, card: EngineCard) -> tuple[str, ...]:
        """kv_cache_config.max_tokens: the seat's own where it declares it (what it is judged
        with), else from the resident's KV room (f kept: the smaller wins)."""
        declared = seat.engine.max_tokens
        tokens = declared if declared is not None else room_tokens(seat, card)
        if tokens is None:
            return ()
        return (
            "--kv_cache_free_gpu_memory_fraction",
            str(self.share(seat)),
            f"kv_cache_config.max_tokens={tokens}",
        )

    def learn(self, lines: Sequence[str], first_line: int = 1) -> Learned:
        """Weights, c and the KV cache from its memory-profiling lines (the last KV cache it
        allocates), the model's length from its inferred max_seq_len."""
        scan = LogScan.of(
            lines,
            {
                "weights": _WEIGHTS,
                "peak": _PEAK,
                "estimated": _ESTIMATED,
                "allocated": _ALLOCATED,
                "inferred": _INFERRED,
                "at_start": _AT_START,
            },
            last=("allocated", "at_start"),
            first_line=first_line,
        )
        missing: list[str] = []
        weights = scan.size("weights", "GiB")
        if weights is None:
            missing.append("Memory used after loading model weights (inside torch) …: X GiB")
        per_token = scan.number("peak", 3)
        if per_token is None:
            missing.append("Peak memory during memory usage profiling … kv size is N")
        kv = tokens = None
        if scan.group("allocated") is not None:
            kv = scan.size("allocated", "GiB")
            tokens = scan.number("allocated", 2)
        elif scan.group("estimated") is not None:
            kv = scan.size("estimated", "GiB")
            if per_token is not None and per_token.value > 0:
                tokens = scan.figure("estimated", kv.value // per_token.value if kv else 0)
        else:
            missing.append("Estimated max memory in KV cache : M GiB")
        length = scan.number("inferred")
        if length is None:
            missing.append("max_seq_len is not specified, using inferred value N")
        extra = scan.number("at_start")
        return Learned(
            self.kind,
            weights=weights,
            kv=kv,
            kv_tokens=tokens,
            max_model_len=length,
            per_token=per_token,
            extra=() if extra is None else (replace(extra, name="max_seq_len at start"),),
            missing=tuple(missing),
        )

    def pin_hint(self) -> str:
        """The flags that fix its bytes, by name."""
        return "kv_cache_config max_tokens (a profile gives its value)"


ENGINE = TensorRTLLM()
