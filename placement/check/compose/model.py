"""The records a compose file is read into, and the error that names file, service and field."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from inventory.secrets import mask_cmdline
from placement.fit.engines.note import Said
from seats.errors import BadInputError


class ComposeError(BadInputError):
    """A compose file that cannot be checked: names the file, the service and the argument."""

    def __init__(self, path: str, service: str | None, argument: str | None, msg: str) -> None:
        self.path = path
        self.service = service
        self.argument = argument
        self.msg = msg
        where = [path]
        if service is not None:
            where.append(f"service {service!r}")
        if argument:
            where.append(argument)
        super().__init__(f"{': '.join(where)}: {msg}")


@dataclass(frozen=True)
class ComposeService:
    """One GPU service of a compose file, with the flags that decide its memory.

    `engine` is the kind of engine the service runs (found in its command, entrypoint or image,
    or declared with `x-gpuplan-engine`), else None: only a catalogue seat can then say its need.
    `version` is the one its image tag names (each engine's `version_of`), None where it names none.
    `unknown` says why its values cannot be known (a `--config` file gpuplan cannot read).

    `devices` are the host cards the container gets (indices or UUIDs as written; None when
    the file gives all cards or none); `visible` is CUDA_VISIBLE_DEVICES inside it, by
    position among those. `resolve_cards` turns both into NVML indices against a snapshot.
    """

    name: str
    path: str
    image: str | None
    version: str | None
    model: str | None
    argv: tuple[str, ...]
    util_text: str | None = None
    kv_cache_bytes: int | None = None
    max_loras: int | None = None
    max_lora_rank: int | None = None
    lora_modules: tuple[str, ...] = ()
    lora_enabled: bool = False
    runtime_lora: bool = False
    port: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    # --data-parallel-size: that many engines, each on its own tensor × pipeline cards.
    data_parallel_size: int = 1
    # Its engine takes every card the container sees (TGI shards over all of them by default).
    all_cards: bool = False
    # The flags that set an engine's card count, as written (`--tp 2 × --dp 2`, `environment
    # NUM_SHARD 4`): what a card-count error names (its engine's `cards_flag`).
    cards_from: str | None = None
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None
    devices: tuple[str, ...] | None = None
    devices_from: str | None = None
    device_count: int | None = None
    visible: tuple[str, ...] | None = None
    seat: str | None = None
    notes: tuple[Said, ...] = field(default=())
    engine: str | None = None
    # The catalogue engine fields the command line and environment of a service of another
    # engine set (the engine's `read_flags`), e.g. (("mem_fraction_static", 0.3),).
    engine_fields: tuple[tuple[str, object], ...] = ()
    replicas: int = 1
    depends_on: tuple[str, ...] = ()
    unknown: str | None = None

    @property
    def util(self) -> Decimal | None:
        """--gpu-memory-utilization as an exact decimal (validated at load)."""
        return Decimal(self.util_text) if self.util_text is not None else None

    @property
    def world_size(self) -> int:
        """Cards the service's engine uses: tensor × pipeline parallel."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def cards_needed(self) -> int:
        """Cards the whole service takes: one engine's world size per data-parallel rank."""
        return self.world_size * self.data_parallel_size

    @property
    def cmdline(self) -> str:
        """The command as one line, for matching against a catalogue seat's regex.

        Masked as a running process's command line is (inventory.secrets), so one `match`
        finds the service in its compose file and its process on the card alike.
        """
        return mask_cmdline(" ".join(self.argv))

    @property
    def names_cards(self) -> bool:
        """True when the file says which cards the service gets."""
        return self.devices is not None or self.visible is not None or self.device_count is not None


@dataclass(frozen=True)
class ComposeFile:
    """The GPU services of one compose file, the bad ones' errors, and the services left out.

    `order` is every judged service's name (good or bad) in file order; `files` every file read
    (the override docker merges, includes, extends), `notes` what was merged or left out.
    """

    path: str
    services: tuple[ComposeService, ...]
    skipped: tuple[str, ...]
    errors: tuple[ComposeError, ...] = ()
    order: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
