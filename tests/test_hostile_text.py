"""Text from outside is data: hostile command lines through every output (DESIGN.md "Text from outside").

A foreign process on the card carries markup, a Markdown image, a pipe, backticks and a secret.
`ledger` (table and JSON), `snapshot --json`, and the weekly report in Markdown and HTML must show
it as text: the secret masked, no live tag, no image, no broken table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from inventory.snapshot import Process, Snapshot
from placement.cli.main import main
from placement.report.text import code_span
from tests.placement.report.test_figures import SMALL_CATALOGUE, small_snapshots, write_ledger

HOSTILE = (
    "a|b `tick` --api-key sk-LIVE-123 <img src=x onerror=alert(1)> ![x](http://e.x/p.png) "
    "``two`` HF_TOKEN=hf_SECRET"
)
SECRETS = ("sk-LIVE-123", "hf_SECRET")


def unowned_changed(snapshots: list[Snapshot], **fields: str) -> list[Snapshot]:
    """`snapshots` with `fields` set on every process no seat owns (the others as they were).

    Each such process is built anew, so its validators (the masking of its cmdline) run.
    """
    out = []
    for snapshot in snapshots:
        cards = []
        for card in snapshot.cards:
            procs = tuple(
                Process.model_validate(p.model_dump() | fields) if p.seat is None else p
                for p in card.processes
            )
            cards.append(card.model_copy(update={"processes": procs}))
        out.append(snapshot.model_copy(update={"cards": tuple(cards)}))
    return out


def hostile(snapshots: list[Snapshot]) -> list[Snapshot]:
    return unowned_changed(snapshots, cmdline=HOSTILE)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    catalogue = tmp_path / "small.yaml"
    catalogue.write_text(yaml.safe_dump(SMALL_CATALOGUE), encoding="utf-8")
    return catalogue, write_ledger(tmp_path / "l.sqlite", hostile(small_snapshots()))


def no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def test_markdown_report_shows_it_inside_a_code_span(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    catalogue, ledger = files
    out = tmp_path / "md"
    argv = ["report", "--ledger", str(ledger), "--catalogue", str(catalogue), "--out", str(out)]
    assert main(argv) == 0
    text = (out / "report.md").read_text()
    no_secret(text)
    rows = [line for line in text.splitlines() if "onerror" in line]
    assert rows, "the foreign process is listed"
    for row in rows:
        # Outside a code span nothing of it remains: strip the spans and look again.
        bare = re.sub(r"(`+) .*? \1|(`+)[^`]*?\2", "", row)
        assert "<img" not in bare and "![" not in bare
        # In a table, pipes are escaped so the table keeps its columns.
        if row.startswith("|"):
            assert "a\\|b" in row and row.count(" | ") == row.replace("\\|", "").count(" | ")


def test_html_report_escapes_it(files: tuple[Path, Path], tmp_path: Path) -> None:
    catalogue, ledger = files
    argv = ["report", "--ledger", str(ledger), "--catalogue", str(catalogue), "--format", "html"]
    assert main([*argv, "--out", str(tmp_path / "h")]) == 0
    page = (tmp_path / "h" / "report.html").read_text()
    no_secret(page)
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert 'src="http://evil' not in page


def test_ledger_and_snapshot_outputs_carry_no_secret(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue, _ = files
    snapshot = hostile(small_snapshots())[6]  # a minute with the foreign process
    path = tmp_path / "s.json"
    raw = json.loads(snapshot.model_dump_json())
    # A file written elsewhere, unmasked, read back by `snapshot --from`.
    for card in raw["cards"]:
        for process in card["processes"]:
            if process["seat"] is None:
                process["cmdline"] = HOSTILE.replace("***", "sk-LIVE-123")
    path.write_text(json.dumps(raw))
    fresh = tmp_path / "fresh.sqlite"
    assert main(["snapshot", "--from", str(path), "--json", "--ledger", str(fresh)]) == 0
    argv = ["ledger", "--catalogue", str(catalogue), "--ledger", str(fresh), "--max-age", "1000d"]
    assert main([*argv, "--json"]) == 0
    assert main(argv) == 0
    out = capsys.readouterr().out
    no_secret(out)
    assert out.count("--api-key ***") >= 2  # shown by snapshot --json and ledger --json, masked


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("plain", "`plain`"),
        ("a `b` c", "`` a `b` c ``"),
        ("``two``", "``` ``two`` ```"),
    ],
)
def test_code_span_fences_past_every_backtick_run(text: str, span: str) -> None:
    assert code_span(text) == span
