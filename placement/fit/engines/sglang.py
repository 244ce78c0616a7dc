"""SGLang: a share of the memory free when it starts (read in sglang 0.5.8, the PyPI wheel).

Rule, with F0 the free memory its worker reads after its own CUDA context (the smallest
over its tensor-parallel ranks), m = `--mem-fraction-static`, W the weights loaded before
the KV pool is sized, c the KV bytes of one token (`cell_size`):

- F0 = `get_available_gpu_memory()` before the weights (srt/model_executor/model_runner.py:779,
  passed to `init_memory_pool` at :555); it is cudaMemGetInfo free ÷ 2**30
  (srt/utils/common.py:576).
- rest = avail_after_weights − F0 × (1 − m); tokens = floor(rest × 2**30) // c
  (srt/model_executor/model_runner_kv_cache_mixin.py:111-143). With avail_after_weights =
  F0 − W: rest = m × F0 − W, so weights, KV pool and all it holds statically take m × F0,
  the rest of what was free stays for activations, CUDA graphs and its neighbours.
- `--max-total-tokens T` caps the pool: tokens = min(profiled, T), a warning when T is larger
  (…_kv_cache_mixin.py:299-306); the pool is then T × c bytes, a byte pin.
- Refusal: tokens ≤ 0 raises "Not enough memory. Please try to increase
  --mem-fraction-static." (…_kv_cache_mixin.py:327-331), i.e. W ≥ m × F0 (rule `gate`).
- A request is capped at min(context_len − 1, pool tokens − 1) (srt/managers/tp_worker.py:286-289):
  a pool smaller than `--context-length` truncates (rule `kv_capacity`).
- Its default m depends on the card (srt/server_args.py:988-1030): unpinned on a shared card
  it is `unbounded`; gpuplan proposes m and T instead.
- Start-up lines (learn): "Load weight end. … mem usage=W GB." (model_runner.py:947-955) and
  "KV Cache is allocated. #tokens: N, K size: a GB, V size: b GB" (srt/mem_cache/memory_pool.py:605,
  GB = 2**30 at :68), "max_total_num_tokens=…, context_len=…" (srt/managers/scheduler.py:590-597).
  Before 0.4.3 (lmsysorg/sglang of February 2025, tests/placement/fit/engines/data/sglang/) the
  same lines lack "mem usage" and "#tokens": "Load weight begin. avail mem=A GB", "Load weight
  end. … avail mem=B GB" (the weights are A − B), "KV Cache is allocated. K size: a GB, V size:
  b GB." and the pool's tokens as "max_total_num_tokens=N".
  One start-up begins at "server_args=ServerArgs(" and has printed every figure at its scheduler's
  "max_total_num_tokens=…" (or "The server is fired up and ready to roll!",
  srt/entrypoints/http_server.py `_wait_and_warmup`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from decimal import Decimal

from placement.fit.engines.argparse_flags import ArgparseReader, is_option
from placement.fit.engines.base import (
    Behaviour,
    EngineCard,
    FlagError,
    Learned,
    LogFigure,
    LogScan,
    NoRequest,
    Refusal,
    StartUpMarks,
    declared_text,
    floor_times,
    fraction,
    profile_need,
    read_number,
    room_tokens,
    share_text,
    short_context,
    size_bytes,
    smallest_share,
    weights_of,
)
from placement.fit.engines.note import note
from placement.fit.engines.sglang_options import RELEASES
from seats.model import Engine as EngineSpec
from seats.model import Seat

# SGLang's own flags by release (sglang_options.py), read as its plain argparse parser reads them.
READER = ArgparseReader("SGLang", RELEASES)
_FIELDS = (
    ("mem_fraction_static", "--mem-fraction-static", "fraction"),
    ("max_total_tokens", "--max-total-tokens", "count"),
    ("context_length", "--context-length", "count"),
)
_PARALLEL = ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size")
_VALUES = {flag for _, flag, _ in _FIELDS} | set(_PARALLEL)


def server_args(argv: Sequence[str]) -> list[str]:
    """The arguments of `python -m sglang.launch_server …` or `sglang serve …` (inside a
    `sh -c` script too); argv itself where it starts with a flag (the image's own entrypoint
    runs the server); nothing where neither is found."""
    for i, word in enumerate(argv):
        if word.startswith("sglang.launch_server"):
            return list(argv[i + 1 :])
        if word == "serve" and i > 0 and argv[i - 1].rsplit("/", 1)[-1] == "sglang":
            return list(argv[i + 1 :])
        if " " in word and "sglang" in word:
            try:
                inner = shlex.split(word)
            except ValueError:
                continue
            if inner != [word] and (found := server_args(inner)):
                return found
    return list(argv) if argv and argv[0].startswith("-") else []


def read_values(
    argv: Sequence[str], version: str | None
) -> tuple[dict[str, tuple[str, str]], bool]:
    """Each value flag gpuplan reads → (its last value, as written), and whether
    --enable-dp-attention is on; FlagError for a flag SGLang's argparse would stop at."""
    args = server_args(argv)
    values: dict[str, tuple[str, str]] = {}
    dp_attention = False
    for option in READER.options(args, version):
        if option.name == "--enable-dp-attention":
            dp_attention = True
        if option.name not in _VALUES:
            continue
        value = option.value
        if value is None:
            following = option.index + 1
            if following >= len(args) or is_option(args[following]):
                raise FlagError(
                    option.written, "needs a value: SGLang stops at start (expected one argument)"
                )
            value = args[following]
        values[option.name] = (value, option.written)
    return values, dp_attention


