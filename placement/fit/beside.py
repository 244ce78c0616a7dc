"""Rule `unbounded` seen from a neighbour: a seat that shares a card with an unbounded vLLM;
and the seat a compose service with no catalogue seat is judged as where that rule decides it.

DESIGN.md "What fits": an unbounded vLLM (≥ 0.34 with neither util nor kv_cache_memory, or no
version and neither) takes nearly all free memory once up. It is refused on a card that holds or
will hold another seat; each seat that would start beside it is refused there too, on its own
line, since whichever starts second finds the card taken (the issue 26 reproduction: a neighbour
read PASS with 68.65 GiB "to spare" beside one).
"""

from __future__ import annotations

from collections.abc import Sequence

from placement.fit.engines import engine_of, requests_util, unbounded_as_declared
from placement.fit.engines.base import UNDECLARED_RESIDENT_BYTES, declared_resident
from placement.fit.verdict import Reason, Verdict, bare_reason
from seats.model import Engine as EngineSpec
from seats.model import Seat


def is_unbounded(seat: Seat) -> bool:
    """True for a seat judged `unbounded` as declared (check's reading: no util proposed)."""
    return not seat.exclusive and unbounded_as_declared(seat.engine)


def unbounded_beside(
    seat: Seat, host: str, cards: Sequence[int], others: Sequence[tuple[Seat, str, Sequence[int]]]
) -> list[Reason]:
    """One `unbounded` reason per card of `seat` that an unbounded other new seat shares."""
    reasons: list[Reason] = []
    for card in cards:
        for other, other_host, other_cards in others:
            if other.name == seat.name or other_host != host or card not in other_cards:
                continue
            if not is_unbounded(other):
                continue
            rule = engine_of(other.engine)
            reasons.append(
                bare_reason(
                    "unbounded",
                    card,
                    host=host,
                    said="unbounded_beside",
                    seat=seat.name,
                    beside=other.name,
                    why=rule.unbounded_why(other.engine),
                    pin=rule.pin_hint(),
                )
            )
            break
    return reasons


def unseated_seat(name: str, host: str, cards: Sequence[int], spec: EngineSpec) -> Seat | None:
    """The seat a GPU service that no catalogue seat describes is judged as, where its verdict
    does not rest on its resident; None where it does.

    DESIGN.md's table: an engine its flags leave taking a share of what is free with nothing to
    bound it (SGLang without --max-total-tokens, TGI without --cuda-memory-fraction, TensorRT-LLM
    without max_tokens) is refused `unbounded` on a card that holds or will hold anything else,
    whatever it holds itself, and every seat beside it is refused with it. It is judged on the
    undeclared lower bound: a refusal stands, a pass is not decided (`decided`). A pinned, fixed
    or self-fitting engine takes what its resident says: only its catalogue seat can tell.
    """
    if not judged_unseated(spec):
        return None
    return Seat(
        name=name,
        host=host,
        gpus=tuple(cards),
        resident=UNDECLARED_RESIDENT_BYTES,
        state="planned",
        engine=spec,
    )


def judged_unseated(spec: EngineSpec) -> bool:
    """True when a service of this engine block is judged with no catalogue seat
    (`unseated_seat`): its flags leave it unbounded."""
    return unbounded_as_declared(spec)


def decided(verdict: Verdict, seat: Seat) -> bool:
    """False for a pass of an `unseated_seat`: on a card of its own, what it takes is its
    resident's to say (a util-request engine's pass stands: its gate covers its request)."""
    return verdict.verdict != "pass" or declared_resident(seat) or requests_util(seat.engine)
