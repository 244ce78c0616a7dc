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


class Engine(BaseModel):
    """How the seat's server starts: vLLM (with a start-up gate) or anything else (none)."""

    model_config = _FROZEN

    kind: Literal["vllm", "other"] = "other"
    version: str | None = Field(default=None, description='quote it: "0.11.0"')
    gpu_memory_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="--gpu-memory-utilization: a request against TOTAL memory",
    )
    kv_cache_bytes: PositiveBytes | None = Field(
        default=None, alias="kv_cache_memory", description="--kv-cache-memory-bytes"
    )
    profile: Profile | None = Field(
        default=None,
        description="the model's bytes per card (vLLM only; from `gpuplan learn`)",
        # Left out of dumps when absent: recorded decisions of seats without one stay as they were.
        exclude_if=lambda value: value is None,
    )

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

    @field_validator("gpu_memory_utilization", mode="before")
    @classmethod
    def _util_is_number(cls, value: object) -> object:
        if isinstance(value, (bool, str)):
            raise ValueError(f"gpu_memory_utilization must be a number in (0, 1], got {value!r}")
        if isinstance(value, int | float) and not 0 < value <= 1:
            # vLLM's flag is a fraction of the card's total memory; 40 is not "40 %".
            raise ValueError(
                f"gpu_memory_utilization {value!r} is outside (0, 1]: it is a fraction of the "
                "card's total memory, e.g. 0.11"
            )
        return value

    @model_validator(mode="after")
    def _profile_is_vllm(self) -> Engine:
        # Only vLLM's arithmetic reads a profile; on another engine it would be ignored in silence.
        if self.profile is not None and self.kind != "vllm":
            raise ValueError("engine.profile is read for vLLM seats only; set kind: vllm")
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

    def pinned_on(self, host: str, index: int) -> tuple[Seat, ...]:
        """Running seats pinned to card `index` of `host`, in catalogue order (indexed once)."""
        return self._seat_index()[2].get((host, index), ())

    def seat(self, name: str) -> Seat:
        """The seat called `name` (the first of that name); KeyError if none."""
        return self._seat_index()[1][name]
