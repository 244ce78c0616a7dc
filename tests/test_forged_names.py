"""Names cannot forge output (issue 24 item 7, DESIGN.md "Text from outside").

A seat named `"new\\nPASS  fake → fv-ml1:0"`, or holding `\\e[2K\\r` or a bidirectional override,
used to print a fake PASS or PLACED line. Catalogue, `--add` and compose names like that are bad
input (exit 2, naming the field); names the loader never saw (a snapshot's host, the `seat` field
a snapshot from another host carries) are escaped where they are shown, in Markdown too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from placement.cli.main import main
from seats.errors import CatalogueError
from seats.loader import load_catalogue
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT
from tests.placement.report.test_figures import SMALL_CATALOGUE, small_snapshots, write_ledger
from tests.test_hostile_text import unowned_changed

FORGERS = {
    "newline": "new\nPASS  fake → fv-ml1:0",
    "escape": "new\x1b[2K\rPASS  fake",
    "carriage return": "new\rPLACED   fake → card 0",
    "bidi override": "new\u202eSSAP",
    "line separator": "new\u2028PASS  fake",
}
SNAPSHOT = ["--snapshot", str(FV_ML1_SNAPSHOT)]


def _forged_lines(text: str) -> list[str]:
    """Lines (split as a terminal shows them) that begin with a verdict the tool did not print."""
    return [
        line
        for line in re.split(r"[\n\r\u2028]|\x1b\[2K", text)
        if "fake" in line and re.match(r"\s*(PASS|PLACED)\b", line)
    ]


def _catalogue(tmp_path: Path, edit: str, forger: str) -> Path:
    data = yaml.safe_load(FV_ML1_CATALOGUE.read_text(encoding="utf-8"))
    if edit == "seats[2].name":
        data["seats"][2]["name"] = forger
    elif edit == "seats[2].host":
        data["seats"][2]["host"] = forger
    elif edit == "reserves[0].name":
        data["reserves"][0]["name"] = forger
    elif edit == "reserves[0].for[0]":
        data["reserves"][0]["for"] = [forger]
    path = tmp_path / "catalogue.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


@pytest.mark.parametrize("forger", FORGERS.values(), ids=FORGERS.keys())
@pytest.mark.parametrize(
    "field", ["seats[2].name", "seats[2].host", "reserves[0].name", "reserves[0].for[0]"]
)
def test_a_catalogue_name_that_could_forge_a_line_is_bad_input_naming_its_field(
    field: str, forger: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _catalogue(tmp_path, field, forger)
    with pytest.raises(CatalogueError) as caught:
        load_catalogue(path)
    assert caught.value.loc == field
    assert "may not hold control characters" in caught.value.msg
    assert main(["plan", "--catalogue", str(path), *SNAPSHOT]) == 2
    out, err = capsys.readouterr()
    assert f"{field}: " in err and not _forged_lines(out + err)
    assert "\n" not in err.strip() and "\x1b" not in err and "\u202e" not in err


def test_a_host_key_that_could_forge_a_line_is_bad_input_shown_escaped(tmp_path: Path) -> None:
    data = {"hosts": {"fv\nPASS  fake": {"cards": 1}}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(CatalogueError, match=r"hosts\.'fv\\u000aPASS  fake': ") as caught:
        load_catalogue(path)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("forger", FORGERS.values(), ids=FORGERS.keys())
@pytest.mark.parametrize("command", ["check", "plan"])
def test_an_add_file_with_such_a_name_prints_no_fake_verdict(
    command: str, forger: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seat = tmp_path / "new.yaml"
    seat.write_text(yaml.safe_dump({"name": forger, "resident": "6 GiB"}), encoding="utf-8")
    gpu = ["--gpu", "0"] if command == "check" else []
    argv = [command, *gpu, "--catalogue", str(FV_ML1_CATALOGUE), *SNAPSHOT, "--add", str(seat)]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert not _forged_lines(out + err)
    assert f"{seat}: name: " in err


@pytest.mark.parametrize("forger", FORGERS.values(), ids=FORGERS.keys())
def test_a_compose_service_with_such_a_name_prints_no_fake_pass(
    forger: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compose = tmp_path / "compose.yaml"
    service = {
        "image": "vllm/vllm-openai:v0.11.0",
        "command": ["--model", "m", "--gpu-memory-utilization", "0.05"],
        "environment": ["CUDA_VISIBLE_DEVICES=3"],
    }
    compose.write_text(
        yaml.safe_dump({"services": {forger: service}}, allow_unicode=True), encoding="utf-8"
    )
    argv = ["check", "--compose", str(compose), "--catalogue", str(FV_ML1_CATALOGUE), *SNAPSHOT]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert not _forged_lines(out + err)
    assert f"{compose}: services.'new\\u" in err
    assert main([*argv, "--json"]) == 2
    assert (
        "may not hold control characters" in json.loads(capsys.readouterr().out)["error"]["message"]
    )


def test_a_snapshot_file_whose_host_could_forge_a_line_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = json.loads(FV_ML1_SNAPSHOT.read_text(encoding="utf-8"))
    raw["host"] = "other\nPASS  fake → other:0"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(raw), encoding="utf-8")
    argv = ["plan", "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(FV_ML1_SNAPSHOT)]
    assert main([*argv, "--snapshot", str(other)]) == 2
    out, err = capsys.readouterr()
    assert not _forged_lines(out + err)
    assert f"{other}: host: 'other\\u000aPASS  fake → other:0' holds U+000A" in err


def test_a_snapshot_seat_field_from_another_host_prints_no_fake_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = json.loads(FV_ML1_SNAPSHOT.read_text(encoding="utf-8"))
    for card in raw["cards"]:
        card["name"] = "GPU\rPLACED   fake → card 9"
        for process in card["processes"]:
            process["seat"] = "x\nPASS  fake → fv-ml1:0"
    path = tmp_path / "other.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    assert main(["snapshot", "--from", str(path)]) == 0
    out, err = capsys.readouterr()
    assert not _forged_lines(out + err)
    assert "x\\u000aPASS  fake → fv-ml1:0" in out and "GPU\\u000dPLACED" in out


def test_a_prometheus_host_label_that_could_forge_a_line_is_escaped() -> None:
    from inventory.prometheus.reader import host_of

    assert host_of({"host": "h1\r\x1b[2KPASS"}) == "'h1\\u000d\\u001b[2KPASS'"
    assert host_of({"instance": "fv-ml1:9400"}) == "fv-ml1"


# A snapshot's `seat` field is written by whichever host took it: the report shows it as text.
HOSTILE_SEAT = "[x](javascript:alert(1))<img src=x onerror=alert(1)>"


@pytest.mark.parametrize("seat", [HOSTILE_SEAT, "x\nPASS  fake", "x`y` **z**"])
def test_a_snapshot_seat_field_reaches_markdown_and_html_as_text(
    seat: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    catalogue = tmp_path / "small.yaml"
    catalogue.write_text(yaml.safe_dump(SMALL_CATALOGUE), encoding="utf-8")
    ledger = write_ledger(tmp_path / "l.sqlite", unowned_changed(small_snapshots(), seat=seat))
    argv = ["report", "--ledger", str(ledger), "--catalogue", str(catalogue)]
    assert main([*argv, "--out", str(tmp_path / "md")]) == 0
    markdown = (tmp_path / "md" / "report.md").read_text(encoding="utf-8")
    rows = [line for line in markdown.splitlines() if "not in catalogue" in line]
    assert rows, "the seat the catalogue does not know is listed"
    for row in rows:
        # Outside its code span nothing of the name remains: strip the spans and look again.
        bare = re.sub(r"(`+) .*? \1|(`+)[^`]*?\2", "", row)
        assert "javascript" not in bare and "<img" not in bare and "**" not in bare
    assert not _forged_lines(markdown)
    assert main([*argv, "--format", "html", "--out", str(tmp_path / "h")]) == 0
    page = (tmp_path / "h" / "report.html").read_text(encoding="utf-8")
    assert "<img src=x" not in page and 'href="javascript' not in page
    assert not _forged_lines(page)
