"""`service_engine_seat`: a catalogue seat judged with the engine its compose service starts."""

from __future__ import annotations

from typing import Any

import pytest

from placement.check.compose import ComposeError, ComposeService
from placement.check.deploy import service_engine_seat
from seats.model import Seat

GiB = 2**30
PROFILE = {"weights": 4 * GiB, "non_kv": GiB, "kv_bytes_per_token": 131072, "max_model_len": 8192}


def seat(engine: dict[str, Any]) -> Seat:
    return Seat.model_validate({"name": "chat", "host": "h", "resident": "8 GiB", "engine": engine})


def service(engine: str, version: str | None, **fields: object) -> ComposeService:
    return ComposeService(
        name="chat-svc",
        path="compose.yaml",
        image=f"img:{version}",
        version=version,
        model=None,
        argv=(),
        engine=engine,
        engine_fields=tuple(sorted(fields.items())),
    )


def test_the_same_kind_keeps_the_catalogues_fields_under_the_flags() -> None:
    declared = seat(
        {
            "kind": "ollama",
            "version": "0.12.6",
            "num_ctx": 4096,
            "gpu_overhead": "1 GiB",
            "profile": PROFILE,
        }
    )
    judged, notes = service_engine_seat(
        declared, service("ollama", "0.12.7", gpu_overhead=GiB // 4)
    )
    engine = judged.engine
    assert engine.kind == "ollama"
    assert engine.num_ctx == 4096  # the catalogue's, which the command line does not set
    assert engine.gpu_overhead_bytes == GiB // 4  # the command line's, over the catalogue's
    assert engine.version == "0.12.7"  # the image's tag
    assert engine.profile == declared.engine.profile
    assert notes == [
        "compose image img:0.12.7 is Ollama 0.12.7; the catalogue says 0.12.6 for chat "
        "(judged as 0.12.7)"
    ]


def test_the_same_kind_without_a_tag_keeps_the_catalogues_version() -> None:
    judged, notes = service_engine_seat(
        seat({"kind": "sglang", "version": "0.5.8", "mem_fraction_static": 0.5}),
        service("sglang", None),
    )
    assert (judged.engine.version, judged.engine.mem_fraction_static, notes) == ("0.5.8", 0.5, [])


def test_another_kind_keeps_only_the_profile() -> None:
    declared = seat(
        {"kind": "sglang", "version": "0.5.8", "mem_fraction_static": 0.5, "profile": PROFILE}
    )
    judged, notes = service_engine_seat(declared, service("tgi", None, cuda_memory_fraction=0.2))
    engine = judged.engine
    assert (engine.kind, engine.version, engine.mem_fraction_static) == ("tgi", None, None)
    assert engine.cuda_memory_fraction == 0.2
    assert engine.profile == declared.engine.profile
    assert notes == []


def test_a_flag_its_kind_does_not_take_names_the_service() -> None:
    with pytest.raises(ComposeError) as raised:
        service_engine_seat(seat({"kind": "tgi"}), service("tgi", None, mem_fraction_static=0.3))
    assert raised.value.service == "chat-svc"
    assert "its engine flags are not valid" in raised.value.msg
