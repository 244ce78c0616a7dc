"""The Engine protocol every serving engine implements, and the plain data it answers with.

One module per engine (sglang.py, tgi.py, …) holds one object `ENGINE` that satisfies
`Engine`; `registry.py` lists the modules and imports one only when a seat or a service uses
it. Everything here is pure: exact int arithmetic (fractions as Decimal), no I/O.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, Literal, Protocol

from placement.fit.engines.note import Note, Said, note
from seats.model import Engine as EngineSpec
from seats.model import Seat
from seats.units import GiB, KiB, MiB

Behaviour = Literal["request-gated", "share-of-free", "self-fitting", "fixed"]
Rule = Literal["gate", "kv_capacity", "spill", "unbounded"]
Gating = Literal["gated", "unbounded", "none"]
UtilSource = Literal["declared", "default", "proposed", "none"]
STEP = Decimal("0.001")  # proposed fractions have three decimals, as vLLM's utils do


class FlagError(ValueError):
    """A flag or value the engine itself would stop at: bad input (exit 2), naming the flag as
    written and why (`--kv-cache-mem 20G`-style abbreviations are read, not refused)."""

    def __init__(self, flag: str, why: str) -> None:
        super().__init__(f"{flag}: {why}")
        self.flag = flag
        self.why = why


@dataclass(frozen=True)
class GateRule:
    """How a seat's engine meets a card when it starts on a util request against total memory:
    its gating, the util judged and where it came from (`none` for an engine without one)."""

    gating: Gating
    util: Decimal | None
    source: UtilSource
    kv_cache_bytes: int | None
    warnings: tuple[Note, ...] = ()
    # False for vLLM ≥ 0.34 with a declared util and no kv_cache_memory: its extensible KV
    # cache skips the start-up check, and the util only caps what it grows to (judged by room).
    checks_gate: bool = True


NO_REQUEST = GateRule("none", None, "none", None)


@dataclass(frozen=True)
class EngineCard:
    """What an engine meets on one card when it starts (DESIGN.md, "What fits means").

    `free_bytes` is NVML's free before the engine's process exists; the engine itself reads
    `free_bytes − cuda_context_bytes` (its own context is already up when it asks).
    """

    cuda_total_bytes: int
    free_bytes: int
    cuda_context_bytes: int = 0

    @property
    def engine_free_bytes(self) -> int:
        """What the engine's own cudaMemGetInfo reads at start."""
        return max(0, self.free_bytes - self.cuda_context_bytes)


# One figure a refusal's sentence says besides its bytes: a count or bytes, a name, names.
RefusalFact = int | str | tuple[str, ...]


@dataclass(frozen=True)
class Refusal:
    """One way an engine will not start, or start short, on a card, with its bytes, as data:
    `said` names its sentence (written at the edge, placement/cli/reasons_text.py) and `facts`
    the other figures and names the sentence says."""

    rule: Rule
    need_bytes: int
    room_bytes: int
    said: str
    facts: tuple[tuple[str, RefusalFact], ...] = ()

    @property
    def short_bytes(self) -> int:
        """need − room, never negative."""
        return max(0, self.need_bytes - self.room_bytes)


@dataclass(frozen=True)
class LogFigure:
    """One figure read from a start-up log, with the line it came from (1-based); one worked out
    from other figures says how in `how` (a note: the edge writes its words)."""

    name: str
    value: int
    line_no: int
    line: str
    how: Note | None = None


@dataclass(frozen=True)
class StartUpMarks:
    """How an engine's log shows where a start-up begins and that it came up.

    `begins`: a line its start-up prints before any figure (its version or arguments);
    `ready`: the line that says it is serving; `figures`: lines that print a figure. Ranks
    print some lines several times, so a `begins` line opens a new start-up only once the
    current one has printed a figure, its ready line or a failure (`failed`).
    """

    begins: tuple[re.Pattern[str], ...] = ()
    ready: tuple[re.Pattern[str], ...] = ()
    figures: tuple[re.Pattern[str], ...] = ()
    failed: tuple[re.Pattern[str], ...] = ()


NO_MARKS = StartUpMarks()


@dataclass(frozen=True)
class Learned:
    """What an engine's start-up log says of its seat, for `gpuplan learn`.

    `weights`, `non_kv`, `kv` are bytes on one card; `kv_tokens` the tokens its KV cache
    holds; `max_model_len` the longest request it accepts. A figure the log does not print
    is None, and `missing` names the line that would give it.
    """

    kind: str
    weights: LogFigure | None = None
    non_kv: LogFigure | None = None
    kv: LogFigure | None = None
    kv_tokens: LogFigure | None = None
    max_model_len: LogFigure | None = None
    per_token: LogFigure | None = None
    extra: tuple[LogFigure, ...] = ()
    missing: tuple[str, ...] = ()
    notes: tuple[Said, ...] = ()

    @property
    def kv_bytes_per_token(self) -> int | None:
        """The per-token figure the log prints, else floor(KV bytes ÷ tokens).

        An engine counts whole tokens (vLLM and SGLang whole blocks of them) into its KV bytes,
        so KV bytes ÷ tokens is at least the true per-token figure, and so is its floor (the true
        figure is a whole number of bytes): the floor is the tightest bound, the one vLLM's
        `learn --vllm-log` prints (vllm_log.learn_profile).
        """
        if self.per_token is not None:
            return self.per_token.value
        if self.kv is None or self.kv_tokens is None or self.kv_tokens.value <= 0:
            return None
        return self.kv.value // self.kv_tokens.value


