"""The pre-deploy check's core: the seed's replays (docs/facts.md §3) and every warning, on the shared verifier."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inventory.snapshot import Card, Process, Snapshot, load_snapshot
from placement.check.compose import ComposeError, ComposeService, load_compose
from placement.check.seat import check_seat, check_service, inputs_digest, pick_snapshot
from placement.cli.notes_text import note_texts
from placement.cli.reasons_text import reason_text
from placement.fit.engines import UTIL_STEP, largest_util_within, requested_bytes
from placement.fit.verdict import Verdict
from seats.errors import BadInputError, Exit
from seats.loader import load_catalogue
from seats.model import Catalogue
from seats.units import MiB, format_bytes
from tests.conftest import FV_ML1_BEFORE_VOICES, FV_ML1_CATALOGUE

DATA = Path(__file__).parent.parent / "data"
VOICES = DATA / "voices-compose.yaml"
# docs/facts.md §3: card 0 before voices, NVML free 12,611 MiB, cuda_context 1,183 MiB.
GATE_FREE = 12_611 * MiB - 1_183 * MiB
CUDA_TOTAL = 101_972_967_424


def service_from(
    tmp_path: Path, text: str, environ: dict[str, str] | None = None
) -> ComposeService:
    path = tmp_path / "compose.yaml"
    path.write_text(text, encoding="utf-8")
    (service,) = load_compose(path, environ or {}).services
    return service


# --- the seed's refusal and its fix ------------------------------------------------------------


def test_seed_refusal_util_012(fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot) -> None:
    result = check_seat(fv_ml1, [fv_ml1_before_voices], "vllm-voices", [0], util=Decimal("0.12"))
    verdict = result.verdict
    assert verdict.verdict == "refuse"
    assert result.exit_code == Exit.REFUSED
    (gate,) = [r for r in verdict.reasons if r.rule == "gate"]
    assert gate.card == 0
    assert gate.room_bytes == GATE_FREE
    assert gate.need_bytes == requested_bytes(Decimal("0.12"), CUDA_TOTAL)
    assert gate.short_bytes == gate.need_bytes - GATE_FREE
    # vLLM's own message: "Free memory … (11.16/94.97 GiB) … (0.12, 11.4 GiB)"
    assert format_bytes(gate.room_bytes) == "11.16 GiB"
    assert format_bytes(gate.need_bytes) == "11.40 GiB"
    assert "11.16 GiB" in reason_text(gate) and "11.40 GiB" in reason_text(gate)
    assert {r.rule for r in verdict.reasons} == {"gate"}  # room is fine: only the gate binds
    assert any("util ≤ 0.117" in n for n in note_texts(verdict.nearest))


def test_cut_off_util_is_the_largest_passing(
    fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    def judged(util: str) -> str:
        return check_seat(
            fv_ml1, [fv_ml1_before_voices], "vllm-voices", [0], util=Decimal(util)
        ).verdict.verdict

    assert judged("0.117") == "pass"
    assert judged("0.118") == "refuse"
    # docs/facts.md §3: the cut-off is util ≈ 0.1175
    assert abs(GATE_FREE / CUDA_TOTAL - 0.1175) < 5e-4


def test_seed_fix_util_011_passes(fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot) -> None:
    result = check_seat(fv_ml1, [fv_ml1_before_voices], "vllm-voices", [0], util=Decimal("0.11"))
    assert result.verdict.verdict == "pass"
    assert result.exit_code == Exit.OK
    assert result.verdict.reasons == ()
    (figures,) = result.verdict.figures
    assert figures.requested_bytes == requested_bytes(Decimal("0.11"), CUDA_TOTAL)
    # The seed: 0.11 asks 10,697 MiB for a 10,740 MiB seat — a warning, not a refusal.
    assert any("does not cover the whole seat" in w for w in note_texts(result.verdict.warnings))
    # lv-trial is persisted: false in the catalogue.
    assert any(
        "lv-trial" in w and "docker compose up -d" in w for w in note_texts(result.verdict.warnings)
    )


def test_catalogue_util_is_the_default(fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot) -> None:
    result = check_seat(fv_ml1, [fv_ml1_before_voices], "vllm-voices")
    assert result.verdict.cards == (0,)
    assert result.verdict.util == "0.11"
    assert result.verdict.verdict == "pass"


def test_seed_from_compose(fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot) -> None:
    (service,) = load_compose(VOICES, {}).services
    refused = check_service(fv_ml1, [fv_ml1_before_voices], service)
    assert refused.verdict.verdict == "refuse"
    assert [r.rule for r in refused.verdict.reasons] == ["gate"]
    assert refused.resident_known and refused.verdict.seat == "vllm-voices"
    assert refused.service == "vllm-voices"
    assert any("util ≤ 0.117" in n for n in note_texts(refused.verdict.nearest))
    assert any(
        "disagrees with the catalogue's 0.11" in w for w in note_texts(refused.verdict.warnings)
    )

    (fixed,) = load_compose(VOICES, {"VOICES_UTIL": "0.11"}).services
    passed = check_service(fv_ml1, [fv_ml1_before_voices], fixed)
    assert passed.verdict.verdict == "pass"
    assert not any("disagrees" in w for w in note_texts(passed.verdict.warnings))
    # lv-trial is not in the file's --lora-modules: the next recreate drops it.
    assert any("lv-trial" in w for w in note_texts(passed.verdict.warnings))
    assert not any("lv-hemingway" in w for w in note_texts(passed.verdict.warnings))


# --- unbounded, reserves -----------------------------------------------------------------------


def test_unbounded_034_service_on_shared_card(
    tmp_path: Path, fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    service = service_from(
        tmp_path,
        """
