"""The catalogue as frozen pydantic models: hosts, held reserves and seats (DESIGN.md, Catalogue).

Field-level rules live here (types, units, ranges); rules that relate fields of different
objects (names unique, hosts exist, reserves fit their card) live in `seats.rules`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from seats.units import parse_bytes


def _bytes(value: object) -> int:
    return parse_bytes(value)


def _positive_bytes(value: object) -> int:
    return parse_bytes(value, allow_zero=False)


Bytes = Annotated[int, BeforeValidator(_bytes)]
PositiveBytes = Annotated[int, BeforeValidator(_positive_bytes)]
_FROZEN = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Host(BaseModel):
    """One machine with `cards` GPUs; the per-host figures the fit arithmetic needs."""

    model_config = _FROZEN

    cards: int = Field(ge=1, le=64)
    card_total: PositiveBytes | None = Field(
        default=None, description="NVML total per card; a snapshot that disagrees is an error"
    )
    cuda_context: Bytes = Field(
        default=0, description="bytes a new engine process takes before its gate reads free memory"
    )
    margin: Bytes = Field(default=0, description="never planned away on any card of this host")


class Reserve(BaseModel):
    """Capacity held on one card for the named seats only."""

    model_config = _FROZEN

    name: str = Field(min_length=1)
    host: str
    gpu: int = Field(ge=0)
    bytes: Literal["card"] | PositiveBytes = Field(description="'card' for the whole card, or an amount")
    for_: tuple[str, ...] = Field(alias="for", min_length=1)


class Adapter(BaseModel):
    """One LoRA adapter; `persisted` means it is in --lora-modules and survives a recreate."""

    model_config = _FROZEN

    name: str = Field(min_length=1)
    persisted: bool = True


class Lora(BaseModel):
    """The LoRA block of a carrier seat: slot counts fixed at start-up, and its adapters."""

    model_config = _FROZEN

    max_loras: int = Field(default=1, ge=1)
    max_lora_rank: int = Field(default=16, ge=1)
    adapters: tuple[Adapter, ...] = ()


class Engine(BaseModel):
    """How the seat's server starts: vLLM (with a start-up gate) or anything else (none)."""

    model_config = _FROZEN

    kind: Literal["vllm", "other"] = "other"
    version: str | None = Field(default=None, description='quote it: "0.11.0"')
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    kv_cache_memory: PositiveBytes | None = Field(
        default=None, description="--kv-cache-memory-bytes"
    )

    @field_validator("version", mode="before")
    @classmethod
    def _version_is_text(cls, value: object) -> object:
        # YAML reads 0.11 as a float and 0.11.0 as a string: a float here lost its digits.
        if isinstance(value, int | float) and not isinstance(value, bool):
            raise ValueError(f'version {value!r} must be quoted, e.g. "{value}"')
        return value

    @field_validator("gpu_memory_utilization", mode="before")
    @classmethod
    def _util_is_number(cls, value: object) -> object:
        if isinstance(value, bool) or isinstance(value, str):
            raise ValueError(f"gpu_memory_utilization must be a number in (0, 1], got {value!r}")
        return value


SeatState = Literal["running", "planned", "retired"]


class Seat(BaseModel):
    """One serving process (or tensor-parallel group) with a byte-pinned need per card."""

    model_config = _FROZEN

    name: str = Field(min_length=1)
    host: str | None = None
    gpus: tuple[int, ...] | int = Field(
        default=1, description="card list (pinned) or how many cards (to be placed)"
    )
    resident: PositiveBytes = Field(description="bytes held on each card once up")
    weights: PositiveBytes | None = None
    state: SeatState = "planned"
    match: str | None = Field(default=None, description="regex on /proc/PID/cmdline")
    engine: Engine = Engine()
    lora: Lora | None = None
    exclusive: bool = False
    priority: int = 0

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus_shape(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("gpus must be a card list like [0] or a count like 1")
        if isinstance(value, int) and value < 1:
            raise ValueError("gpus must be at least 1")
        if isinstance(value, list):
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
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"match {value!r} is not a valid regex: {exc}") from exc
        return value

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

    hosts: dict[str, Host] = Field(min_length=1)
    reserves: tuple[Reserve, ...] = ()
    seats: tuple[Seat, ...] = ()

    def seat(self, name: str) -> Seat:
        """The seat called `name`; KeyError if none."""
        for seat in self.seats:
            if seat.name == name:
                return seat
        raise KeyError(name)
