"""The snapshot: one NVML reading of every card of a host, as frozen data (DESIGN.md, Snapshot).

`used_bytes` excludes the driver's reserve (NVML v2); where only v1 answered,
`reserved_bytes` is None and `used_bytes` is v1's, reserve included (docs/facts.md §1).
A card that failed to read carries `error` and None figures, never zeros.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from inventory import foreign
from inventory.holds import Hold
from inventory.secrets import mask_cmdline
from seats.errors import BadInputError
from seats.loader import format_loc
from seats.model import Name
from seats.units import MiB

SCHEMA_VERSION = 1
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
# DESIGN.md "Never yes by accident": the figures a snapshot must agree with before it decides.
# DCGM rounds each figure to whole MiB, so used + free + reserved may miss the total by a few.
FIGURES_TOLERANCE_BYTES = 4 * MiB
# No card holds an exbibyte: a larger count is a corrupt or forged figure (and overflows SQLite).
MAX_FIGURE_BYTES = 2**60
# A clock running ahead by more than this makes a snapshot "newest" for as long as it runs ahead.
MAX_CLOCK_SKEW = timedelta(minutes=5)
_FROZEN = ConfigDict(extra="ignore", frozen=True)
# Validated inside a snapshot when one is read; built on their own only where a poller or a
# reader makes cards (see seats.model._NESTED).
_NESTED = ConfigDict(**_FROZEN, defer_build=True)


class SnapshotError(BadInputError):
    """A snapshot file that cannot be used, with the file and the field path."""

    def __init__(self, source: str, loc: str, msg: str) -> None:
        self.source = source
        self.loc = loc
        self.msg = msg
        where = f"{source}: {loc}" if loc else source
        super().__init__(f"{where}: {msg}")


class Process(BaseModel):
    """One compute process on a card, as NVML lists it."""

    model_config = _NESTED

    pid: int = Field(ge=0)
    used_bytes: int | None = Field(default=None, ge=0, description="None when NVML cannot say")
    cmdline: str | None = Field(
        default=None, description="None when the PID vanished before /proc was read"
    )
    seat: str | None = Field(default=None, description="seat name when attributed at capture")
    # A process title (`VLLM::EngineCore`) carries none of its server's arguments: its
    # ancestors' command lines, nearest first, let a seat's `match` find it by its server's.
    # Left out of the JSON when empty, so older readers and older snapshots see no change.
    parents: tuple[str, ...] = Field(
        default=(),
        description="ancestors' command lines, nearest first (inventory.proc.read_proc_parents)",
    )

    @field_validator("used_bytes", "pid", mode="before")
    @classmethod
    def _strict_int(cls, value: object) -> object:
        return _require_int(value)

    @field_validator("cmdline")
    @classmethod
    def _masked(cls, value: str | None) -> str | None:
        # The one edge every command line crosses (NVML + /proc, a snapshot file, a ledger,
        # Prometheus labels): secrets never get further than this.
        return None if value is None else mask_cmdline(value)

    @field_validator("parents", mode="before")
    @classmethod
    def _no_parents(cls, value: object) -> object:
        # Another writer may say "none read" as null: the same as an empty list or no key.
        return () if value is None else value

    @field_validator("parents")
    @classmethod
    def _parents_masked(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        # An ancestor's line is a command line like any other (its `--api-key`): the same edge.
        return tuple(mask_cmdline(line) for line in value)


class Card(BaseModel):
    """One GPU of the host, by NVML index."""

    model_config = _NESTED

    index: int = Field(ge=0)
    uuid: str | None = None
    name: str | None = None
    total_bytes: int | None = Field(default=None, ge=0)
    reserved_bytes: int | None = Field(default=None, ge=0)
    used_bytes: int | None = Field(default=None, ge=0)
    free_bytes: int | None = Field(default=None, ge=0)
    utilization_percent: int | None = Field(default=None, ge=0, le=100)
    processes: tuple[Process, ...] = ()
    error: str | None = None
    # Approvals from a ledger that count as held on this card (never measured, never stored
    # or printed with the snapshot): see inventory.holds.
    holds: tuple[Hold, ...] = Field(default=(), exclude=True)

    @field_validator(
        "total_bytes", "reserved_bytes", "used_bytes", "free_bytes", "index", mode="before"
    )
    @classmethod
    def _strict_int(cls, value: object) -> object:
        return _require_int(value)

    @model_validator(mode="after")
    def _figures_present(self) -> Card:
        figures = {
            "total_bytes": self.total_bytes,
            "used_bytes": self.used_bytes,
            "free_bytes": self.free_bytes,
        }
        if self.error is not None:
            present = [
                k
                for k, v in {**figures, "reserved_bytes": self.reserved_bytes}.items()
                if v is not None
            ]
            if present:
                raise ValueError(
                    f"card in error ({self.error}) must have null figures, has {', '.join(present)}"
                )
            return self
        missing = [k for k, v in figures.items() if v is None]
        if missing:
            raise ValueError(
                f'card {self.index} lacks {", ".join(missing)} (a card that failed to read has "error")'
            )
        return self

    @property
    def ok(self) -> bool:
        """True when the card was read; False for a card in error."""
        return self.error is None

    @property
    def cuda_total_bytes(self) -> int | None:
        """What a CUDA process calls total: NVML total − v2 reserve (docs/facts.md §1).

        With NVML v1 only (reserve unknown) this is the NVML total, stricter for gates.
        """
        if self.total_bytes is None:
            return None
        return self.total_bytes - (self.reserved_bytes or 0)


class Snapshot(BaseModel):
    """Every card of one host at one moment."""

    model_config = _FROZEN

    schema_: int = Field(default=SCHEMA_VERSION, alias="schema")
    # The host starts lines of output (`ignored: HOST`, warnings): a name that could print a line
    # of its own is refused as a catalogue's is (DESIGN.md "Text from outside").
    host: Name = Field(min_length=1)
    taken_at: datetime
    driver: str | None = None
    nvml_version: str | None = None
    cards: tuple[Card, ...]

    @field_validator("taken_at", mode="before")
    @classmethod
    def _utc(cls, value: object) -> datetime:
        # DESIGN.md: taken_at is UTC. In a file, a local time or an epoch number is refused
        # rather than guessed at; in code, any aware datetime is converted.
        example = "write UTC as e.g. 2026-09-16T14:02:11Z"
        if isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value)
            except ValueError as exc:
                raise ValueError(f"cannot read {value!r} as a time; {example}") from exc
            if moment.tzinfo is None:
                raise ValueError(f"{value!r} has no timezone; {example}")
            if moment.utcoffset() != timedelta(0):
                raise ValueError(f"{value!r} is not UTC (offset {moment:%z}); {example}")
            return moment.astimezone(UTC)
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError(f"taken_at needs a timezone; {example}")
            return value.astimezone(UTC)
        raise ValueError(f"expected a timestamp string, got {value!r}; {example}")

    @field_validator("schema_")
    @classmethod
    def _known_schema(cls, value: int) -> int:
        if value != SCHEMA_VERSION:
            raise ValueError(
                f"snapshot schema {value} is not supported (this gpuplan reads {SCHEMA_VERSION})"
            )
        return value

    @field_validator("cards")
    @classmethod
    def _indices_unique(cls, cards: tuple[Card, ...]) -> tuple[Card, ...]:
        seen: dict[int, int] = {}
        for position, card in enumerate(cards):
            if card.index in seen:
                raise ValueError(
                    f"card index {card.index} appears twice (cards[{seen[card.index]}] and cards[{position}])"
                )
            seen[card.index] = position
        return cards

    def card(self, index: int) -> Card:
        """The card with NVML index `index`; KeyError if absent."""
        for card in self.cards:
            if card.index == index:
                return card
        raise KeyError(index)

    def to_json_dict(self) -> dict[str, Any]:
        """The DESIGN.md JSON shape, `taken_at` as `…Z`."""
        data = self.model_dump(by_alias=True, mode="json")
        data["taken_at"] = format_utc(self.taken_at)
        for card in data["cards"]:
            for process in card["processes"]:
                if not process["parents"]:
                    del process["parents"]  # absent, as before parents were read
        return data


def _require_int(value: object) -> object:
    # JSON floats and bools are not byte counts: refuse instead of truncating.
    if isinstance(value, (bool, float, str)):
        raise ValueError(f"expected an integer (bytes are whole), got {value!r}")
    return value


def format_utc(moment: datetime) -> str:
    """2026-09-16T14:02:11Z (seconds, UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc(seconds: int) -> datetime:
    """Unix seconds as an aware UTC time."""
    return datetime.fromtimestamp(seconds, UTC)


def unix_s(moment: datetime) -> int:
    """An aware time as whole unix seconds."""
    return int(moment.timestamp())


def parse_snapshot(data: Any, source: str) -> Snapshot:
    """Validate plain JSON data as a snapshot, or raise `SnapshotError` naming the field."""
    if not isinstance(data, dict):
        raise SnapshotError(source, "", "a snapshot is a JSON object with host, taken_at and cards")
    try:
        return Snapshot.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = format_loc(tuple("schema" if p == "schema_" else p for p in first["loc"]))
        msg = str(first["msg"]).removeprefix("Value error, ")
        if first["type"] == "missing":
            msg = "required key is missing"
        elif first["type"] == "greater_than_equal":
            msg = f"{first['input']!r} is negative; a byte count or index is 0 or more"
        raise SnapshotError(source, loc, msg) from exc


def loads_snapshot(text: str, source: str) -> Snapshot:
    """Parse JSON text as a snapshot; another GPU tool's output is named as such."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        tool = foreign.recognise_text(text)
        if tool is not None:
            raise SnapshotError(source, "", foreign.message(tool)) from exc
        raise SnapshotError(source, "", f"not valid JSON: {exc.msg} (line {exc.lineno})") from exc
    except RecursionError as exc:
        raise SnapshotError(source, "", "not a snapshot: JSON nested too deeply") from exc
    except ValueError as exc:
        # json.loads refuses integers over 4,300 digits with a plain ValueError.
        raise SnapshotError(source, "", f"not a snapshot: {exc}") from exc
    tool = foreign.recognise_json(data)
    if tool is not None:
        raise SnapshotError(source, "", foreign.message(tool))
    return parse_snapshot(data, source)


def load_snapshot(path: str | Path) -> Snapshot:
    """Read and validate the snapshot file at `path`."""
    name = str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SNAPSHOT_BYTES + 1)
    except FileNotFoundError as exc:
        raise SnapshotError(name, "", "no such file") from exc
    except OSError as exc:
        raise SnapshotError(name, "", f"cannot read: {exc.strerror}") from exc
    if len(raw) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(name, "", "the file is over 64 MiB; a snapshot is far smaller")
    return loads_snapshot(raw.decode("utf-8", errors="replace"), name)


def dumps_snapshot(snapshot: Snapshot) -> str:
    """The snapshot as pretty JSON text."""
    return json.dumps(snapshot.to_json_dict(), indent=2) + "\n"


def save_snapshot(snapshot: Snapshot, path: str | Path) -> None:
    """Write the snapshot to `path` atomically (a temporary file, then rename)."""
    target = Path(path)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(dumps_snapshot(snapshot), encoding="utf-8")
    temporary.replace(target)


def check_consistency(snapshot: Snapshot, source: str, now: datetime) -> list[str]:
    """The rules every snapshot meets before it decides (a file, NVML or Prometheus alike).

    SnapshotError (exit 2) naming `source` (the file, or the host and where it was read) when a
    card's used + free + reserved misses its total by more than 4 MiB, its processes hold more
    than it uses by more than that, any byte count exceeds 2**60, or `taken_at` is more than
    5 minutes after `now`. Returns warnings: card UUIDs that appear twice.
    """
    ahead = snapshot.taken_at - now
    if ahead > MAX_CLOCK_SKEW:
        raise SnapshotError(
            source,
            "taken_at",
            f"{format_utc(snapshot.taken_at)} is {age_text(ahead)} in the future (now "
            f"{format_utc(now)}); a clock that runs ahead would make this snapshot the newest "
            "and hide the real ones, so it decides nothing (more than 5 min of skew)",
        )
    for i, card in enumerate(snapshot.cards):
        _card_figures(card, i, snapshot.host, source)
    warnings: list[str] = []
    uuids = [card.uuid for card in snapshot.cards if card.uuid is not None]
    if len(set(uuids)) == len(uuids):
        return warnings
    seen: dict[str, int] = {}
    for card in snapshot.cards:
        if card.uuid is None:
            continue
        if card.uuid in seen:
            warnings.append(
                f"{source}: cards {snapshot.host}:{seen[card.uuid]} and {snapshot.host}:{card.index} "
                f"have the same UUID {card.uuid} (a copied or hand-edited snapshot?)"
            )
        else:
            seen[card.uuid] = card.index
    return warnings


def identity_change(
    snapshot: Snapshot, previous_at: datetime, previous_uuids: frozenset[str], previous_unread: int
) -> str | None:
    """Why `snapshot` may be another machine's than its host's previous snapshot; None if not.

    DESIGN.md "Never yes by accident": a snapshot stored under a host name that another machine
    already used (a copied snapshot, a reinstalled box, a typo'd --host) would be judged and
    reported as the same cards. Compared as sets of card UUIDs, so a renumbering is no change.
    A card whose UUID NVML could not read may be any card: with one in this snapshot no UUID
    counts as gone, with `previous_unread` in the previous one none counts as new.
    """
    from seats.names import escaped

    now_uuids = frozenset(card.uuid for card in snapshot.cards if card.uuid)
    if not now_uuids or not previous_uuids:
        return None
    unread = any(not card.uuid for card in snapshot.cards)
    new_uuids = set() if previous_unread else now_uuids - previous_uuids
    gone_uuids = set() if unread else previous_uuids - now_uuids
    if not new_uuids and not gone_uuids:
        return None
    new = ", ".join(escaped(uuid) for uuid in sorted(new_uuids)) or "none"
    gone = ", ".join(escaped(uuid) for uuid in sorted(gone_uuids)) or "none"
    kept = len(now_uuids & previous_uuids)
    guess = (
        "another machine under the same host name?"
        if not kept
        else "a card replaced, or another machine under the same host name?"
    )
    return (
        f"host {escaped(snapshot.host)}: card UUIDs differ from its previous snapshot in the "
        f"ledger ({format_utc(previous_at)}): new {new}; gone {gone}. {guess} Stored anyway; "
        "give each machine its own --host"
    )


def _card_figures(card: Card, position: int, host: str, source: str) -> None:
    # Runs on every card of every snapshot before a plan: kept to plain int arithmetic.
    total, reserved, used, free = (
        card.total_bytes,
        card.reserved_bytes,
        card.used_bytes,
        card.free_bytes,
    )
    for key, value in (
        ("total_bytes", total),
        ("reserved_bytes", reserved),
        ("used_bytes", used),
        ("free_bytes", free),
    ):
        if value is not None and value > MAX_FIGURE_BYTES:
            raise SnapshotError(
                source,
                f"cards[{position}].{key}",
                f"card {host}:{card.index}: {value} B is more than 2**60 B; no card holds that",
            )
    held = 0
    for j, process in enumerate(card.processes):
        bytes_ = process.used_bytes
        if bytes_ is None:
            continue
        if bytes_ > MAX_FIGURE_BYTES:
            raise SnapshotError(
                source,
                f"cards[{position}].processes[{j}].used_bytes",
                f"card {host}:{card.index}: pid {process.pid}: {bytes_} B is more than 2**60 B; "
                "no card holds that",
            )
        held += bytes_
    if card.error is not None or total is None or used is None or free is None:
        return
    # NVML v1 (reserve unknown) counts the reserve inside used: used + free is the total there.
    parts = used + free + (reserved or 0)
    apart = parts - total
    if apart > FIGURES_TOLERANCE_BYTES or -apart > FIGURES_TOLERANCE_BYTES:
        raise SnapshotError(
            source,
            f"cards[{position}]",
            f"card {host}:{card.index}: used {used} B + free {free} B + reserved {reserved or 0} B "
            f"= {parts} B, but total is {total} B ({abs(apart)} B "
            f"{'over' if apart > 0 else 'under'}; more than DCGM's 4 MiB rounding): figures "
            "that cannot all be true decide nothing",
        )
    if held - used > FIGURES_TOLERANCE_BYTES:
        raise SnapshotError(
            source,
            f"cards[{position}].processes",
            f"card {host}:{card.index}: its processes hold {held} B, more than the card's used "
            f"{used} B by {held - used} B (over 4 MiB): figures that cannot all be true decide nothing",
        )


def age_text(age: timedelta) -> str:
    """An age in its largest unit: `1.5 d`, `2.0 h`, `7 min`, `42 s`."""
    seconds = int(age.total_seconds())
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds} s"


def with_holds(snapshots: Sequence[Snapshot], holds: Sequence[Hold]) -> list[Snapshot]:
    """`snapshots` with exactly `holds` attached to the cards they hold (others' holds cleared)."""
    by_card: dict[tuple[str, int], list[Hold]] = {}
    for hold in holds:
        for index in hold.cards:
            by_card.setdefault((hold.host, index), []).append(hold)
    out = []
    for snapshot in snapshots:
        cards = tuple(
            card.model_copy(update={"holds": tuple(by_card.get((snapshot.host, card.index), ()))})
            for card in snapshot.cards
        )
        out.append(snapshot.model_copy(update={"cards": cards}))
    return out
