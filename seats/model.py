"""The catalogue as frozen pydantic models: hosts, held reserves and seats (DESIGN.md, Catalogue).

Field-level rules live here (types, units, ranges); rules that relate fields of different
objects (names unique, hosts exist, reserves fit their card) live in `seats.rules`.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from seats.names import check_name
from seats.units import BYTES_PATTERN, parse_bytes


def _bytes(value: object) -> int:
    return parse_bytes(value)


def _positive_bytes(value: object) -> int:
    return parse_bytes(value, allow_zero=False)


def _card_or_bytes(value: object) -> object:
    # One validator for the union, so a bad amount says what is wrong with it rather
    # than pydantic's "Input should be 'card'" from the other branch.
    if value == "card":
        return value
    if isinstance(value, str) and value.strip().lower() in ("card", "whole", "all"):
        raise ValueError(f"write the whole card as `card` (lower case), got {value!r}")
    return parse_bytes(value, allow_zero=False)


def _bytes_schema(minimum: int) -> WithJsonSchema:
    # The validator reads strings like "10740 MiB"; editors must accept them too.
    return WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": minimum},
                {"type": "string", "pattern": BYTES_PATTERN},
            ]
        }
    )


Bytes = Annotated[int, BeforeValidator(_bytes), _bytes_schema(0)]
PositiveBytes = Annotated[int, BeforeValidator(_positive_bytes), _bytes_schema(1)]
ReserveBytes = Annotated[
    Literal["card"] | int,
    BeforeValidator(_card_or_bytes),
    WithJsonSchema(
        {
            "anyOf": [
                {"const": "card"},
                {"type": "integer", "minimum": 1},
                {"type": "string", "pattern": BYTES_PATTERN},
            ]
        }
    ),
]
CardIndex = Annotated[int, Field(ge=0)]
# A seat, reserve, host or adapter name: no control characters, line breaks or bidi overrides.
Name = Annotated[str, AfterValidator(check_name)]


@cache
def match_pattern(regex: str) -> re.Pattern[str]:
    """A seat's `match` regex compiled once per process (re's own cache holds 512; a fleet has more)."""
    return re.compile(regex)


_FROZEN = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
# Models validated only inside a parent (the catalogue, a seat) need no validator of their own
# to load a catalogue: the parent's holds theirs. Deferred, they build one only if used alone
# (a `Reserve` in `plan --reserve`); each own build is ~0.5 ms of every command's start-up.
_NESTED = ConfigDict(**_FROZEN, defer_build=True)


class Host(BaseModel):
    """One machine with `cards` GPUs; the per-host figures the fit arithmetic needs."""

    model_config = _NESTED

    cards: int = Field(ge=1, le=64)
    card_total_bytes: PositiveBytes | None = Field(
        default=None,
        alias="card_total",
        description="NVML total per card; a snapshot that disagrees is an error",
    )
    cuda_context_bytes: Bytes = Field(
        default=0,
        alias="cuda_context",
        description="bytes a new engine process takes before its gate reads free memory",
    )
    margin_bytes: Bytes = Field(
        default=0, alias="margin", description="never planned away on any card of this host"
    )


class Reserve(BaseModel):
    """Capacity held on one card for the named seats only."""

    model_config = _NESTED

    name: Name = Field(min_length=1)
    host: Name
    gpu: int = Field(ge=0)
    amount_bytes: ReserveBytes = Field(
        alias="bytes", description="'card' for the whole card, or an amount"
    )
    for_: tuple[Name, ...] = Field(alias="for", min_length=1)


class Adapter(BaseModel):
    """One LoRA adapter; `persisted` means it is in --lora-modules and survives a recreate."""

    model_config = _NESTED

    name: Name = Field(min_length=1)
    persisted: bool = True


class Lora(BaseModel):
    """The LoRA block of a carrier seat: slot counts fixed at start-up, and its adapters."""

    model_config = _NESTED

    max_loras: int = Field(default=1, ge=1)
    max_lora_rank: int = Field(default=16, ge=1)
    adapters: tuple[Adapter, ...] = ()

    @field_validator("adapters")
    @classmethod
    def _names_unique(cls, value: tuple[Adapter, ...]) -> tuple[Adapter, ...]:
        # The adapter name is the request's `model` field: two of one name cannot both serve.
        names = [adapter.name for adapter in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"adapter name {twice[0]!r} appears twice")
        return value


class Profile(BaseModel):
    """What a vLLM seat's model takes per card, as vLLM's start-up log prints it (DESIGN.md, second refusal).

    `gpuplan learn` writes it from a log or a model's config.json; `fit`'s rule `kv_capacity`
    and the resident drawn from it read it.
    """

    model_config = _NESTED

    weights_bytes: Bytes = Field(alias="weights", description="model weights on each card")
    non_kv_bytes: Bytes = Field(
        alias="non_kv",
        description="everything else vLLM keeps inside its request: activation peak, "
        "non-torch memory, CUDA graphs",
    )
    cuda_graphs_bytes: Bytes = Field(
        default=0,
        alias="cuda_graphs",
        description="memory vLLM holds outside its request: CUDA graphs captured after the KV "
        "cache is sized (vLLM before 0.21; from 0.21 they are inside non_kv)",
        # Left out of dumps at 0: recorded decisions of profiles without it stay as they were.
        exclude_if=lambda value: value == 0,
    )
    kv_bytes_per_token: int = Field(
        ge=1,
        description="KV cache bytes one token takes on each card "
        "(2 × layers × KV heads × head dim × dtype bytes, ÷ tensor-parallel size)",
    )
    max_model_len: int = Field(ge=1, description="--max-model-len: tokens one sequence may hold")

    @field_validator("kv_bytes_per_token", "max_model_len", mode="before")
    @classmethod
    def _whole_number(cls, value: object) -> object:
        # A count, not a size: '147456 B' or 1.5 would hide a unit slip.
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be a whole number of at least 1, got {value!r}")
        if value < 1:
            raise ValueError(f"must be at least 1, got {value}")
        return value


EngineKind = Literal["vllm", "sglang", "tgi", "trtllm", "llamacpp", "ollama", "other"]

# Each engine's own fields (catalogue keys, aliases where they differ): a field of another
# engine is refused naming it, never ignored (an SGLang fraction on a TGI seat means nothing).
ENGINE_FIELDS: dict[str, frozenset[str]] = {
    "vllm": frozenset({"gpu_memory_utilization", "kv_cache_memory", "kv_cache_bytes"}),
    "sglang": frozenset({"mem_fraction_static", "max_total_tokens", "context_length"}),
    "tgi": frozenset({"cuda_memory_fraction", "max_total_tokens", "max_input_tokens"}),
    "trtllm": frozenset({"free_gpu_memory_fraction", "max_tokens", "max_seq_len"}),
    "llamacpp": frozenset({"n_gpu_layers", "ctx_size", "fit", "parallel"}),
    "ollama": frozenset({"gpu_overhead", "gpu_overhead_bytes", "num_gpu", "num_ctx"}),
    "other": frozenset(),
}
_COMMON_FIELDS = frozenset({"kind", "version", "profile"})
_OF_FREE = ("mem_fraction_static", "free_gpu_memory_fraction")
_FRACTIONS = (
    "gpu_memory_utilization",
    "mem_fraction_static",
    "cuda_memory_fraction",
    "free_gpu_memory_fraction",
)


def _absent(value: object) -> bool:
    # The new engines' fields are left out of dumps when unset, so that the digests of
    # recorded decisions (and catalogues dumped before them) stay as they were.
    return value is None


def _fraction(description: str) -> object:
    return Field(default=None, gt=0, le=1, description=description, exclude_if=_absent)


def _count(description: str, minimum: int = 1) -> object:
    return Field(default=None, ge=minimum, description=description, exclude_if=_absent)


class Engine(BaseModel):
    """How the seat's server starts: its engine kind, version and its own memory flags.

    Each kind's fields are its own flags in snake_case (DESIGN.md, Engines); what they mean
    for a card is `placement.fit.engines`' business, not the catalogue's.
    """

    model_config = _FROZEN

    kind: EngineKind = "other"
    version: str | None = Field(default=None, description='quote it: "0.11.0"')
    gpu_memory_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="--gpu-memory-utilization: a request against TOTAL memory",
    )
    kv_cache_bytes: PositiveBytes | None = Field(
        default=None, alias="kv_cache_memory", description="vllm: --kv-cache-memory-bytes"
    )
    mem_fraction_static: float | None = _fraction(  # type: ignore[assignment]
        "sglang: --mem-fraction-static, a share of the memory free when it starts"
    )
    max_total_tokens: int | None = _count(  # type: ignore[assignment]
        "sglang: --max-total-tokens (the KV pool in tokens); tgi: --max-total-tokens "
        "(one request's input + output)"
    )
    context_length: int | None = _count("sglang: --context-length")  # type: ignore[assignment]
    cuda_memory_fraction: float | None = _fraction(  # type: ignore[assignment]
        "tgi: --cuda-memory-fraction, a share of the card's total memory"
    )
    max_input_tokens: int | None = _count("tgi: --max-input-tokens")  # type: ignore[assignment]
    free_gpu_memory_fraction: float | None = _fraction(  # type: ignore[assignment]
        "trtllm: kv_cache_config.free_gpu_memory_fraction, a share of what is free after "
        "its weights and activations"
    )
    max_tokens: int | None = _count(  # type: ignore[assignment]
        "trtllm: kv_cache_config.max_tokens, the KV cache in tokens"
    )
    max_seq_len: int | None = _count("trtllm: --max_seq_len")  # type: ignore[assignment]
    n_gpu_layers: int | None = _count(  # type: ignore[assignment]
        "llamacpp: -ngl, layers on the card (turns --fit off)", minimum=0
    )
    ctx_size: int | None = _count("llamacpp: -c, context of all slots", minimum=0)  # type: ignore[assignment]
    fit: bool | None = Field(
        default=None, description="llamacpp: --fit on|off (on by default)", exclude_if=_absent
    )
    parallel: int | None = _count("llamacpp: -np, slots sharing ctx_size")  # type: ignore[assignment]
    gpu_overhead_bytes: Bytes | None = Field(
        default=None,
        alias="gpu_overhead",
        description="ollama: OLLAMA_GPU_OVERHEAD per card",
        exclude_if=_absent,
    )
    num_gpu: int | None = _count("ollama: num_gpu, layers on the card", minimum=0)  # type: ignore[assignment]
    num_ctx: int | None = _count("ollama: num_ctx, context per request")  # type: ignore[assignment]
    profile: Profile | None = Field(
        default=None,
        description="the model's bytes per card (from `gpuplan learn`)",
        # Left out of dumps when absent: recorded decisions of seats without one stay as they were.
        exclude_if=lambda value: value is None,
    )

    @model_validator(mode="before")
    @classmethod
    def _fields_of_its_kind(cls, data: object) -> object:
        # Refused by name: a flag of another engine would otherwise be carried and ignored.
        if not isinstance(data, dict):
            return data
        kind = data.get("kind", "other")
        own = ENGINE_FIELDS.get(kind) if isinstance(kind, str) else None
        if own is None:
            return data
        for key, value in data.items():
            # A null is no flag: dumps of older catalogues may carry every key.
            if key in _COMMON_FIELDS or key in own or value is None:
                continue
            owners = sorted(k for k, fields in ENGINE_FIELDS.items() if key in fields)
            if owners:
                takes = ", ".join(sorted(f for f in own if not f.endswith("_bytes"))) or "none"
                raise ValueError(
                    f"engine.{key} is a field of kind {' and '.join(owners)}, not of kind "
                    f"{kind} (kind {kind} takes: {takes})"
                )
        return data

    @field_validator("version", mode="before")
    @classmethod
    def _version_is_text(cls, value: object) -> object:
        # YAML reads 0.11 as a float and 0.11.0 as a string: a float here may have lost
        # digits already (0.10 reads as 0.1), so only the author can say what was meant.
        if isinstance(value, int | float) and not isinstance(value, bool):
            raise ValueError(
                f'YAML read the version as the number {value!r}; quote it, e.g. "0.11.0" '
                "(unquoted, 0.10 would read as 0.1)"
            )
        return value

    @field_validator(*_FRACTIONS, mode="before")
    @classmethod
    def _fraction_is_number(cls, value: object, info: ValidationInfo) -> object:
        name = info.field_name
        if isinstance(value, (bool, str)):
            raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
        if isinstance(value, int | float) and not 0 < value <= 1:
            # Every engine's fraction is a share, never a percentage: 40 is not "40 %".
            raise ValueError(
                f"{name} {value!r} is outside (0, 1]: it is a fraction of the card's "
                f"{'memory free at start' if name in _OF_FREE else 'total memory'}, e.g. 0.11"
            )
        return value

    @field_validator(
        "max_total_tokens",
        "context_length",
        "max_input_tokens",
        "max_tokens",
        "max_seq_len",
        "n_gpu_layers",
        "ctx_size",
        "parallel",
        "num_gpu",
        "num_ctx",
        mode="before",
    )
    @classmethod
    def _whole_count(cls, value: object, info: ValidationInfo) -> object:
        # A count, not a size: '8192 B' or 1.5 would hide a unit slip.
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"{info.field_name} must be a whole number, got {value!r}")
        return value

    @model_validator(mode="after")
    def _profile_needs_a_kv_cache(self) -> Engine:
        # A profile describes a model with a KV cache; `other` has none, so it would be ignored.
        if self.profile is not None and self.kind == "other":
            raise ValueError(
                "engine.profile is read for engines with a KV cache; set kind (vllm, sglang, "
                "tgi, trtllm, llamacpp or ollama)"
            )
        return self


SeatState = Literal["running", "planned", "retired"]


class Seat(BaseModel):
    """One serving process (or tensor-parallel group) with a byte-pinned need per card."""

    model_config = _FROZEN

    name: Name = Field(min_length=1)
    host: Name | None = None
    gpus: tuple[CardIndex, ...] | Annotated[int, Field(ge=1)] = Field(
        default=1, description="card list (pinned) or how many cards (to be placed)"
    )
    resident_bytes: PositiveBytes = Field(
        alias="resident", description="bytes held on each card once up"
    )
    weights_bytes: PositiveBytes | None = Field(default=None, alias="weights")
    state: SeatState = "planned"
    match: str | None = Field(default=None, description="regex on /proc/PID/cmdline")
    engine: Engine = Engine()
    lora: Lora | None = None
    exclusive: bool = False
    priority: int = 0

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus_shape(cls, value: object) -> object:
        if isinstance(value, (bool, str)):
            raise ValueError(f"gpus must be a card list like [0] or a count like 1, got {value!r}")
        if isinstance(value, int) and value < 1:
            raise ValueError("gpus must be at least 1")
        if isinstance(value, list):
            for card in value:
                if isinstance(card, int) and not isinstance(card, bool) and card < 0:
                    raise ValueError(f"card index {card} is negative; cards are numbered from 0")
            if not value:
                raise ValueError("a card list needs at least one card")
            if len(set(value)) != len(value):
                raise ValueError(f"card list {value} names a card twice")
        return value

    @field_validator("match")
    @classmethod
    def _match_compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                match_pattern(value)
            except re.error as exc:
                raise ValueError(f"match {value!r} is not a valid regex: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _weights_within_resident(self) -> Seat:
        if self.weights_bytes is not None and self.weights_bytes > self.resident_bytes:
            raise ValueError(
                f"weights ({self.weights_bytes} B) are more than resident ({self.resident_bytes} B): "
                "resident is everything the seat holds on a card, weights included"
            )
        kv = self.engine.kv_cache_bytes
        if kv is not None and kv > self.resident_bytes:
            raise ValueError(
                f"engine.kv_cache_memory ({kv} B) is more than resident ({self.resident_bytes} B): "
                "the KV cache is part of what the seat holds"
            )
        return self

    @property
    def card_count(self) -> int:
        """How many cards the seat takes."""
        return len(self.gpus) if isinstance(self.gpus, tuple) else self.gpus

    @property
    def pinned_cards(self) -> tuple[int, ...] | None:
        """The card list when the seat names one, else None."""
        return self.gpus if isinstance(self.gpus, tuple) else None


class Catalogue(BaseModel):
    """Hosts, held reserves and seats: the whole of one catalogue file."""

    model_config = _FROZEN

    hosts: dict[Name, Host] = Field(min_length=1)
    reserves: tuple[Reserve, ...] = ()
    seats: tuple[Seat, ...] = ()
    # Built on first use and kept with the seats tuple it was built from (a model_copy with
    # other seats carries the attribute along): seats by name, running seats by (host, card).
    _index: (
        tuple[tuple[Seat, ...], dict[str, Seat], dict[tuple[str, int], tuple[Seat, ...]]] | None
    ) = PrivateAttr(default=None)
    # Seats by the host they name (`on_host`), with the seats tuple it was built from.
    _hosts: tuple[tuple[Seat, ...], dict[str | None, tuple[tuple[int, Seat], ...]]] | None = (
        PrivateAttr(default=None)
    )

    def _seat_index(
        self,
    ) -> tuple[tuple[Seat, ...], dict[str, Seat], dict[tuple[str, int], tuple[Seat, ...]]]:
        if self._index is None or self._index[0] is not self.seats:
            by_name: dict[str, Seat] = {}
            pinned: dict[tuple[str, int], list[Seat]] = {}
            for seat in self.seats:
                by_name.setdefault(seat.name, seat)
                if seat.state == "running" and seat.host is not None:
                    for card in dict.fromkeys(seat.pinned_cards or ()):
                        pinned.setdefault((seat.host, card), []).append(seat)
            self._index = (self.seats, by_name, {k: tuple(v) for k, v in pinned.items()})
        return self._index

    def on_host(self, host: str | None) -> tuple[tuple[int, Seat], ...]:
        """(position, seat) of the seats naming `host` (None: those naming no host), in
        catalogue order, retired ones included: indexed once, so that a fleet's hosts do not
        each read every seat."""
        if self._hosts is None or self._hosts[0] is not self.seats:
            by_host: dict[str | None, list[tuple[int, Seat]]] = {}
            for i, seat in enumerate(self.seats):
                by_host.setdefault(seat.host, []).append((i, seat))
            self._hosts = (self.seats, {k: tuple(v) for k, v in by_host.items()})
        return self._hosts[1].get(host, ())

    def pinned_on(self, host: str, index: int) -> tuple[Seat, ...]:
        """Running seats pinned to card `index` of `host`, in catalogue order (indexed once)."""
        return self._seat_index()[2].get((host, index), ())

    def seat(self, name: str) -> Seat:
        """The seat called `name` (the first of that name); KeyError if none."""
        return self._seat_index()[1][name]