_LOAD = re.compile(r"Load weight end\..*?mem usage=([\d.]+) GB")
# Before 0.4.3 "Load weight end" prints no mem usage: the weights are what its avail mem lost.
_LOAD_BEGIN = re.compile(r"Load weight begin\. avail mem=([\d.]+) GB")
_LOAD_END = re.compile(r"Load weight end\..*?avail mem=([\d.]+) GB")
# "#tokens: N, " from 0.4.3; before, the pool's tokens are the scheduler's max_total_num_tokens.
_KV = re.compile(
    r"KV Cache is allocated\.(?: dtype: \S+,)? (?:#tokens: (\d+), )?"
    r"(?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)"
)
_SUMMARY = re.compile(r"max_total_num_tokens=(\d+),.*?context_len=(\d+)")
# A printed GB figure ("{x / GB:.2f}") is at most half a hundredth above what it prints.
_HALF_HUNDREDTH = Decimal("0.005")
MARKS = StartUpMarks(
    begins=(re.compile(r"server_args=ServerArgs\("),),
    # The scheduler's summary comes once its pool and CUDA graphs are made: its figures are out.
    ready=(re.compile(r"The server is fired up and ready to roll"), _SUMMARY),
    figures=(_LOAD, _LOAD_END, _KV, _SUMMARY),
    failed=(re.compile(r"Traceback \(most recent call last\)"),),
)


