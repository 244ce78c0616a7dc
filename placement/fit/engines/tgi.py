"""TGI: fills the card down to a level of its total (read in text-generation-inference v3.3.7, dfb3fbe7).

Rule, with f = `--cuda-memory-fraction` (default 1.0, launcher/src/main.rs:810-813, passed to
the shards as CUDA_MEMORY_FRACTION at :1054-1055 and read in
server/text_generation_server/utils/dist.py:13), T the card's CUDA total, free the card's free
bytes after TGI's weights and warm-up batch, c the KV bytes of one token:

- get_free_memory(f') = max(0, free − (1 − f') × T) (utils/import_utils.py:13-17);
- KV blocks = floor(get_free_memory(f × 0.9) / block bytes) + the warm-up batch's blocks
  (models/flash_causal_lm.py:1556-1563, TGI_WIGGLE_ROOM = 0.90 at models/globals.py:32): TGI
  leaves (1 − 0.9 f) × T free on the card — whatever its neighbours hold — and takes the rest.
  Its bytes depend on what is free when it warms up: a share of free, `unbounded` on a shared
  card unless its f is set for that card.
- `--max-total-tokens` is one request's input + output, not a pool size; unset it becomes
  min(KV tokens, the model's length) (flash_causal_lm.py:1566-1579). `--max-batch-total-tokens`
  is ignored for flash models (backends/v3/src/lib.rs:87-95).
- Refusals: a warm-up prefill that runs out of memory ("Not enough memory to handle N prefill
  tokens", flash_causal_lm.py:1548-1553; rule `gate` when nothing is left above the level), and
  `max_total_tokens` above the KV tokens ("Not enough memory to handle `max_total_tokens=N`",
  backends/v3/src/lib.rs:97-99 and :181; rule `kv_capacity`).
- Pin: `--cuda-memory-fraction` f with free − (1 − 0.9 f) × T ≤ resident on the card as it is
  (largest 3-decimal f), and `--max-total-tokens` from the profile's KV room.
- Start-up lines (learn): "Setting max batch total tokens to N" (backends/v3/src/lib.rs:137),
  the KV tokens its cache holds: the smallest of its shards' answers to warm-up
  (backends/v3/src/client/sharded_client.rs:127-134), each num_blocks × BLOCK_SIZE
  (flash_causal_lm.py:1684). Rank 0 alone prints its own "KV-cache blocks: N, size: B"
  (flash_causal_lm.py:1565, `log_master`), read where the router's line is missing.
  One request's length: `max_total_tokens` in the launcher's `Args {…}`, printed with `{:#?}`
  (launcher/src/main.rs:2079), one field a line, `Some(` and its value on separate lines; when
  it is None the router prints "Maximum total tokens defaulted to N"
  (backends/v3/src/main.rs:173-178). TGI prints no weights figure (use `learn --config`).
- Older releases print the same figures, meaning the same: v2.2.0 (db7e043d) "Setting max
  batch total tokens to N" at router/src/server.rs:1651, num_blocks × BLOCK_SIZE
  (flash_causal_lm.py:1204, BLOCK_SIZE 16 at models/globals.py:11), `{:#?}` Args
  (launcher/src/main.rs:1400) and "Default `max_total_tokens` to N" when unset (:1482);
  v1.0.0 (3ef5ffbc) the router line at router/src/main.rs:243 and Args on one line with `{:?}`
  (launcher/src/main.rs:1014), where `max_total_tokens: N` is a plain number (:149, default
  2048). Read against a TGI 2.2.0 start-up (tests/placement/fit/engines/data/tgi/).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal

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
    WholeNames,
    ceil_times,
    declared_resident,
    declared_text,
    free_after_load,
    largest_share,
    room_tokens,
    share_or,
    share_text,
    short_context,
    strip_prefix,
    tokens_in,
)
from seats.model import Engine as EngineSpec
from seats.model import Seat

WIGGLE_ROOM = Decimal("0.90")
DEFAULT_FRACTION = Decimal("1.0")
_MAX_BATCH = re.compile(r"Setting max batch total tokens to (\d+)")
# Args on one line (`{:?}`): `max_total_tokens: 8192,` (v1.0) or `max_total_tokens: Some(8192)`.
_ARGS_TOTAL = re.compile(r"\bmax_total_tokens: (?:Some\()?(\d+)")
# Args over lines (`{:#?}`, v2 on): `    max_total_tokens: Some(` with its value on the next line.
_ARGS_OPEN = re.compile(r"^\s*max_total_tokens: Some\($")
_ARGS_VALUE = re.compile(r"^\s*(\d+),$")
_DEFAULT_TOTAL = re.compile(
    r"Default `max_total_tokens` to (\d+)|Maximum total tokens defaulted to (\d+)"
)
_BLOCKS = re.compile(r"KV-cache blocks: (\d+), size: (\d+)")
# The launcher's flags gpuplan reads (launcher/src/main.rs, `struct Args`, clap 4 with `env`:
# each also read from its NAME variable). clap takes whole names only (no `infer_long_args`),
# `--name=value` or `--name value`, and refuses a second use of one (ArgAction::Set).
PARSER = WholeNames(
    "TGI's launcher (clap)",
    (
        ("--num-shard",),
        ("--sharded",),
        ("--cuda-memory-fraction",),
        ("--max-total-tokens",),
        ("--max-input-tokens",),
    ),
    repeat=True,
)
_FIELDS = (
    ("cuda_memory_fraction", "--cuda-memory-fraction", "CUDA_MEMORY_FRACTION", "fraction"),
    ("max_total_tokens", "--max-total-tokens", "MAX_TOTAL_TOKENS", "count"),
    ("max_input_tokens", "--max-input-tokens", "MAX_INPUT_TOKENS", "count"),
)


# One start-up: the launcher's `Args {` to the router's "Connected" (router/src/server.rs; TGI 3
# prints its default max_total_tokens after "Setting max batch total tokens").
MARKS = StartUpMarks(
    begins=(re.compile(r"text_generation_launcher: Args \{"),),
    ready=(re.compile(r": Connected\s*$"),),
    figures=(_MAX_BATCH, _BLOCKS, _DEFAULT_TOTAL),
    failed=(re.compile(r"Shard \d+ failed to start|Traceback \(most recent call last\)"),),
)


class TGI(NoRequest):
    """Hugging Face text-generation-inference (`text-generation-launcher`)."""

    kind = "tgi"
    title = "TGI"
    log_reader = "learn"
    start_up = MARKS
    # The launcher holds no GPU memory: its shards do, each a `text-generation-server serve`
    # (launcher/src/main.rs, shard_manager: Command::new("text-generation-server")).
    commands = ("text-generation-launcher", "text-generation-server serve")
    images = ("huggingface/text-generation-inference",)
    # ghcr.io/huggingface/text-generation-inference tags a release `3.3.4` (`2.4.0-intel-cpu`,
    # `1.2-rocm` for other hardware); `latest` and `sha-e4201f4…` name none.
    version_tag = re.compile(r"v?(?P<version>\d+\.\d+(?:\.\d+)?)(?:-.*)?")

    parser = PARSER

    def shards(
        self, argv: Sequence[str], env: Mapping[str, str] | None
    ) -> tuple[int | None, str | None]:
        """--num-shard N (else NUM_SHARD), 1 with --sharded false (else SHARDED=false), else
        None: every card it sees ("By default text-generation-inference will use all available
        GPUs to run the model", text-generation-launcher --help, SHARDED); with where it came
        from. FlagError for a value clap refuses (a shard count is a usize, --sharded a bool)."""
        found = PARSER.values(argv)
        shards = PARSER.number(found, "--num-shard", env, "NUM_SHARD")
        if shards is not None:
            return int(shards[0]), f"{shards[1]} {shards[0]}"
        if "--sharded" in found:
            text, where = found["--sharded"]
        elif env and "SHARDED" in env:
            text, where = env["SHARDED"], "environment SHARDED"
        else:
            return None, None
        if text.strip().lower() not in ("true", "false"):
            raise FlagError(where, f"{text!r} is not true or false: {PARSER.engine} stops at start")
        return (1, f"{where} false") if text.strip().lower() == "false" else (None, None)

    def cards_of(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> int | None:
        """--num-shard (NUM_SHARD), 1 with --sharded false, else every card it sees."""
        return self.shards(argv, env)[0]

    def cards_flag(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> str | None:
        """--num-shard N or NUM_SHARD as written."""
        return self.shards(argv, env)[1]

    def behaviour(self, spec: EngineSpec) -> Behaviour:
        """Always fills to a level of the total: a share of what is free when it warms up."""
        return "share-of-free"

    def read_flags(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> dict[str, object]:
        """--cuda-memory-fraction, --max-total-tokens, --max-input-tokens, each else its
        environment variable (clap's `env`: the command line wins); FlagError for a value clap
        refuses or a fraction outside (0, 1]."""
        found = PARSER.values(argv)
        fields: dict[str, object] = {}
        for field, flag, variable, kind in _FIELDS:
            number = PARSER.number(found, flag, env, variable, kind=kind)
            if number is not None:
                fields[field] = float(number[0]) if kind == "fraction" else number[0]
        return fields

    def share(self, seat: Seat) -> Decimal:
        """The declared f, or TGI's default 1.0."""
        return share_or(seat.engine.cuda_memory_fraction, DEFAULT_FRACTION)

    def level_bytes(self, seat: Seat, card: EngineCard) -> int:
        """ceil((1 − 0.9 f) × T): the free bytes TGI leaves on the card."""
        return ceil_times(1 - WIGGLE_ROOM * self.share(seat), card.cuda_total_bytes)

    def need_bytes(self, seat: Seat, card: EngineCard) -> int:
        """max(resident, free − level): it takes the card down to its level."""
        taken = card.free_bytes - self.level_bytes(seat, card)
        return max(seat.resident_bytes, taken)

    def kv_bytes(self, seat: Seat, card: EngineCard) -> int | None:
        """max(0, free after weights and non-KV − level): its KV cache (needs a profile)."""
        after = free_after_load(seat, card)
        return None if after is None else max(0, after - self.level_bytes(seat, card))

    def kv_tokens(self, seat: Seat, card: EngineCard) -> int | None:
        """KV bytes // c."""
        return tokens_in(seat, self.kv_bytes(seat, card))

    def gate(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """Warm-up OOM when its load leaves nothing above its level: it needs weights + non_kv
        + graphs + level + 1 B of what it reads free at start."""
        after = free_after_load(seat, card)
        level = self.level_bytes(seat, card)
        if after is None or after > level:
            return None
        return Refusal(
            "gate",
            card.engine_free_bytes - after + level + 1,
            card.engine_free_bytes,
            "tgi_gate",
            (
                ("share", str(self.share(seat))),
                ("cuda_total_bytes", card.cuda_total_bytes),
                ("level_bytes", level),
                ("error", "Not enough memory to handle … prefill tokens"),
            ),
        )

    def kv_capacity(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """--max-total-tokens above its KV tokens: TGI refuses at start."""
        return short_context(
            seat,
            self.kv_tokens(seat, card),
            seat.engine.max_total_tokens,
            "tgi_kv",
            error="Not enough memory to handle `max_total_tokens`",
        )

    def pinned(self, spec: EngineSpec) -> bool:
        """A declared --cuda-memory-fraction sets the level it fills the card to."""
        return spec.cuda_memory_fraction is not None

    def pin_flags(self, seat: Seat, card: EngineCard) -> tuple[str, ...]:
        """--cuda-memory-fraction f and --max-total-tokens: the seat's own where it declares
        them (what it is judged with), else the largest f that keeps it within its resident here
        and the profile's KV room."""
        spec = seat.engine
        tokens = (
            spec.max_total_tokens if spec.max_total_tokens is not None else room_tokens(seat, card)
        )
        caps = ("--max-total-tokens", str(tokens)) if tokens is not None else ()
        if spec.cuda_memory_fraction is not None:
            return ("--cuda-memory-fraction", declared_text(spec.cuda_memory_fraction), *caps)
        if not declared_resident(seat):
            return ()  # no resident to keep it within: pin_hint names the flags
        # free − (1 − 0.9 f) × T ≤ R  ⇔  0.9 f × T ≥ … ⇔ f ≤ (R − free + T) / (0.9 T)
        limit = seat.resident_bytes - card.free_bytes + card.cuda_total_bytes
        share = largest_share(limit * 10 // 9, card.cuda_total_bytes)
        if share is None:
            return ()
        return ("--cuda-memory-fraction", share_text(share), *caps)

    def learn(self, lines: Sequence[str], first_line: int = 1) -> Learned:
        """KV tokens from 'Setting max batch total tokens to N' (else rank 0's 'KV-cache
        blocks'), one request's length from its Args or the default it prints."""
        scan = LogScan.of(
            lines,
            {
                "max_batch": _MAX_BATCH,
                "default_total": _DEFAULT_TOTAL,
                "blocks": _BLOCKS,
            },
            first_line=first_line,
        )
        missing: list[str] = []
        blocks = scan.group("blocks")
        block_figures: tuple[LogFigure, ...] = ()
        if blocks is not None:
            _, number, line = scan.found["blocks"]
            size = int(scan.group("blocks", 2) or 0)
            block_figures = (
                LogFigure("KV-cache blocks (rank 0)", int(blocks), number, line),
                LogFigure("block size", size, number, line),
            )
        tokens = scan.number("max_batch")
        if tokens is None and blocks is not None:
            tokens = scan.figure("blocks", int(blocks) * block_figures[1].value)
        elif tokens is None:
            missing.append("Setting max batch total tokens to N")
        length = args_total(lines, first_line) or default_total(scan)
        if length is None:
            missing.append(
                "Args { … max_total_tokens: Some(N) … } or 'Maximum total tokens defaulted to N'"
            )
        return Learned(
            self.kind,
            kv_tokens=tokens,
            max_model_len=length,
            extra=block_figures,
            missing=(*missing, "weights: TGI prints none; use `learn --config DIR`"),
        )

    def pin_hint(self) -> str:
        """The flags that fix its bytes, by name."""
        return "--cuda-memory-fraction with --max-total-tokens (a profile gives their values)"


def args_total(lines: Sequence[str], first_line: int = 1) -> LogFigure | None:
    """`max_total_tokens` as the launcher's Args give it: on one line (`max_total_tokens: N,`
    or `Some(N)`), or over two (`max_total_tokens: Some(` then `N,`); None where it is None."""
    for index, raw in enumerate(lines):
        line = strip_prefix(raw)
        if "max_total_tokens:" not in line:
            continue
        one = _ARGS_TOTAL.search(line)
        if one is not None:
            return LogFigure("args_total", int(one.group(1)), index + first_line, raw.rstrip("\n"))
        if _ARGS_OPEN.match(line) and index + 1 < len(lines):
            value = _ARGS_VALUE.match(strip_prefix(lines[index + 1]))
            if value is not None:
                text = lines[index + 1].rstrip("\n")
                return LogFigure("args_total", int(value.group(1)), index + first_line + 1, text)
        return None
    return None


def default_total(scan: LogScan) -> LogFigure | None:
    """The default TGI printed for an unset max_total_tokens (launcher's or router's wording)."""
    if "default_total" not in scan.found:
        return None
    launcher, router = scan.group("default_total", 1), scan.group("default_total", 2)
    return scan.figure("default_total", int(launcher or router or 0))


ENGINE = TGI()