class HostFiles(Protocol):
    """Read-only files of the host (or of a process's container) where a running server keeps
    its models: what `init` lets an engine read to name a seat after its model."""

    def read_text(self, path: str) -> str | None:
        """The file at `path` as text; None where it cannot be read."""
        ...

    def listing(self, folder: str) -> list[str]:
        """Every file below `folder`, relative to it; empty where it cannot be read."""
        ...


@dataclass(frozen=True)
class ModelName:
    """The model a server's command line serves, as its engine's own store names it: `how` says
    where the name came from (a note); `stable` is False where it stands in for a name not found."""

    name: str
    how: Note
    stable: bool = True


# `fail(flag as written, why)`: the error a compose service's reader raises for a bad flag.
Fail = Callable[[str, str], Exception]
# A shell script's `$VAR` as the container's shell would read it.
Expand = Callable[[str], str]


@dataclass(frozen=True)
class ServerArgs:
    """Where a compose service's command gives an engine's own arguments: the command as judged,
    the arguments the engine's parser reads, and whether a positional model may lead them."""

    argv: tuple[str, ...]
    args: tuple[str, ...]
    positional: bool


@dataclass(frozen=True)
class ServiceFlags:
    """What a compose service's own arguments set, read as its engine's parser reads them:
    its model, util request and pinned KV cache, counts by catalogue name (parallel sizes, LoRA
    slots; absent where not given), LoRA adapters, port, context length, KV dtype, the catalogue
    engine fields they set, and notes (a flag given twice)."""

    model: str | None = None
    util_text: str | None = None
    kv_cache_bytes: int | None = None
    counts: tuple[tuple[str, int], ...] = ()
    lora_modules: tuple[str, ...] = ()
    lora_enabled: bool = False
    runtime_lora: bool = False
    port: int | None = None
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None
    engine_fields: tuple[tuple[str, object], ...] = ()
    notes: tuple[Said, ...] = ()

    def count(self, name: str) -> int | None:
        """A count by its catalogue name (`tensor_parallel_size`), None where not given."""
        return dict(self.counts).get(name)