services:
  newbie:
    image: vllm/vllm-openai:v0.34.0
    command: [--model, some/model, --port, "8099"]
    environment: {CUDA_VISIBLE_DEVICES: "0"}
""",
    )
    result = check_service(fv_ml1, [fv_ml1_before_voices], service)
    assert result.verdict.verdict == "refuse"
    assert not result.resident_known
    unbounded = [r for r in result.verdict.reasons if r.rule == "unbounded"]
    assert unbounded and unbounded[0].card == 0
    assert "cyberprev" in reason_text(unbounded[0])
    assert any("resident unknown" in w for w in note_texts(result.verdict.warnings))


def test_034_with_kv_cache_is_gated_not_unbounded(
    tmp_path: Path, fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    service = service_from(
        tmp_path,
        """
services:
  newbie:
    image: vllm/vllm-openai:v0.34.0
    command: [--model, m, --kv-cache-memory-bytes, 1G, --gpu-memory-utilization, "0.05"]
    environment: {CUDA_VISIBLE_DEVICES: "0"}
""",
    )
    result = check_service(fv_ml1, [fv_ml1_before_voices], service)
    assert result.verdict.verdict == "pass"
    assert result.seat.resident_bytes == 2**30  # the lower bound: its own KV cache


def test_reserve_owner_passes_on_its_card(
    fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    result = check_seat(fv_ml1, [fv_ml1_before_voices], "flash-next", [3])
    assert result.verdict.verdict == "pass", result.verdict.reasons


def test_other_seat_on_reserved_card_is_refused(
    fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    result = check_seat(fv_ml1, [fv_ml1_before_voices], "vllm-voices", [3])
    assert result.verdict.verdict == "refuse"
    (reserve,) = [r for r in result.verdict.reasons if r.rule == "reserve"]
    assert reserve.card == 3 and "flash-next-hold" in reason_text(reserve)
    assert any("flash-next-hold" in n for n in note_texts(result.verdict.nearest))


def test_unknown_service_on_reserved_card_is_refused(
    tmp_path: Path, fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    service = service_from(
        tmp_path,
        """
services:
  small:
    image: vllm/vllm-openai:v0.11.0
    command: [--model, m, --gpu-memory-utilization, "0.05", --kv-cache-memory, 1G]
    deploy: {resources: {reservations: {devices: [{device_ids: ["3"], capabilities: [gpu]}]}}}
""",
    )
    result = check_service(fv_ml1, [fv_ml1_before_voices], service)
    assert result.verdict.verdict == "refuse"
    assert any(
        r.rule == "reserve" and "flash-next-hold" in reason_text(r) for r in result.verdict.reasons
    )


# --- redeploys ---------------------------------------------------------------------------------


def test_redeploy_frees_the_seats_own_bytes(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    # After voices came up card 0 has 1.83 GiB free: only its own 10.49 GiB makes room for it.
    result = check_seat(fv_ml1, [fv_ml1_snapshot], "vllm-voices", [0])
    assert result.verdict.verdict == "pass", result.verdict.reasons
    (figures,) = result.verdict.figures
    own = fv_ml1_snapshot.card(0).processes[-1].used_bytes
    assert own is not None
    assert figures.free_bytes == (fv_ml1_snapshot.card(0).free_bytes or 0) + own
    assert any("redeploy" in w and "pid 4121" in w for w in note_texts(result.verdict.warnings))


def test_another_seat_is_not_a_redeploy(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    result = check_seat(fv_ml1, [fv_ml1_snapshot], "vllm-voices", [0], resident_bytes=9 * 2**30)
    # Its own process is freed; a 9 GiB seat (10,391.25 MiB at least: its 8,044,936,192 B of
    # weights, 1.5 GiB of KV and the 1,183 MiB context) at util 0.11 fits where 10.49 GiB was.
    assert result.verdict.verdict == "pass"
    assert result.verdict.need_bytes == 8_044_936_192 + (1_536 + 1_183) * 2**20
    other = check_seat(fv_ml1, [fv_ml1_snapshot], "flash-next", [0])
    assert other.verdict.verdict == "refuse"


def test_compose_service_redeploy_matched_by_port(
    tmp_path: Path, fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    card = fv_ml1_snapshot.card(1)
    held = 4 * 2**30
    running = Process(
        pid=777,
        used_bytes=held,
        cmdline="python3 -m vllm.entrypoints.openai.api_server --port 9100",
    )
    busy = card.model_copy(
        update={
            "free_bytes": (card.free_bytes or 0) - held,
            "used_bytes": (card.used_bytes or 0) + held,
            "processes": (*card.processes, running),
        }
    )
    snapshot = fv_ml1_snapshot.model_copy(
        update={"cards": tuple(busy if c.index == 1 else c for c in fv_ml1_snapshot.cards)}
    )
    service = service_from(
        tmp_path,
        """
