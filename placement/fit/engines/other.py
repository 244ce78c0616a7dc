"""`other`: any server gpuplan has no rule for (speech models, embedders, custom code).

It takes its declared resident and nothing more; it has no start-up check of its own, so it
is judged by room alone, and a load that does not fit fails at load (OOM). Nothing pins it but
its own configuration; it has no KV cache gpuplan knows of.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from placement.fit.engines.base import (
    NO_VERSION_TAG,
    Behaviour,
    EngineCard,
    Learned,
    NoRequest,
    Refusal,
)
from seats.model import Engine as EngineSpec
from seats.model import Seat


class Other(NoRequest):
    """A server without an engine rule: fixed at its resident."""

    kind = "other"
    title = "other"
    log_reader = ""
    commands: tuple[str, ...] = ()
    images: tuple[str, ...] = ()
    version_tag = NO_VERSION_TAG

    def behaviour(self, spec: EngineSpec) -> Behaviour:
        """Fixed."""
        return "fixed"

    def read_flags(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> dict[str, object]:
        """No fields."""
        return {}

    def need_bytes(self, seat: Seat, card: EngineCard) -> int:
        """Its resident."""
        return seat.resident_bytes

    def gate(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """None: it has no start-up check."""
        return None

    def kv_capacity(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """None: no KV cache known."""
        return None

    def pinned(self, spec: EngineSpec) -> bool:
        """Always: its resident is all it takes."""
        return True

    def pin_flags(self, seat: Seat, card: EngineCard) -> tuple[str, ...]:
        """None: its bytes are its own configuration's."""
        return ()

    def kv_tokens(self, seat: Seat, card: EngineCard) -> int | None:
        """None: no KV cache known."""
        return None

    def learn(self, lines: Sequence[str], first_line: int = 1) -> Learned:
        """Nothing to read."""
        return Learned(self.kind, missing=("an engine kind with a start-up log",))


ENGINE = Other()
