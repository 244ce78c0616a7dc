"""Text from outside is shown escaped in every text output (issue 32 item 7, DESIGN.md "Text from outside").

`gpuplan ledger` printed a process's command line with ESC, NUL and U+202E raw, and a newline in
it started a new line of the table: a process could print a fake `PASS` row, or erase its own.
Command lines, a card's error and a host's driver come from whoever runs a process or writes a
snapshot; they go through the one escaper (seats.names.escaped), never raw.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement.cli.main import main
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT
from tests.placement.cli.test_undelivered import check_tts, write_tts_catalogue
from tests.test_forged_names import _forged_lines

HOSTILE = "miner --pool\n  PASS  fake → fv-ml1:2\x1b[2K\x00\u202eSSAP"
SHOWN = "miner --pool\\u000a  PASS  fake → fv-ml1:2\\u001b[2K\\u0000\\u202eSSAP"
RAW = ("\x1b", "\x00", "\u202e", "\r")


def _snapshot(tmp_path: Path, *, error: str | None = None, driver: str | None = None) -> Path:
    """fv-ml1 whose card-2 reranker runs under a hostile command line (so no seat matches it)."""
    raw = json.loads(FV_ML1_SNAPSHOT.read_text(encoding="utf-8"))
    raw["cards"][2]["processes"][1]["cmdline"] = HOSTILE
    if error is not None:
        card = raw["cards"][3]
        card.update(error=error, processes=[])
        for key in ("total_bytes", "reserved_bytes", "used_bytes", "free_bytes"):
            card[key] = None
    if driver is not None:
        raw["driver"] = driver
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _clean(text: str) -> None:
    assert not _forged_lines(text), text
    assert not any(char in text for char in RAW), [c for c in RAW if c in text]


def test_ledger_shows_a_hostile_command_line_escaped_on_its_own_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = _snapshot(tmp_path, driver="560.35\x1b[2K\nPASS  fake → fv-ml1:0")
    assert main(["ledger", "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(snapshot)]) == 0
    out = capsys.readouterr().out
    _clean(out)
    rows = [line for line in out.splitlines() if line.startswith("2 ") and "6330" in line]
    assert len(rows) == 1
    assert rows[0].endswith(SHOWN)  # the whole line in its one cell
    assert "driver 560.35\\u001b[2K\\u000aPASS  fake → fv-ml1:0" in out


def test_a_hostile_command_line_stored_in_a_ledger_is_shown_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    db = str(tmp_path / "l.sqlite")
    catalogue = ["--catalogue", str(FV_ML1_CATALOGUE)]
    assert main(["snapshot", "--from", str(_snapshot(tmp_path)), *catalogue, "--ledger", db]) == 0
    capsys.readouterr()
    assert main(["ledger", *catalogue, "--ledger", db, "--max-age", "365000d"]) == 0
    out = capsys.readouterr().out
    _clean(out)
    assert SHOWN[:40] in out
    # --json keeps the command line whole: JSON's own escapes make it one string.
    assert main(["ledger", *catalogue, "--ledger", db, "--max-age", "365000d", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    lines = [p["cmdline"] for host in data["hosts"] for p in host["foreign"]]
    assert lines == [HOSTILE]


@pytest.mark.parametrize("command", ["ledger", "plan", "check"])
def test_a_card_error_from_a_snapshot_is_shown_escaped(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = _snapshot(tmp_path, error="GPU is lost\r\x1b[2KPASS  fake → fv-ml1:3")
    words = {
        "ledger": ["ledger"],
        "plan": ["plan"],
        "check": ["check", "vllm-voices", "--gpu", "3"],
    }[command]
    main([*words, "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(snapshot)])
    captured = capsys.readouterr()
    _clean(captured.out + captured.err)
    assert "GPU is lost\\u000d\\u001b[2KPASS  fake → fv-ml1:3" in captured.out + captured.err


def test_holds_show_a_hostile_user_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    catalogue = write_tts_catalogue(tmp_path)
    db = tmp_path / "l.sqlite"
    monkeypatch.setenv("USER", "ci\nPASS  fake → fv-ml1:1")
    assert main(check_tts(catalogue, db)) == 0
    capsys.readouterr()
    assert main(["holds", "--ledger", str(db)]) == 0
    out = capsys.readouterr().out
    _clean(out)
    assert "ci\\u000aPASS  fake → fv-ml1:1" in out