services:
  side:
    image: vllm/vllm-openai:v0.11.0
    command: [--model, m, --port, "9100", --gpu-memory-utilization, "0.04", --kv-cache-memory, 2G]
    environment: [CUDA_VISIBLE_DEVICES=1]
""",
    )
    result = check_service(fv_ml1, [snapshot], service)
    assert result.verdict.verdict == "pass", result.verdict.reasons
    assert any("pid 777" in w for w in note_texts(result.verdict.warnings))
    # The same service on another port is not the process on the card: nothing is freed.
    without = check_service(fv_ml1, [snapshot], replace(service, port=9999))
    assert without.verdict.verdict == "refuse"


# --- cannot decide, bad input ------------------------------------------------------------------


def test_card_in_error_is_unknown(fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot) -> None:
    lost = Card(index=0, error="GpuIsLost")
    snapshot = fv_ml1_before_voices.model_copy(
        update={"cards": tuple(lost if c.index == 0 else c for c in fv_ml1_before_voices.cards)}
    )
    result = check_seat(fv_ml1, [snapshot], "vllm-voices", [0])
    assert result.verdict.verdict == "unknown"
    assert result.exit_code == Exit.CANNOT_DECIDE
    assert any(r.rule == "error" and "GpuIsLost" in reason_text(r) for r in result.verdict.reasons)


def test_bad_seat_and_cards(fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot) -> None:
    with pytest.raises(BadInputError, match=r"no seat named 'nope'.*vllm-voices"):
        check_seat(fv_ml1, [fv_ml1_before_voices], "nope", [0])
    with pytest.raises(BadInputError, match="no card 9"):
        check_seat(fv_ml1, [fv_ml1_before_voices], "vllm-voices", [9])
    with pytest.raises(BadInputError, match="takes 1 card"):
        check_seat(fv_ml1, [fv_ml1_before_voices], "vllm-voices", [0, 1])
    with pytest.raises(BadInputError, match="names no cards"):
        check_seat(fv_ml1, [fv_ml1_before_voices], "flash-next")
    with pytest.raises(BadInputError, match="not a vLLM seat"):
        check_seat(fv_ml1, [fv_ml1_before_voices], "parakeet-stt", [0], util=Decimal("0.1"))


def test_unknown_x_gpuplan_seat(
    tmp_path: Path, fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    service = service_from(
        tmp_path,
        "services: {s: {image: vllm/vllm-openai, x-gpuplan-seat: ghost, environment: [CUDA_VISIBLE_DEVICES=0]}}",
    )
    with pytest.raises(ComposeError, match="x-gpuplan-seat: 'ghost' names no seat") as caught:
        check_service(fv_ml1, [fv_ml1_before_voices], service)
    assert caught.value.exit_code == 2


def test_compose_card_the_host_lacks(
    tmp_path: Path, fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    service = service_from(
        tmp_path,
        "services: {s: {image: vllm/vllm-openai, command: [--model, m], environment: [CUDA_VISIBLE_DEVICES=4]}}",
    )
    with pytest.raises(ComposeError, match="there is no card 4"):
        check_service(fv_ml1, [fv_ml1_before_voices], service)


# --- overrides and warnings --------------------------------------------------------------------


def test_overrides_replace_catalogue_figures(
    fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    big = check_seat(
        fv_ml1, [fv_ml1_before_voices], "vllm-voices", [0], resident_bytes=13_000 * MiB
    )
    assert big.verdict.verdict == "refuse"
    assert any(r.rule == "room" for r in big.verdict.reasons)
    assert big.seat.resident_bytes == 13_000 * MiB
    kv = check_seat(fv_ml1, [fv_ml1_before_voices], "vllm-voices", [0], kv_cache_bytes=3 * 2**30)
    assert kv.seat.engine.kv_cache_bytes == 3 * 2**30
    assert "3221225472" in kv.verdict.flags


def test_compose_disagreements_are_warnings(
    tmp_path: Path, fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot
) -> None:
    service = service_from(
        tmp_path,
        """
