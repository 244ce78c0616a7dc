"""`gpuplan pack` on the command line: text and JSON answers, the card size's sources, every exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from placement.cli.main import main
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT, ROOT

GIB = 2**30
MIB = 2**20


def gpuplan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["pack", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_fv_ml1_packs_onto_four_cards_of_its_own_size(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gpuplan(
        capsys, "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(FV_ML1_SNAPSHOT), "--json"
    )
    assert code == 0, err
    answer = json.loads(out)
    assert answer["schema"] == 1
    # The snapshot's CUDA total: 97,871 − 622 MiB (docs/facts.md §3); margin 256 MiB.
    assert answer["card_bytes"] == (97871 - 622) * MIB
    assert answer["cuda_total_bytes"] == answer["card_bytes"]  # named as in plan's cards
    assert "total_bytes" not in answer  # an NVML total: pack has none
    assert answer["margin_bytes"] == 256 * MIB
    assert answer["cards_needed"] == 4
    assert answer["lower_bound"] == 4
    assert answer["optimal"] is True
    assert answer["seats"] == 9
    placed = sorted(name for card in answer["cards"] for name in card["seats"])
    assert placed == sorted(
        [
            "cyberprev",
            "gen-small",
            "parakeet-stt",
            "vllm-voices",
            "chat-large",
            "embed",
            "code-assist",
            "rerank",
            "flash-next",
        ]
    )
    flash = next(card for card in answer["cards"] if "flash-next" in card["seats"])
    assert flash["seats"] == ["flash-next"]
    assert flash["whole"] == "exclusive"
    for card in answer["cards"]:
        assert card["used_bytes"] + card["free_bytes"] == answer["room_bytes"]
        assert card["free_bytes"] >= 0


def test_text_answer_names_the_bound_and_optimality(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = gpuplan(
        capsys, "--catalogue", str(FV_ML1_CATALOGUE), "--card-bytes", "94.97 GiB"
    )
    assert code == 0
    assert "cards needed: 4   lower bound: 4   first-fit-decreasing: 4   optimal" in out
    assert "flash-next  (exclusive)" in out


def test_solver_runs_when_greedy_misses_and_json_stays_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Nine seats that fill three 1,000 MiB cards exactly in triplets; FFD needs four.
    sizes = [450, 300, 250, 400, 350, 250, 420, 290, 290]
    catalogue = tmp_path / "c.yaml"
    catalogue.write_text(
        "hosts:\n  h: {cards: 4}\nseats:\n"
        + "".join(f"  - {{name: s{i}, resident: {w} MiB}}\n" for i, w in enumerate(sizes))
    )
    for solver in ("cbc", "highs"):
        code, out, err = gpuplan(
            capsys,
            "--catalogue",
            str(catalogue),
            "--card-bytes",
            "1000 MiB",
            "--solver",
            solver,
            "--json",
        )
        assert code == 0, err
        answer = json.loads(out)  # the HiGHS banner must not reach stdout
        assert answer["cards_needed"] == 3
        assert answer["greedy_cards"] == 4
        assert answer["optimal"] is True
        assert answer["solver"] == solver


def test_a_seat_larger_than_a_card_exits_1_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gpuplan(capsys, "--catalogue", str(FV_ML1_CATALOGUE), "--card-bytes", "80 GiB")
    assert code == 1
    assert out == ""
    assert err.startswith("error: no number of cards holds flash-next: needs 93.00 GiB")
    assert "13.25 GiB short" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--catalogue", str(FV_ML1_CATALOGUE)], "pack needs the card size"),
        (["--catalogue", str(FV_ML1_CATALOGUE), "--card-bytes", "96 GB"], "GB"),
        (["--catalogue", str(FV_ML1_CATALOGUE), "--card-bytes", "0"], "card-bytes"),
        (
            ["--catalogue", str(FV_ML1_CATALOGUE), "--card-bytes", "90GiB", "--time-limit", "0"],
            "time-limit",
        ),
        (["--card-bytes", "90GiB"], "no catalogue"),
        (["--catalogue", str(FV_ML1_CATALOGUE), "--solver", "glpk"], "invalid choice"),
        (["--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", "/nonexistent.json"], "nonexistent"),
    ],
)
def test_bad_input_exits_2(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    code, _, err = gpuplan(capsys, *argv)
    assert code == 2
    assert message in err


@pytest.mark.slow
def test_installed_command_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "placement",
            "pack",
            "--catalogue",
            str(FV_ML1_CATALOGUE),
            "--card-bytes",
            "94.97GiB",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["cards_needed"] == 4