class EngineRule(Protocol):
    """One serving engine: how it is recognised, what it takes on a card, and how it refuses.

    `util_request` engines (vLLM) start on a request of a share of the card's CUDA total that
    the verifier and the planner size themselves (`request_rule`, `request_flags`): the same
    arithmetic serves the check's default util and the plan's proposed one.
    """

    kind: str
    util_request: bool
    title: str  # as users write it: "llama.cpp"
    # Who reads its start-up log: "learn" (its own `learn`), "vllm-log", or "" (none).
    log_reader: str
    # Command words and image names it is recognised by (the default `recognise` reads them).
    commands: tuple[str, ...]
    images: tuple[str, ...]
    # How a tag of its own images names its version (`image_version`): group `version`.
    version_tag: re.Pattern[str]
    # The flag that reads more flags from a file (compose reads that file where it is mounted),
    # None where it has none; the environment variables it reads that a compose file must set.
    config_flag: str | None
    variables: tuple[str, ...]

    @property
    def start_up(self) -> StartUpMarks:
        """The lines that open one of its start-ups and say it serves (`last_start_up`)."""
        ...

    def behaviour(self, spec: EngineSpec) -> Behaviour:
        """Which of the four behaviours the engine has with these fields."""
        ...

    def recognise(self, argv: Sequence[str], image: str | None = None) -> bool:
        """True when a command line (and a compose image) starts this engine."""
        ...

    def read_flags(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> dict[str, object]:
        """The catalogue's engine fields this command line (and environment) sets, read as the
        engine's own parser reads them at `version` (None: not known); FlagError for a flag or
        value it would stop at."""
        ...

    def cards_of(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> int | None:
        """Cards one server of it uses as this command line starts it (its own parallel sizes,
        1 where none is given); None where it takes every card its container sees."""
        ...

    def cards_flag(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> str | None:
        """The flags that set `cards_of`, as written (`--tp 2 × --dp 2`, `environment
        NUM_SHARD`); None where none is given."""
        ...

    def version_of(self, image: str | None) -> str | None:
        """The version the tag of one of its own images names; None for another image, a tag
        that names none (`latest`, `main`) or an image named by its digest alone."""
        ...

    def need_bytes(self, seat: Seat, card: EngineCard) -> int:
        """Bytes the seat will hold on this card once up."""
        ...

    def gate(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """The engine's own start-up refusal on this card, or its spill; None when it starts."""
        ...

    def kv_capacity(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """Rule `kv_capacity`: its KV cache here holds less than one full request."""
        ...

    def pinned(self, spec: EngineSpec) -> bool:
        """True when its fields fix its bytes (a share-of-free engine that is not pinned is
        `unbounded` beside anything else on its card)."""
        ...

    def pin_flags(self, seat: Seat, card: EngineCard) -> tuple[str, ...]:
        """Flags that make the engine take the seat's declared bytes on this card."""
        ...

    def kv_tokens(self, seat: Seat, card: EngineCard) -> int | None:
        """Tokens its KV cache will hold here; None where the profile does not say."""
        ...

    def learn(self, lines: Sequence[str], first_line: int = 1) -> Learned:
        """The figures of one start-up of its own log (`lines`, the first numbered
        `first_line` in the whole log: `last_start_up` picks them)."""
        ...

    def request_rule(self, spec: EngineSpec, *, propose: bool) -> GateRule:
        """Its util request as declared (`propose`: the plan proposes one where none is)."""
        ...

    def request_flags(
        self, util: Decimal | None, kv_cache_bytes: int | None, *, proposed: bool
    ) -> tuple[str, ...]:
        """Start flags for a util request and a pinned KV cache."""
        ...

    def unbounded_why(self, spec: EngineSpec) -> Note:
        """Why, as declared, it is unbounded (a note in rule `unbounded`'s facts)."""
        ...

    def pin_hint(self) -> str:
        """The flags that would bound it, as one phrase."""
        ...

    def flag_of(self, field: str) -> str:
        """The command-line flag a catalogue field of this engine stands for."""
        ...

    def worker(self, argv: Sequence[str]) -> bool:
        """True for a worker process it starts whose command line is the same in every server of
        it: found by its server's line (an ancestor's), never by its own."""
        ...

    def volatile_flags(self, argv: Sequence[str]) -> tuple[str, ...]:
        """Flags whose values it picks anew at every start (a random port): no `match` names them."""
        ...

    def model_name(self, argv: Sequence[str], files: HostFiles | None) -> ModelName | None:
        """The model this command line serves as its own model store names it (`init`'s seat
        name); None where its flags name it as they are (init reads them) or nothing does."""
        ...

    def server_args(
        self,
        argv: Sequence[str],
        image: str | None,
        command: Sequence[str],
        *,
        entrypoint: bool,
        declared: bool,
        expand: Expand = str,
    ) -> ServerArgs | None:
        """Its own arguments in a compose service's command (`argv`: entrypoint and command;
        `entrypoint`: the service sets one; `declared`: `x-gpuplan-engine` names it), for an
        engine whose service compose reads flag by flag (`read_service`); None where the
        command does not start it so, or it is read whole (`read_flags`)."""
        ...

    def read_service(
        self,
        args: Sequence[str],
        positional: bool,
        env: Mapping[str, str],
        version: str | None,
        fail: Fail,
    ) -> ServiceFlags:
        """What the arguments `server_args` found set, as its parser reads them at `version`;
        `fail(flag, why)` for a flag or value it would stop at."""
        ...

    def one_byte_kv(self, dtype: str | None) -> bool:
        """True for a KV cache dtype of one byte per element, which halves the bytes per token
        of a profile learnt at the model's 16-bit dtype."""
        ...

    def learn_profile(
        self,
        lines: Sequence[str],
        first_line: int,
        source: str,
        *,
        declared_util: Decimal | None,
        cuda_total: int | None,
    ) -> tuple[Any, Any]:
        """For an engine whose `log_reader` is its own (`vllm-log`): the profile block its log
        gives, each figure with its line and precision, and the figure of the card's size the
        log prints (None where it prints none); BadInputError naming the line it looked for."""
        ...


class ByCommand:
    """The default `recognise`: one of the engine's `commands` in argv, or one of its `images`;
    and the default `version_of`: its images' tags read by `version_tag`."""

    commands: tuple[str, ...]
    images: tuple[str, ...]
    version_tag: re.Pattern[str]

    def recognise(self, argv: Sequence[str], image: str | None = None) -> bool:
        """One of its commands (`command_in`), or an image of its own."""
        return any(command_in(argv, command) for command in self.commands) or image_matches(
            image, self.images
        )

    def version_of(self, image: str | None) -> str | None:
        """Its image's tag read by its `version_tag` (`image_version`)."""
        return image_version(image, self.images, self.version_tag)[1]

    # Command words of the worker processes it starts whose line is the same in every server.
    workers: tuple[str, ...] = ()

    def worker(self, argv: Sequence[str]) -> bool:
        """One of its `workers` commands (`command_in`)."""
        return any(command_in(argv, command) for command in self.workers)

    def volatile_flags(self, argv: Sequence[str]) -> tuple[str, ...]:
        """None: the flags it is started with are its user's."""
        return ()

    def model_name(self, argv: Sequence[str], files: HostFiles | None) -> ModelName | None:
        """None: its model flags name the model as they are."""
        return None

    config_flag: str | None = None
    variables: tuple[str, ...] = ()

    def server_args(
        self,
        argv: Sequence[str],
        image: str | None,
        command: Sequence[str],
        *,
        entrypoint: bool,
        declared: bool,
        expand: Expand = str,
    ) -> ServerArgs | None:
        """None: compose reads its whole command line (`read_flags`)."""
        return None

    def read_service(
        self,
        args: Sequence[str],
        positional: bool,
        env: Mapping[str, str],
        version: str | None,
        fail: Fail,
    ) -> ServiceFlags:
        """Not asked: `server_args` finds none of its arguments."""
        raise NotImplementedError(f"{type(self).__name__} is read whole, by read_flags")

    def one_byte_kv(self, dtype: str | None) -> bool:
        """False: it has no KV dtype flag gpuplan reads."""
        return False

    def learn_profile(
        self,
        lines: Sequence[str],
        first_line: int,
        source: str,
        *,
        declared_util: Decimal | None,
        cuda_total: int | None,
    ) -> tuple[Any, Any]:
        """Not asked: its log is read by its own `learn`."""
        raise NotImplementedError(f"{type(self).__name__} is learnt by its own learn")


class NoRequest(ByCommand):
    """What an engine without a util request answers (every engine but vLLM)."""

    util_request = False
    title: str
    # No start-up marks: a log is read whole (an engine without a log reader keeps these).
    start_up: StartUpMarks = NO_MARKS
    # Its parallel sizes' flags, one tuple of spellings per size (tensor, pipeline): the cards
    # one server takes are their product, 1 where none is given.
    parallel_flags: tuple[tuple[str, ...], ...] = ()

    # Its command-line parser, where it has flags gpuplan reads (`WholeNames`).
    parser: WholeNames | None = None

    def parallel_sizes(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> list[tuple[int, str]]:
        """Each parallel size given, with how it was written (`--tp_size 2`)."""
        if self.parser is None:
            return []
        found = self.parser.values(argv)
        sizes: list[tuple[int, str]] = []
        for spellings in self.parallel_flags:
            size = self.parser.number(found, spellings[0])
            if size is not None:
                sizes.append((int(size[0]), f"{size[1]} {size[0]}"))
        return sizes

    def cards_of(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> int | None:
        """The product of its parallel sizes (`parallel_flags`), each 1 where not given."""
        cards = 1
        for size, _ in self.parallel_sizes(argv, env, version):
            cards *= size
        return cards

    def cards_flag(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> str | None:
        """Its parallel flags as written, joined by ×."""
        return " × ".join(text for _, text in self.parallel_sizes(argv, env, version)) or None

    def request_rule(self, spec: EngineSpec, *, propose: bool) -> GateRule:
        """None: it starts on no request gpuplan sizes."""
        return NO_REQUEST

    def request_flags(
        self, util: Decimal | None, kv_cache_bytes: int | None, *, proposed: bool
    ) -> tuple[str, ...]:
        """No util flags."""
        return ()

    def unbounded_why(self, spec: EngineSpec) -> Note:
        """Its fields fix none of its bytes."""
        return note("no_pin", engine=self.title)

    def pin_hint(self) -> str:
        """Its pin flags, by name (each engine says which)."""
        return "the flags gpuplan prints for it"

    def flag_of(self, field: str) -> str:
        """A catalogue field is its flag in snake_case (DESIGN.md, Engines)."""
        return "--" + field.replace("_", "-")


# --- shared arithmetic -------------------------------------------------------------

# The resident a seat nobody declared is judged on: a compose service that no catalogue seat
# describes (placement/fit/beside.py `unseated_seat`). A lower bound, so a refusal on it is
# certain; no pin is sized from it.
UNDECLARED_RESIDENT_BYTES = 1


def declared_resident(seat: Seat) -> bool:
    """False for a seat judged on the undeclared lower bound: its bytes size no pin."""
    return seat.resident_bytes > UNDECLARED_RESIDENT_BYTES


def fraction(value: float | str | Decimal) -> Decimal:
    """A fraction as an exact Decimal from its shortest decimal text (0.3 → Decimal('0.3'))."""
    if isinstance(value, Decimal):
        return value
    # repr of a float is its shortest round-tripping text: 0.11, not 0.11000000000000000056.
    return Decimal(repr(value) if isinstance(value, float) else value)


def declared_text(value: float | str | Decimal) -> str:
    """A declared fraction as flag text, as the catalogue says it (0.3 → '0.3'): a pin the
    seat declares is printed as it was judged, never rounded to a proposal's three decimals."""
    return format(fraction(value), "f")


def ceil_times(share: Decimal, amount: int) -> int:
    """ceil(share × amount), exact."""
    product = Fraction(share) * amount
    return -(-product.numerator // product.denominator)


def floor_times(share: Decimal, amount: int) -> int:
    """floor(share × amount), exact."""
    product = Fraction(share) * amount
    return product.numerator // product.denominator


def smallest_share(target: int, amount: int) -> Decimal | None:
    """Smallest 3-decimal share s in (0, 1] with floor(s × amount) ≥ target; None if none."""
    if amount <= 0:
        return None
    # floor(k·A/1000) ≥ n  ⇔  k·A/1000 ≥ n (n whole)  ⇔  k ≥ 1000·n/A: the ceiling is the answer.
    k = max(1, -(-1000 * max(0, target) // amount))
    return Decimal(k) * STEP if k <= 1000 else None


def largest_share(limit: int, amount: int) -> Decimal | None:
    """Largest 3-decimal share s in (0, 1] with ceil(s × amount) ≤ limit; None if none."""
    if amount <= 0 or limit <= 0:
        return None
    # ceil(k·T/1000) ≤ n  ⇔  k·T/1000 ≤ n  ⇔  k ≤ 1000·n/T
    k = min(1000, 1000 * limit // amount)
    return Decimal(k) * STEP if k >= 1 else None


def share_text(share: Decimal) -> str:
    """A proposed share as flag text, three decimals ('0.300')."""
    return format(share.quantize(STEP), "f")


def weights_of(seat: Seat) -> int | None:
    """Model weights on one card: the profile's, else the seat's own `weights`."""
    profile = seat.engine.profile
    if profile is not None:
        return profile.weights_bytes
    return seat.weights_bytes


def kv_room(seat: Seat, card: EngineCard) -> int | None:
    """Bytes the declared resident leaves for KV: resident − weights − non_kv − context."""
    profile = seat.engine.profile
    if profile is None:
        return None
    return (
        seat.resident_bytes
        - profile.weights_bytes
        - profile.non_kv_bytes
        - profile.cuda_graphs_bytes
        - card.cuda_context_bytes
    )


def room_tokens(seat: Seat, card: EngineCard) -> int | None:
    """Tokens the declared resident's KV room holds (kv_room ÷ c, rounded down); None without a
    profile or when the room is under one token. The token pin every engine's pin_flags print."""
    room = kv_room(seat, card)
    profile = seat.engine.profile
    if room is None or profile is None or room < profile.kv_bytes_per_token:
        return None
    return room // profile.kv_bytes_per_token


def free_after_load(seat: Seat, card: EngineCard) -> int | None:
    """F0 − weights − non_kv − cuda_graphs: what a share-of-free engine reads free once its model
    and warm-up are in (F0 after its own context); None without a profile."""
    profile = seat.engine.profile
    if profile is None:
        return None
    return (
        card.engine_free_bytes
        - profile.weights_bytes
        - profile.non_kv_bytes
        - profile.cuda_graphs_bytes
    )


def tokens_in(seat: Seat, kv_bytes: int | None) -> int | None:
    """KV bytes ÷ the profile's per-token bytes, rounded down; None without either."""
    profile = seat.engine.profile
    if kv_bytes is None or profile is None:
        return None
    return kv_bytes // profile.kv_bytes_per_token


def share_or(value: float | None, default: Decimal) -> Decimal:
    """A declared fraction as an exact Decimal, else the engine's default."""
    return default if value is None else fraction(value)


def profile_need(seat: Seat, card: EngineCard, kv_bytes: int) -> int:
    """max(resident, weights + non_kv + KV + context): a profile never lowers the resident."""
    profile = seat.engine.profile
    if profile is None:
        return seat.resident_bytes
    parts = (
        profile.weights_bytes
        + profile.non_kv_bytes
        + profile.cuda_graphs_bytes
        + max(0, kv_bytes)
        + card.cuda_context_bytes
    )
    return max(seat.resident_bytes, parts)


def short_context(
    seat: Seat, tokens: int | None, wanted: int | None, said: str, **named: RefusalFact
) -> Refusal | None:
    """Rule `kv_capacity` when `tokens` (what its KV cache holds for one request) is below
    `wanted` (the request it must hold); the bytes are tokens × the profile's per-token bytes."""
    profile = seat.engine.profile
    if tokens is None or wanted is None or profile is None or tokens >= wanted:
        return None
    per = profile.kv_bytes_per_token
    found = (("tokens", tokens), ("wanted", wanted), *named.items())
    return Refusal("kv_capacity", wanted * per, tokens * per, said, found)


def fitted_need(seat: Seat, card: EngineCard, room: int) -> int:
    """A self-fitting engine's bytes: its resident, at most the `room` it lets itself load on the
    card plus its context."""
    return min(seat.resident_bytes, room + card.cuda_context_bytes)


def spill(
    seat: Seat, card: EngineCard, room: int, said: str, **named: RefusalFact
) -> Refusal | None:
    """Rule `spill` when the resident less its context is over `room`: the rest runs on the CPU
    (need: what it loads; short: the bytes that leave the card)."""
    wanted = seat.resident_bytes - card.cuda_context_bytes
    if wanted <= room:
        return None
    return Refusal("spill", wanted, room, said, tuple(named.items()))


# --- reading command lines ---------------------------------------------------------

# A `\` before a line end continues the line; a folded scalar (`command: >`) leaves it before a space.
CONTINUATION = re.compile(r"\\[ \t]*(?:\r?\n|(?=[ \t]))")


def split_command(text: str) -> list[str]:
    r"""A command string split as compose splits it (shell words), `\` continuations joined."""
    return shlex.split(CONTINUATION.sub(" ", text))


def parse_util(text: str) -> str:
    """A util request's text (`--gpu-memory-utilization`) checked to be a number in (0, 1];
    returned as written."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation as exc:
        raise ValueError(
            f"{text!r} is not a number; write a fraction in (0, 1], e.g. 0.11"
        ) from exc
    if not value.is_finite() or not 0 < value <= 1:
        raise ValueError(
            f"{text!r} is not in (0, 1]; vLLM's gate needs a share of the card, e.g. 0.11"
        )
    return text.strip()


@dataclass(frozen=True)
class WholeNames:
    """A parser that takes whole flag names only (clap, click, llama.cpp's own): an abbreviation
    of a flag, or a spelling it does not read, stops the engine at start.

    `flags` are the flags gpuplan reads, one tuple of spellings each (the first names it);
    `underscores`: `--a_b` is `--a-b` (llama.cpp); `equals`: `--flag=value` is read (clap,
    click; llama.cpp reads no `=`); `repeat`: a second use of a flag stops it (clap 4's
    ArgAction::Set) instead of the last one winning.
    """

    engine: str  # as a message names it: "TGI's launcher (clap)"
    flags: tuple[tuple[str, ...], ...]
    underscores: bool = False
    equals: bool = True
    repeat: bool = False

    def _spellings(self) -> dict[str, str]:
        return {name: names[0] for names in self.flags for name in names}

    def values(self, argv: Sequence[str]) -> dict[str, tuple[str, str]]:
        """Each flag given → (its last value, the flag as written); FlagError for a word the
        parser would stop at: an abbreviation or another spelling of one of `flags`, a flag
        with no value, or (with `repeat`) a flag given twice."""
        spellings = self._spellings()
        found: dict[str, tuple[str, str]] = {}
        i = 0
        while i < len(argv):
            word = argv[i]
            i += 1
            if not word.startswith("-") or word in ("-", "--"):
                continue
            name, sep, value = word.partition("=") if self.equals else (word, "", "")
            read = (
                "--" + name[2:].replace("_", "-") if self.underscores and name[:2] == "--" else name
            )
            if read not in spellings:
                self._near(word, read, spellings)
                continue
            flag = spellings[read]
            if not sep:
                if i >= len(argv) or (argv[i].startswith("-") and not _NUMBER.match(argv[i])):
                    raise FlagError(name, f"needs a value: {self.engine} stops at start")
                value, i = argv[i], i + 1
            if flag in found and self.repeat:
                raise FlagError(
                    name,
                    f"is given twice: {self.engine} stops at start (\"the argument '{flag} "
                    f"<{flag.lstrip('-').replace('-', '_').upper()}>' cannot be used multiple "
                    'times")',
                )
            found[flag] = (value, name)
        return found

    def _near(self, word: str, read: str, spellings: Mapping[str, str]) -> None:
        """FlagError where `word` would be taken for one of our flags but the engine does not
        read it so: an abbreviation, or `_` for `-` (or the other way)."""
        name = read.partition("=")[0]
        if "=" in read and not self.equals and name in spellings:
            raise FlagError(
                word,
                f'{self.engine} reads no --flag=value ("invalid argument: {word}"): write '
                f"{name} {read.partition('=')[2]}",
            )
        if len(name) < 4 or not name.startswith("--"):
            return
        folded = name.replace("_", "-")
        for spelling in spellings:
            if spelling.startswith(name) or spelling.replace("_", "-") == folded:
                raise FlagError(
                    word.partition("=")[0],
                    f"is not {spelling}: {self.engine} takes whole names only, spelled as it "
                    "spells them, and stops at start on any other",
                )

    def number(
        self,
        found: Mapping[str, tuple[str, str]],
        flag: str,
        env: Mapping[str, str] | None = None,
        variable: str | None = None,
        *,
        kind: str = "count",
    ) -> tuple[Decimal | int, str] | None:
        """A flag's value (else its environment variable's) read as a `count` (whole, ≥ 1) or a
        `fraction` (in (0, 1]), with where it came from; FlagError for a value it stops at."""
        if flag in found:
            text, where = found[flag]
        elif env is not None and variable is not None and variable in env:
            text, where = env[variable], f"environment {variable}"
        else:
            return None
        return read_number(text, where, self.engine, kind=kind), where


_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def read_number(text: str, where: str, engine: str, *, kind: str) -> Decimal | int:
    """`text` as a `count` (a whole number ≥ 1) or a `fraction` (a number in (0, 1]);
    FlagError naming `where` for what the engine would stop at (or, for a fraction outside
    (0, 1], could not start with: DESIGN.md, "Flags as the engine's own parser reads them")."""
    value = text.strip()
    if kind == "count":
        if not re.fullmatch(r"\+?\d+", value):
            raise FlagError(where, f"{text!r} is not a whole number: {engine} stops at start")
        number = int(value)
        if number < 1:
            raise FlagError(where, f"{number} is below 1, which {engine} cannot start with")
        return number
    try:
        share = Decimal(value)
    except InvalidOperation:
        raise FlagError(where, f"{text!r} is not a number: {engine} stops at start") from None
    if not share.is_finite() or not 0 < share <= 1:
        raise FlagError(
            where, f"{text} is not a fraction in (0, 1]: {engine} cannot take that share of a card"
        )
    return share


def flag_value(argv: Sequence[str], *names: str) -> str | None:
    """The value of the last `--name V` or `--name=V` among `names` in argv; None if absent."""
    found: str | None = None
    for i, word in enumerate(argv):
        for name in names:
            if word == name and i + 1 < len(argv):
                found = argv[i + 1]
            elif word.startswith(name + "="):
                found = word[len(name) + 1 :]
    return found


def as_int(text: str | None) -> int | None:
    """A whole number from flag text; None for absent or unreadable text."""
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def image_matches(image: str | None, names: Sequence[str]) -> bool:
    """True when an image reference names one of `names` (registry prefix and tag aside)."""
    if not image:
        return False
    lowered = image.lower()
    return any(name in lowered for name in names)


# --- reading image references ------------------------------------------------------

# A tag no engine's `version_tag` reads: the engine names no version in its image tags.
NO_VERSION_TAG = re.compile(r"(?!)")


def split_image(image: str) -> tuple[str, str | None]:
    """(repository, tag) of an image reference as docker reads it: `[HOST[:PORT]/]PATH[:TAG][@DIGEST]`.

    The registry host is left out (a first part with a `.` or a `:`, or `localhost`), so
    `nvcr.io/nvidia/tensorrt-llm/release:1.0.0` is ('nvidia/tensorrt-llm/release', '1.0.0');
    a digest is not a tag (`…/llama.cpp@sha256:…` has none).
    """
    reference = image.strip().split("@", 1)[0]
    name, tag = reference, None
    if reference.rfind(":") > reference.rfind("/"):
        name, _, tag = reference.rpartition(":")
    parts = name.lower().split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    return "/".join(parts), tag or None


def image_version(
    image: str | None, repositories: Sequence[str], version_tag: re.Pattern[str]
) -> tuple[bool, str | None]:
    """(is it one of `repositories`' images, the version its tag names).

    A repository counts with any path below it (`nvidia/tensorrt-llm` holds `…/release`); the
    version is group `version` of `version_tag` matching the whole tag, else None (`latest`,
    `main`, `server-cuda`, or no tag but a digest).
    """
    if not image:
        return False, None
    repository, tag = split_image(image)
    ours = any(repository == name or repository.startswith(name + "/") for name in repositories)
    if not ours or tag is None:
        return ours, None
    found = version_tag.fullmatch(tag)
    return True, found.group("version") if found is not None else None


def command_in(argv: Sequence[str], command: str) -> bool:
    """True when argv runs `command`: `python -m MODULE` by a word starting with MODULE,
    `BINARY [WORD…]` by BINARY (any path) with each WORD among argv's words, and a process
    title `PREFIX::` (what setproctitle leaves in /proc/PID/cmdline) by argv's first word."""
    words = command.split()
    if command.endswith("::"):
        return bool(argv) and argv[0].startswith(command)
    if words[:2] == ["python", "-m"]:
        return any(word.startswith(words[2]) for word in argv)
    return argv_mentions(argv, words[0]) and all(word in argv for word in words[1:])


def argv_mentions(argv: Sequence[str], *words: str) -> bool:
    """True when a word of argv is, or ends with `/`, one of `words` (a path to a binary)."""
    for word in argv:
        base = word.rsplit("/", 1)[-1]
        if word in words or base in words:
            return True
    return False


# --- reading logs --------------------------------------------------------------------

_COMPOSE_PREFIX = re.compile(r"^[\w.-]+\s+\|\s?")
_UNITS = {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB}


def strip_prefix(line: str) -> str:
    """A log line without a `docker compose logs` prefix (`voices-1  | `)."""
    return _COMPOSE_PREFIX.sub("", line, count=1)


def size_bytes(number: str, unit: str) -> int:
    """'11.5' 'GiB' → bytes, rounded down (SGLang's printed 'GB' is 2**30: its reader says 'GiB')."""
    exact = Decimal(number) * _UNITS[unit]
    return int(exact.to_integral_value(rounding=ROUND_FLOOR))


@dataclass
class LogScan:
    """First match of each pattern over a log (engines print some lines once per rank: the
    first is rank 0's, card 0's); the last for the patterns named in `last` (a figure an engine
    prints again once it is final, as TensorRT-LLM's KV cache after its estimation run)."""

    found: dict[str, tuple[re.Match[str], int, str]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        lines: Sequence[str],
        patterns: Mapping[str, re.Pattern[str]],
        last: Collection[str] = (),
        first_line: int = 1,
    ) -> LogScan:
        """Scan every line for every pattern; keep the first match of each (the last of those
        named in `last`). `first_line` is the number of `lines[0]` in the whole log."""
        scan = cls()
        for number, raw in enumerate(lines, start=first_line):
            line = strip_prefix(raw)
            for name, pattern in patterns.items():
                if name in scan.found and name not in last:
                    continue
                match = pattern.search(line)
                if match is not None:
                    scan.found[name] = (match, number, raw.rstrip("\n"))
        return scan

    def figure(self, name: str, value: int) -> LogFigure | None:
        """A Figure for a pattern that matched, with its line."""
        if name not in self.found:
            return None
        _, number, line = self.found[name]
        return LogFigure(name, value, number, line)

    def number(self, name: str, index: int = 1) -> LogFigure | None:
        """A Figure of a pattern's integer group, or None when the pattern did not match."""
        text = self.group(name, index)
        return None if text is None else self.figure(name, int(text))

    def size(self, name: str, unit: str, index: int = 1) -> LogFigure | None:
        """A Figure of a pattern's size group in `unit` (`size_bytes`), or None when the pattern
        did not match."""
        text = self.group(name, index)
        return None if text is None else self.figure(name, size_bytes(text, unit))

    def group(self, name: str, index: int | str = 1) -> str | None:
        """A group of a pattern's match, or None when the pattern did not match."""
        if name not in self.found:
            return None
        return self.found[name][0].group(index)


# --- one start-up of a log -------------------------------------------------------------


@dataclass(frozen=True)
class StartUp:
    """The start-up of a log `learn` reads: its lines (up to its ready line) and where it stands.

    `first_line` is the number of `lines[0]` in the whole log; `count` the start-ups the log
    holds; `complete` whether this one reached its ready line; `later` the first line of a
    later start-up that did not (it was left aside), if any; `log_lines` the lines read.
    """

    lines: tuple[str, ...]
    first_line: int
    count: int
    complete: bool
    later: int | None
    log_lines: int


def _marks(patterns: Sequence[re.Pattern[str]], line: str) -> bool:
    return any(pattern.search(line) for pattern in patterns)


def last_start_up(lines: Iterable[str], marks: StartUpMarks) -> StartUp:
    """The last complete start-up of a log (`docker compose logs` after a restart holds several),
    else its last start-up that printed a figure; lines read one at a time, each start-up kept
    only up to its ready line.

    A `begins` line opens a start-up once the current one has printed a figure, its ready line
    or a failure; lines before the first `begins` belong to the first start-up unless they
    print a figure themselves (a log cut after its first start-up began).
    """
    done: tuple[tuple[str, ...], int] | None = None  # the last complete start-up so far
    moved_last: tuple[tuple[str, ...], int] | None = None  # the last that printed a figure
    current: list[str] = []
    first, count, moved, ready = 1, 1, False, False
    number = 0
    for number, raw in enumerate(lines, start=1):
        line = strip_prefix(raw.rstrip("\r\n"))
        if moved and _marks(marks.begins, line):
            if ready:
                done = (tuple(current), first)
            moved_last = (tuple(current), first)
            current, first, count, moved, ready = [], number, count + 1, False, False
        if ready:
            continue  # its figures are all printed before it says it serves
        current.append(raw.rstrip("\r\n"))
        if _marks(marks.ready, line):
            ready = moved = True
        elif not moved and (_marks(marks.figures, line) or _marks(marks.failed, line)):
            moved = True
    if ready:
        return StartUp(tuple(current), first, count, True, None, number)
    if done is not None:
        return StartUp(done[0], done[1], count, True, first, number)
    if moved or moved_last is None:
        return StartUp(tuple(current), first, count, False, None, number)
    # The last start-up printed nothing yet: the one before it is the last with figures.
    return StartUp(moved_last[0], moved_last[1], count, False, first, number)