services:
  voices:
    image: vllm/vllm-openai:v0.10.2
    command: >-
      --model voices-base --port 8027 --gpu-memory-utilization 0.11 --kv-cache-memory 3G
      --max-loras 6 --max-lora-rank 16 --lora-modules lv-yarros=/a lv-new=/b
    environment: [CUDA_VISIBLE_DEVICES=0]
""",
    )
    result = check_service(fv_ml1, [fv_ml1_before_voices], service)
    warnings = " | ".join(note_texts(result.verdict.warnings))
    assert result.verdict.seat == "vllm-voices"  # matched by its `match` regex on the port
    assert "vLLM 0.10.2; the catalogue says 0.11.0" in warnings
    assert "--kv-cache-memory-bytes 3.00 GiB (3221225472 B) disagrees" in warnings
    assert "--max-loras 6 disagrees with the catalogue's 4" in warnings
    assert "lv-hemingway is marked persisted" in warnings
    assert "lv-new" in warnings
    assert result.seat.engine.kv_cache_bytes == 3 * 2**30  # the file's value is judged


def test_util_default_cover_warning(fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot) -> None:
    result = check_seat(fv_ml1, [fv_ml1_before_voices], "flash-next", [3])
    assert result.verdict.util == "0.9"
    assert any("the version's default" in w for w in note_texts(result.verdict.warnings))
    tight = check_seat(fv_ml1, [fv_ml1_before_voices], "flash-next", [3], util=Decimal("0.98"))
    assert tight.verdict.verdict == "pass"
    assert tight.verdict.warnings == ()


# --- helpers -----------------------------------------------------------------------------------


def test_pick_snapshot(fv_ml1_before_voices: Snapshot) -> None:
    other = fv_ml1_before_voices.model_copy(update={"host": "fv-ml2"})
    assert pick_snapshot([fv_ml1_before_voices, other], "fv-ml2") is other
    with pytest.raises(BadInputError, match="pass --host"):
        pick_snapshot([fv_ml1_before_voices, other], None)


def test_inputs_digest_tracks_the_inputs(fv_ml1: Catalogue, fv_ml1_before_voices: Snapshot) -> None:
    a = check_seat(fv_ml1, [fv_ml1_before_voices], "vllm-voices", [0], util=Decimal("0.11"))
    b = check_seat(fv_ml1, [fv_ml1_before_voices], "vllm-voices", [0], util=Decimal("0.11"))
    c = check_seat(fv_ml1, [fv_ml1_before_voices], "vllm-voices", [0], util=Decimal("0.12"))
    assert inputs_digest(a) == inputs_digest(b) != inputs_digest(c)
    assert len(inputs_digest(a)) == 64


# --- the cut-off, for any free memory ---------------------------------------------------------


@cache
def _example() -> tuple[Catalogue, Snapshot]:
    return load_catalogue(FV_ML1_CATALOGUE), load_snapshot(FV_ML1_BEFORE_VOICES)


@settings(max_examples=30, deadline=None)
@given(free=st.integers(min_value=12 * 2**30, max_value=90 * 2**30))
def test_verdict_flips_at_the_predicted_cut_off(free: int) -> None:
    """What scripts/check_gpu_proof.py shows on a real card: pass at the cut-off, refuse one step above."""
    catalogue, before = _example()
    card = before.card(3)
    snapshot = before.model_copy(
        update={"cards": (*before.cards[:3], card.model_copy(update={"free_bytes": free}))}
    )
    # flash-next owns card 3's reserve, so only vLLM's gate decides (its room is the whole card).
    cut = largest_util_within(free - 1_183 * MiB, CUDA_TOTAL)
    assert cut is not None

    def judged(util: Decimal) -> Verdict:
        return check_seat(
            catalogue,
            [snapshot],
            "flash-next",
            [3],
            util=util,
            resident_bytes=2**30,
            kv_cache_bytes=2**29,
        ).verdict

    at, above = judged(cut), judged(cut + UTIL_STEP)
    assert at.verdict == "pass", at.reasons
    assert above.verdict == "refuse"
    assert [r.rule for r in above.reasons] == ["gate"]
    assert any(f"util ≤ {cut}" in n for n in note_texts(above.nearest))
