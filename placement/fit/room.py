"""The arithmetic of what fits, each formula once: room, engine free, a reserve's unconsumed bytes.

DESIGN.md "What fits means", in exact integer bytes. Everything that asks whether bytes fit a
card (the verifier, the greedy placers, pruning, moves, the report) computes through these.
"""

from __future__ import annotations


def room_bytes(*, free_bytes: int, held_bytes: int, margin_bytes: int, load_bytes: int = 0) -> int:
    """free − held − margin − load: what a seat may still take on the card (may be negative).

    `held_bytes` is every byte held against the seat (reserves it is not for, absent seats);
    `load_bytes` what the other new seats on the card take.
    """
    return free_bytes - held_bytes - margin_bytes - load_bytes


def engine_free_bytes(*, free_bytes: int, cuda_context_bytes: int, load_bytes: int = 0) -> int:
    """free − load − cuda_context: what vLLM's gate reads once its own context is up."""
    return free_bytes - load_bytes - cuda_context_bytes


def reserve_left_bytes(*, reserve_bytes: int, own_bytes: int) -> int:
    """max(0, reserve − Σ resident of its own seats on the card): what a reserve still holds."""
    return max(0, reserve_bytes - own_bytes)


def fits_room(need_bytes: int, room: int) -> bool:
    """Rule `room`: the seat's need is at most the room (equal fits)."""
    return need_bytes <= room


def exclusive_binds(*, exclusive: bool, occupied: bool, exclusive_neighbour: bool) -> bool:
    """Rule `exclusive`: an exclusive seat on an occupied card, or any seat beside an exclusive one."""
    return (exclusive and occupied) or exclusive_neighbour