class SGLang(NoRequest):
    """SGLang's `python -m sglang.launch_server`."""

    kind = "sglang"
    title = "SGLang"
    log_reader = "learn"
    start_up = MARKS
    # `sglang::`: the titles of its scheduler processes, which hold its GPU memory
    # (`sglang::scheduler`, `sglang::scheduler_DP0_TP0_EP0`; srt/managers/scheduler.py
    # run_scheduler_process, setproctitle).
    commands = ("python -m sglang.launch_server", "sglang serve", "sglang::")
    images = ("lmsysorg/sglang",)
    # lmsysorg/sglang tags a release `v0.5.8-cu126` (`v0.4.6.post1-cu124`, `v0.5.0rc0-cu126`):
    # the version, then the CUDA build; `latest`, `dev` and `nightly-dev-…` name none.
    version_tag = re.compile(r"v?(?P<version>\d+\.\d+\.\d+(?:\.post\d+|rc\d+)?)(?:-.*)?")

    def parallel_sizes(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> list[tuple[int, str]]:
        """Each parallel size given, as written (`--tp 2`): tp × pp cards, times dp data-parallel
        replicas (server_args.py: --tensor-parallel-size, --pipeline-parallel-size,
        --data-parallel-size, 1 each by default: one card with none of them, whatever its
        container sees); with --enable-dp-attention the dp ranks share the tp cards (SGLang's
        DeepSeek recipe: `--tp 8 --dp 8 --enable-dp-attention` on 8 cards), so dp is left out."""
        values, dp_attention = read_values(argv, version)
        flags = _PARALLEL[:2] if dp_attention else _PARALLEL
        sizes: list[tuple[int, str]] = []
        for flag in flags:
            if flag in values:
                text, written = values[flag]
                size = int(read_number(text, written, "SGLang", kind="count"))
                sizes.append((size, f"{written} {size}"))
        return sizes

    def behaviour(self, spec: EngineSpec) -> Behaviour:
        """Always a share of free at start; a max_total_tokens with a profile pins its pool."""
        return "share-of-free"

    def read_flags(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> dict[str, object]:
        """--mem-fraction-static (a fraction in (0, 1]), --max-total-tokens, --context-length,
        as its argparse reads them at `version`; FlagError for what it would stop at."""
        values, _ = read_values(argv, version)
        found: dict[str, object] = {}
        for field, flag, kind in _FIELDS:
            if flag in values:
                text, written = values[flag]
                number = read_number(text, written, "SGLang", kind=kind)
                found[field] = float(number) if kind == "fraction" else number
        return found

    def static_bytes(self, seat: Seat, card: EngineCard) -> int | None:
        """floor(m × F0): what its weights and KV pool may take; None without a declared m."""
        share = seat.engine.mem_fraction_static
        if share is None:
            return None
        return floor_times(fraction(share), card.engine_free_bytes)

    def pool_tokens(self, seat: Seat, card: EngineCard) -> int | None:
        """min(floor((m × F0 − W) / c), T): the tokens its pool holds (needs a profile; T alone
        without m)."""
        profile = seat.engine.profile
        if profile is None:
            return None
        static = self.static_bytes(seat, card)
        cap = seat.engine.max_total_tokens
        if static is None:
            return cap
        profiled = max(0, static - profile.weights_bytes) // profile.kv_bytes_per_token
        return profiled if cap is None else min(profiled, cap)

    def need_bytes(self, seat: Seat, card: EngineCard) -> int:
        """The resident, raised to what its fraction of free (or its pinned pool) makes it hold."""
        profile = seat.engine.profile
        cap = seat.engine.max_total_tokens
        if profile is not None and cap is not None:
            tokens = self.pool_tokens(seat, card)
            return profile_need(seat, card, (tokens or 0) * profile.kv_bytes_per_token)
        static = self.static_bytes(seat, card)
        if static is None:
            return seat.resident_bytes
        # Weights and pool fill m × F0; activations and graphs come on top, within the resident.
        return max(seat.resident_bytes, static + card.cuda_context_bytes)

    def gate(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """'Not enough memory' when its weights reach m × F0 (needs m and the weights)."""
        static = self.static_bytes(seat, card)
        weights = weights_of(seat)
        if static is None or weights is None or weights < static:
            return None
        return Refusal(
            "gate",
            weights,
            static,
            "sglang_gate",
            (
                ("share", str(seat.engine.mem_fraction_static)),
                ("free_bytes", card.engine_free_bytes),
                ("error", "Not enough memory. Please try to increase --mem-fraction-static."),
            ),
        )

    def kv_capacity(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """A pool below --context-length: SGLang caps each request at the pool (it starts)."""
        return short_context(
            seat,
            self.pool_tokens(seat, card),
            self.context_tokens(seat),
            "sglang_kv",
            raise_flags=("--mem-fraction-static", "--max-total-tokens"),
            lower_flag="--context-length",
        )

    def pinned(self, spec: EngineSpec) -> bool:
        """--max-total-tokens fixes its pool (with a profile, its bytes)."""
        return spec.max_total_tokens is not None

    def pin_flags(self, seat: Seat, card: EngineCard) -> tuple[str, ...]:
        """--mem-fraction-static m --max-total-tokens T: the seat's own where it declares them
        (what it is judged with), else from its profile: a pool of T × c bytes with
        m × F0 ≥ W + T × c."""
        spec, profile = seat.engine, seat.engine.profile
        declared = spec.max_total_tokens
        tokens = declared if declared is not None else room_tokens(seat, card)
        if tokens is None or (declared is None and profile is None):
            return ()
        share: str | None = None
        if spec.mem_fraction_static is not None and declared is not None:
            share = declared_text(spec.mem_fraction_static)
        elif profile is not None:
            found = smallest_share(
                profile.weights_bytes + tokens * profile.kv_bytes_per_token,
                card.engine_free_bytes,
            )
            if found is None and declared is None:
                return ()
            share = share_text(found) if found is not None else None
        named = ("--mem-fraction-static", share) if share is not None else ()
        return (*named, "--max-total-tokens", str(tokens))

    def kv_tokens(self, seat: Seat, card: EngineCard) -> int | None:
        """Tokens of its pool on this card (None without a profile)."""
        return self.pool_tokens(seat, card)

    def context_tokens(self, seat: Seat) -> int | None:
        """The longest request it must hold: --context-length, else the profile's."""
        if seat.engine.context_length is not None:
            return seat.engine.context_length
        profile = seat.engine.profile
        return profile.max_model_len if profile is not None else None

    def learn(self, lines: Sequence[str], first_line: int = 1) -> Learned:
        """Weights from 'Load weight end' (its mem usage, or before 0.4.3 the avail mem it lost
        since 'Load weight begin'), KV bytes and tokens from 'KV Cache is allocated' (before
        0.4.3 the tokens from max_total_num_tokens), the context from the scheduler's line.

        Its per-token bytes come from the KV sizes printed to 0.01 GB: each figure taken half a
        hundredth up, over the tokens, rounded down. The pool holds at least its tokens × c
        bytes (the K and V buffers have a padded slot more), so this is at least the true c
        (QwQ-32B over 4 cards: 65,653 B for a true 65,536; K + V as printed ÷ tokens gives
        65,422, under it)."""
        patterns = {
            "load": _LOAD,
            "begin": _LOAD_BEGIN,
            "end": _LOAD_END,
            "kv": _KV,
            "summary": _SUMMARY,
        }
        scan = LogScan.of(lines, patterns, first_line=first_line)
        missing: list[str] = []
        weights = self._weights(scan)
        if weights is None:
            missing.append("Load weight end. … mem usage=… GB (before 0.4.3: avail mem=… GB)")
        kv = tokens = per_token = None
        if "kv" in scan.found:
            match = scan.found["kv"][0]
            sizes = [g for g in (match.group(2), match.group(3), match.group(4)) if g]
            kv = scan.figure("kv", sum(size_bytes(s, "GiB") for s in sizes))
            tokens = (
                scan.figure("kv", int(match.group(1)))
                if match.group(1)
                else scan.number("summary", 1)
            )
            if tokens is not None and tokens.value > 0:
                upper = size_bytes(str(sum(Decimal(s) + _HALF_HUNDREDTH for s in sizes)), "GiB")
                per_token = LogFigure(
                    "kv_bytes_per_token",
                    upper // tokens.value,
                    scan.found["kv"][1],
                    "",
                    how=note(
                        "sizes_up_over_tokens",
                        sizes=tuple(sizes),
                        up=str(_HALF_HUNDREDTH),
                        tokens=tokens.value,
                        lines=(scan.found["kv"][1], tokens.line_no),
                    ),
                )
        else:
            missing.append("KV Cache is allocated. … K size: … GB, V size: … GB")
        length = scan.number("summary", 2)
        if length is None:
            missing.append("max_total_num_tokens=…, context_len=…")
        if kv is not None and tokens is None:
            missing.append("max_total_num_tokens=… (the KV cache's tokens)")
        return Learned(
            self.kind,
            weights=weights,
            kv=kv,
            kv_tokens=tokens,
            max_model_len=length,
            per_token=per_token,
            missing=tuple(missing),
            notes=(note("printed_gib"),),
        )

    @staticmethod
    def _weights(scan: LogScan) -> LogFigure | None:
        """Its mem usage after the weights; before 0.4.3, avail mem before less after."""
        printed = scan.size("load", "GiB")
        if printed is not None:
            return printed
        before, after = scan.group("begin"), scan.group("end")
        if before is None or after is None:
            return None
        return scan.figure("end", size_bytes(before, "GiB") - size_bytes(after, "GiB"))

    def pin_hint(self) -> str:
        """The flags that fix its bytes, by name."""
        return "--mem-fraction-static with --max-total-tokens (a profile gives their values)"


ENGINE = SGLang()
