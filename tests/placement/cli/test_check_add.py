"""`gpuplan check --add SEAT.yaml`: seats not in the catalogue, nearest other cards, did-you-mean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.cli import main as cli

ROOT = Path(__file__).resolve().parents[3]
SOURCE = [
    "--catalogue",
    "seats/catalogue/fv-ml1.yaml",
    "--snapshot",
    "seats/catalogue/fv-ml1-before-voices.snapshot.json",
]


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)


def gpuplan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main([*argv, *SOURCE])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_added_seat_refused_names_the_card_that_takes_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = gpuplan(capsys, "check", "--add", "examples/new-4gib.yaml", "--gpu", "2")
    assert code == 1
    assert out.startswith("REFUSED  new-4gib → fv-ml1:2")
    assert "  nearest: fv-ml1:1 takes it: need 4.00 GiB per card" in out
    code, out, _ = gpuplan(
        capsys, "check", "--add", "examples/new-4gib.yaml", "--gpu", "2", "--json"
    )
    assert code == 1
    data = json.loads(out)
    assert data["verdict"] == "refuse"
    (near,) = data["nearest_cards"]
    assert near["host"] == "fv-ml1" and near["cards"] == [1]
    assert near["need_bytes"] == 4 * 2**30 and near["room_after_bytes"] > 0


def test_an_added_seat_that_fits_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = gpuplan(capsys, "check", "--add", "examples/new-4gib.yaml", "--gpu", "1")
    assert code == 0
    assert out.startswith("PASS  new-4gib → fv-ml1:1")
    assert "takes it" not in out


def test_several_added_seats_need_a_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "two.yaml"
    path.write_text("- {name: a, resident: 1 GiB}\n- {name: b, resident: 2 GiB}\n")
    code, _, err = gpuplan(capsys, "check", "--add", str(path), "--gpu", "1")
    assert code == 2
    assert "--add gives 2 seats (a, b): name the one to check" in err
    code, out, _ = gpuplan(capsys, "check", "b", "--add", str(path), "--gpu", "1")
    assert code == 0
    assert out.startswith("PASS  b → fv-ml1:1")


def test_an_added_seat_may_not_take_a_catalogue_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("{name: embed, resident: 1 GiB}\n")
    code, _, err = gpuplan(capsys, "check", "--add", str(path), "--gpu", "1")
    assert code == 2
    assert "seat name 'embed' is already used by the catalogue" in err


def test_an_added_seat_without_cards_asks_for_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = gpuplan(capsys, "check", "--add", "examples/new-4gib.yaml")
    assert code == 2
    assert "names no cards; pass --gpu" in err


def test_a_misspelt_seat_or_host_gets_a_did_you_mean(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = gpuplan(capsys, "check", "vllm-voice", "--gpu", "0")
    assert code == 2
    assert "no seat named 'vllm-voice' in the catalogue; did you mean vllm-voices?" in err
    assert "--add SEAT.yaml" in err
    code, _, err = gpuplan(capsys, "check", "vllm-voices", "--gpu", "0", "--host", "fv-m1")
    assert code == 2
    assert "--host fv-m1: not a host of the catalogue; did you mean fv-ml1?" in err


def test_compose_names_an_added_seat(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n"
        "  embedder:\n"
        "    image: example/embedder:1\n"
        "    x-gpuplan-seat: new-4gib\n"
        "    deploy: {resources: {reservations: {devices: [{driver: nvidia, device_ids: ['2'], capabilities: [gpu]}]}}}\n"
    )
    code, out, _ = gpuplan(
        capsys, "check", "--compose", str(compose), "--add", "examples/new-4gib.yaml", "--json"
    )
    assert code == 1
    (verdict,) = json.loads(out)["verdicts"]
    assert verdict["service"] == "embedder" and verdict["seat"] == "new-4gib"
    assert verdict["resident_bytes"] == 4 * 2**30
    assert [(n["host"], n["cards"]) for n in verdict["nearest_cards"]] == [("fv-ml1", [1])]
    code, out, err = gpuplan(capsys, "check", "--compose", str(compose))
    assert code == 2
    assert "'new-4gib' names no seat of the catalogue" in out + err
