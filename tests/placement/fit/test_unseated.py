"""fit's rule for a service that no catalogue seat describes (beside.unseated_seat): judged only
where its verdict does not rest on its resident, an engine its flags leave unbounded."""

from __future__ import annotations

from typing import Any

import pytest

from placement.fit.beside import decided, unseated_seat
from placement.fit.engines.base import EngineCard
from placement.fit.engines.registry import engine
from placement.fit.verdict import Verdict
from seats.model import Engine as EngineSpec
from seats.units import GiB

CASES: list[tuple[dict[str, Any], bool]] = [
    # share of free, nothing to bound it: judged (refused `unbounded` on a shared card)
    ({"kind": "sglang"}, True),
    ({"kind": "sglang", "mem_fraction_static": 0.3, "context_length": 16384}, True),
    ({"kind": "tgi", "max_total_tokens": 4096}, True),
    ({"kind": "trtllm", "free_gpu_memory_fraction": 0.2}, True),
    # pinned: what it takes is its resident's to say
    ({"kind": "sglang", "max_total_tokens": 65536}, False),
    ({"kind": "tgi", "cuda_memory_fraction": 0.3}, False),
    ({"kind": "trtllm", "max_tokens": 65536}, False),
    # self-fitting and fixed: its resident decides room and spill
    ({"kind": "ollama"}, False),
    ({"kind": "llamacpp"}, False),
    ({"kind": "llamacpp", "n_gpu_layers": 99, "ctx_size": 4096, "fit": False}, False),
    ({"kind": "other"}, False),
]


@pytest.mark.parametrize(("fields", "judged"), CASES, ids=lambda c: str(c))
def test_judged_only_where_its_flags_leave_it_unbounded(
    fields: dict[str, Any], judged: bool
) -> None:
    spec = EngineSpec.model_validate(fields)
    seat = unseated_seat("svc", "fv-ml1", (1,), spec)
    assert (seat is not None) == judged
    if seat is not None:
        assert (seat.name, seat.host, seat.gpus, seat.engine) == ("svc", "fv-ml1", (1,), spec)


def _verdict(kind: str) -> Verdict:
    return Verdict(verdict=kind, seat="svc", host="fv-ml1", cards=(1,), reasons=())  # type: ignore[arg-type]


def test_a_pass_on_the_undeclared_lower_bound_is_not_decided_a_refusal_is() -> None:
    seat = unseated_seat("svc", "fv-ml1", (1,), EngineSpec(kind="sglang"))
    assert seat is not None
    assert not decided(_verdict("pass"), seat)
    assert decided(_verdict("refuse"), seat)
    declared = seat.model_copy(update={"resident_bytes": 8 * GiB})
    assert decided(_verdict("pass"), declared)


def test_no_pin_is_sized_from_the_undeclared_lower_bound() -> None:
    # TGI's fraction keeps it within its resident: with none declared there is nothing to keep.
    card = EngineCard(cuda_total_bytes=95 * GiB, free_bytes=40 * GiB, cuda_context_bytes=GiB)
    seat = unseated_seat("svc", "fv-ml1", (1,), EngineSpec(kind="tgi"))
    assert seat is not None
    assert engine("tgi").pin_flags(seat, card) == ()
    declared = seat.model_copy(update={"resident_bytes": 20 * GiB})
    assert engine("tgi").pin_flags(declared, card)[0] == "--cuda-memory-fraction"
