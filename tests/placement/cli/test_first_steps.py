"""Mistakes of a first run, each answered with its real cause: an option before the command,
a catalogue given to --add, a resident written without its unit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from placement.cli.main import main
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

SOURCE = ["--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(FV_ML1_SNAPSHOT)]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--catalogue", "X", "check", "a", "--gpu", "0"], "gpuplan check --catalogue …"),
        (["--debug", "--snapshot=s.json", "plan"], "gpuplan plan --snapshot …"),
        (["--catalogue", "X"], "gpuplan COMMAND --catalogue …"),
    ],
)
def test_an_option_before_the_command_says_options_go_after_it(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "options go after the command" in err and said in err
    assert "invalid choice" not in err


def test_the_mistake_is_a_json_error_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "ledger", *SOURCE]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["exit"] == 2 and "--json is an option of a command" in error["message"]


def test_top_level_options_before_the_command_still_work(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--debug", "ledger", *SOURCE]) == 0
    assert "options go after" not in capsys.readouterr().err


@pytest.mark.parametrize("command", ["check", "plan"])
def test_a_catalogue_given_to_add_is_named_as_one(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, *SOURCE, "--add", str(FV_ML1_CATALOGUE)]) == 2
    err = capsys.readouterr().err
    assert f"error: {FV_ML1_CATALOGUE}: this is a catalogue (it has hosts:)" in err
    assert "--add wants a seat file" in err
    assert "unknown key" not in err


def test_a_catalogue_of_reserves_alone_is_named_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "r.yaml"
    file.write_text("reserves: []\nseats: []\n", encoding="utf-8")
    assert main(["plan", *SOURCE, "--add", str(file)]) == 2
    assert "this is a catalogue (it has reserves:)" in capsys.readouterr().err


def _catalogue_with(tmp_path: Path, resident: str) -> Path:
    data = yaml.safe_load(FV_ML1_CATALOGUE.read_text(encoding="utf-8"))
    data["seats"].append({"name": "tiny", "host": "fv-ml1", "resident": resident})
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_a_resident_under_a_mib_is_warned_about_naming_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue = _catalogue_with(tmp_path, "12 B")
    index = len(yaml.safe_load(catalogue.read_text(encoding="utf-8"))["seats"]) - 1
    argv = ["ledger", "--catalogue", str(catalogue), "--snapshot", str(FV_ML1_SNAPSHOT)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"warning: {catalogue}: seats[{index}].resident (tiny) is 12 B, under 1 MiB" in err
    assert "`resident: 12 GiB`" in err
    # One MiB is small but possible: no word.
    assert main([*argv[:2], str(_catalogue_with(tmp_path, "1 MiB")), *argv[3:]]) == 0
    assert "under 1 MiB" not in capsys.readouterr().err


def test_an_added_seat_under_a_mib_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = tmp_path / "one.yaml"
    one.write_text("name: tiny\nresident: 1023 KiB\n", encoding="utf-8")
    many = tmp_path / "many.yaml"
    many.write_text(
        "- {name: fine, resident: 2 GiB}\n- {name: bare, resident: 6}\n", encoding="utf-8"
    )
    main(["plan", *SOURCE, "--add", str(one), "--add", str(many)])
    err = capsys.readouterr().err
    assert f"warning: {one}: resident (tiny) is 1,047,552 B, under 1 MiB" in err
    assert f"warning: {many}: [1].resident (bare) is 6 B" in err
    assert "(fine)" not in err
