"""Issue 26's need floor for a seat as the catalogue declares it (DESIGN.md "What fits"): with a
KV size set, the need is at least weights + KV + non_kv (where profiled) + the host's cuda_context,
in `plan`, `check` and `pack` alike, whatever smaller resident the catalogue declares."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.cli import main as cli
from placement.cli.notes_text import note_text, note_texts
from placement.fit.kv import kv_need_floor, need_floored, with_need_floors
from placement.pack.packer import pack_seats, seat_items
from seats.loader import load_catalogue
from seats.model import Catalogue
from seats.units import GiB, MiB
from tests.conftest import FV_ML1_BEFORE_VOICES, FV_ML1_CATALOGUE

# fv-ml1's vllm-voices: the weights are Qwen3-4B's bf16 safetensors total_size.
WEIGHTS = 8_044_936_192
CONTEXT = 1183 * MiB
PIN = "      kv_cache_memory: 1536 MiB\n"


def catalogue_with(tmp_path: Path, kv: str) -> Path:
    """fv-ml1 with vllm-voices' 1.5 GiB pin set to `kv` (its resident stays 10,740 MiB)."""
    text = FV_ML1_CATALOGUE.read_text(encoding="utf-8")
    assert text.count(PIN) == 1
    path = tmp_path / "fv-ml1.yaml"
    path.write_text(text.replace(PIN, f"      kv_cache_memory: {kv}\n"), encoding="utf-8")
    return path


def test_the_example_seat_is_within_its_floor(fv_ml1: Catalogue) -> None:
    # 8,044,936,192 + 1,536 MiB + 1,183 MiB = 10,896,014,336 B ≤ 10,740 MiB (11,261,706,240 B).
    voices = fv_ml1.seat("vllm-voices")
    assert kv_need_floor(voices, CONTEXT) == WEIGHTS + (1536 + 1183) * MiB
    assert with_need_floors(fv_ml1).warnings == ()
    assert with_need_floors(fv_ml1).catalogue is fv_ml1


def test_a_resident_below_weights_kv_and_context_is_raised_to_them(tmp_path: Path) -> None:
    # A 3 GiB pin: 8,044,936,192 + 3,072 MiB + 1,183 MiB = 12,506,627,072 B > 10,740 MiB.
    catalogue = load_catalogue(catalogue_with(tmp_path, "3 GiB"))
    floored = with_need_floors(catalogue)
    (warning,) = note_texts(floored.warnings)
    need = WEIGHTS + 3 * GiB + CONTEXT
    assert need == 12_506_627_072
    assert floored.catalogue.seat("vllm-voices").resident_bytes == need
    assert warning.startswith("vllm-voices: declared resident 10.49 GiB is below the 11.65 GiB")
    assert "(weights 7.49 GiB + KV 3.00 GiB + cuda_context 1.16 GiB)" in warning
    assert warning.endswith(f"raise resident to {need:,} B")
    # Every other seat is the same object: nothing else is touched.
    others = [s for s in floored.catalogue.seats if s.name != "vllm-voices"]
    before = [s for s in catalogue.seats if s.name != "vllm-voices"]
    assert others == before
    assert all(new is old for new, old in zip(others, before, strict=True))


def test_no_pin_no_floor_and_a_seat_without_weights_counts_kv_and_context(
    fv_ml1: Catalogue,
) -> None:
    cyberprev = fv_ml1.seat("cyberprev")  # util 0.40, no KV pin: its cache is the leftover
    assert kv_need_floor(cyberprev, CONTEXT) is None
    assert need_floored(cyberprev, CONTEXT) == (cyberprev, None)
    # gen-small pins 24 GiB and declares no weights: 24 GiB + 1,183 MiB ≤ its 36,900 MiB.
    gen_small = fv_ml1.seat("gen-small")
    assert kv_need_floor(gen_small, CONTEXT) == 24 * GiB + CONTEXT
    small = gen_small.model_copy(update={"resident_bytes": 20 * GiB})
    raised, warning = need_floored(small, CONTEXT)
    assert raised.resident_bytes == 24 * GiB + CONTEXT
    assert warning is not None and "no weights known + KV 24.00 GiB" in note_text(warning)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object], str]:
    code = cli.main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


@pytest.fixture(autouse=True)
def _no_env_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)


def test_check_judges_the_declared_seat_at_its_floor(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Before voices came up card 0 had 12.32 GiB free: a 10,740 MiB resident fits, the
    12,506,627,072 B the 3 GiB pin needs (11.65 GiB + the 256 MiB margin) fits too, a 4 GiB
    pin's 13,580,368,896 B (12.65 GiB) does not — refused on room, where before it passed."""
    base = ("check", "vllm-voices", "--gpu", "0", "--snapshot", str(FV_ML1_BEFORE_VOICES))
    code, verdict, _ = run(capsys, *base, "--catalogue", str(catalogue_with(tmp_path, "3 GiB")))
    assert code == 0 and verdict["need_bytes"] == WEIGHTS + 3 * GiB + CONTEXT
    warnings = verdict["warnings"]
    assert isinstance(warnings, list)
    said = "judged with a resident of 11.65 GiB: declared resident 10.49 GiB is below what it holds"
    assert any(said in w for w in warnings)
    code, verdict, _ = run(capsys, *base, "--catalogue", str(catalogue_with(tmp_path, "4 GiB")))
    assert code == 1 and verdict["need_bytes"] == WEIGHTS + 4 * GiB + CONTEXT
    reasons = verdict["reasons"]
    assert isinstance(reasons, list) and [r["rule"] for r in reasons] == ["room"]


def test_plan_holds_the_absent_seat_at_its_floor(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Before voices came up, the running-but-absent vllm-voices is held on card 0 by its need:
    with the 1.5 GiB pin its declared 10,740 MiB, with a 4 GiB pin 13,580,368,896 B, and the
    plan says why."""
    argv = ("plan", "--snapshot", str(FV_ML1_BEFORE_VOICES))
    code, data, _ = run(capsys, *argv, "--catalogue", str(FV_ML1_CATALOGUE))
    assert code == 0
    assert _card(data, 0)["held_bytes"] == 10_740 * MiB and data["warnings"] == []
    code, data, _ = run(capsys, *argv, "--catalogue", str(catalogue_with(tmp_path, "4 GiB")))
    assert code == 0
    assert _card(data, 0)["held_bytes"] == WEIGHTS + 4 * GiB + CONTEXT
    warnings = data["warnings"]
    assert isinstance(warnings, list)
    (warning,) = [w for w in warnings if "declared resident" in w]
    assert warning.startswith("vllm-voices: declared resident 10.49 GiB is below the 12.65 GiB")


def _card(data: dict[str, object], index: int) -> dict[str, object]:
    cards = data["cards"]
    assert isinstance(cards, list)
    found: dict[str, object] = next(c for c in cards if c["index"] == index)
    return found


def test_pack_counts_the_floor(tmp_path: Path) -> None:
    catalogue = load_catalogue(catalogue_with(tmp_path, "4 GiB"))
    card = 101_972_967_424
    (item,) = seat_items(catalogue, catalogue.seat("vllm-voices"), card)
    assert item.need_bytes == WEIGHTS + 4 * GiB + CONTEXT
    result = pack_seats(catalogue, card)
    assert any(
        n.startswith("vllm-voices: declared resident 10.49 GiB") for n in note_texts(result.notes)
    )
    (used,) = [c.used_bytes for c in result.cards if "vllm-voices" in c.seats]
    assert used >= item.need_bytes
