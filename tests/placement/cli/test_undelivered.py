"""A verdict that could not be delivered decides nothing (DESIGN.md "Never yes by accident", issue 32 item 3).

`gpuplan check … >&-` ended in an AttributeError traceback, exit 120, and a `check --ledger` still
recorded its pass and a 30-minute hold for a verdict nobody saw. Now stdout closed (`>&-`) or
full (`>/dev/full`) is exit 3 with one line, and the ledger is left as it was. Each run is a
real process started by a shell with its stdout closed or pointed at the full device.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inventory.ledger.store import open_ledger
from inventory.snapshot import load_snapshot
from placement.cli.main import main
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT, ROOT

SOURCE = ["--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(FV_ML1_SNAPSHOT)]
CLOSED = ">&-"
FULL = ">/dev/full"
UNDELIVERED = "error: stdout: the output could not be delivered"


def _shell(words: list[str], redirect: str, cwd: Path = ROOT) -> tuple[int, str]:
    """(exit code, stderr) of `gpuplan WORDS REDIRECT`, run by sh."""
    command = shlex.join([sys.executable, "-m", "placement", *words]) + f" {redirect}"
    done = subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, cwd=cwd, timeout=120, check=False
    )
    return done.returncode, done.stderr


def write_tts_catalogue(folder: Path) -> Path:
    """fv-ml1 with tts-0, a 3 GiB seat that passes on card 1 (5,704 MiB free)."""
    data = yaml.safe_load(FV_ML1_CATALOGUE.read_text())
    data["seats"].append(
        {"name": "tts-0", "host": "fv-ml1", "gpus": [1], "resident": "3 GiB",
         "state": "planned", "match": "tts-0-server"}
    )  # fmt: skip
    path = folder / "catalogue.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def tts_catalogue(tmp_path: Path) -> Path:
    return write_tts_catalogue(tmp_path)


def check_tts(catalogue: Path, db: Path) -> list[str]:
    return ["check", "tts-0", "--gpu", "1", "--catalogue", str(catalogue),
            "--snapshot", str(FV_ML1_SNAPSHOT), "--ledger", str(db)]  # fmt: skip


def _rows(db: Path) -> tuple[int, int]:
    """(holds, decisions) stored in the ledger at `db`."""
    with open_ledger(db, readonly=True) as ledger:
        holds = ledger.connection.execute("SELECT COUNT(*) FROM holds").fetchone()[0]
        decisions = ledger.connection.execute("SELECT COUNT(*) FROM decisions").fetchone()[0]
    return int(holds), int(decisions)


@pytest.mark.parametrize("redirect", [CLOSED, FULL], ids=["closed", "full"])
def test_a_pass_nobody_saw_records_no_hold_and_exits_3(
    redirect: str, tts_catalogue: Path, tmp_path: Path
) -> None:
    db = tmp_path / "l.sqlite"
    code, err = _shell(check_tts(tts_catalogue, db), redirect)
    assert code == 3
    assert "Traceback" not in err
    why = "it is closed" if redirect == CLOSED else "No space left on device"
    assert f"{UNDELIVERED} ({why}); the verdict and its hold were not recorded" in err
    assert _rows(db) == (0, 0)  # the whole approval rolled back: no hold, no decision


def test_the_same_pass_delivered_holds_its_bytes(tts_catalogue: Path, tmp_path: Path) -> None:
    # The reproduction's other half: only the delivery differs, and then the hold is stored.
    db = tmp_path / "l.sqlite"
    code, err = _shell(check_tts(tts_catalogue, db), ">/dev/null")
    assert code == 0, err
    assert _rows(db) == (1, 1)


def test_a_refusal_nobody_saw_exits_3(tmp_path: Path) -> None:
    words = [
        "check",
        "new-6gib",
        "--gpu",
        "0",
        *SOURCE,
        "--add",
        str(ROOT / "examples/new-6gib.yaml"),
    ]
    assert _shell(words, ">/dev/null")[0] == 1
    code, err = _shell(words, CLOSED)
    assert code == 3 and "Traceback" not in err


def _every_command(tmp_path: Path) -> dict[str, list[str]]:
    db = tmp_path / "l.sqlite"
    assert main(["snapshot", "--from", str(FV_ML1_SNAPSHOT), "--catalogue", str(FV_ML1_CATALOGUE),
                 "--ledger", str(db)]) == 0  # fmt: skip
    return {
        "init": ["init", "--from", str(FV_ML1_SNAPSHOT)],
        "plan": ["plan", *SOURCE],
        "check": ["check", "vllm-voices", "--gpu", "0", *SOURCE],
        "holds": ["holds", "--ledger", str(db)],
        "ledger": ["ledger", *SOURCE],
        "snapshot": ["snapshot", "--from", str(FV_ML1_SNAPSHOT), "--catalogue", str(FV_ML1_CATALOGUE)],
        "report": ["report", "--ledger", str(db), "--catalogue", str(FV_ML1_CATALOGUE)],
        "pack": ["pack", *SOURCE],
        "alerts": ["alerts", "--catalogue", str(FV_ML1_CATALOGUE)],
        "schema": ["schema"],
        "completion": ["completion", "bash"],
        "version": ["--version"],
    }  # fmt: skip


def test_every_command_with_stdout_closed_exits_3_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    for name, words in _every_command(tmp_path).items():
        code, err = _shell(words, CLOSED, cwd=tmp_path)
        lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
        assert (code, lines) == (3, [f"{UNDELIVERED} (it is closed)"]), name


def test_a_snapshot_is_stored_whole_though_stdout_is_closed(tmp_path: Path) -> None:
    # A snapshot is a measurement, not a verdict: it is stored, and the exit says the summary
    # was not seen. Descriptor 1 is held by /dev/null, so the ledger file opened after it
    # never takes its place.
    db = tmp_path / "l.sqlite"
    words = ["snapshot", "--from", str(FV_ML1_SNAPSHOT), "--catalogue", str(FV_ML1_CATALOGUE),
             "--ledger", str(db)]  # fmt: skip
    code, err = _shell(words, CLOSED)
    assert code == 3 and "Traceback" not in err
    with open_ledger(db, readonly=True) as ledger:
        stored = ledger.latest("fv-ml1")
        assert ledger.count() == 1
    assert stored is not None and stored.taken_at == load_snapshot(FV_ML1_SNAPSHOT).taken_at
    assert [card.used_bytes for card in stored.cards] == [
        card.used_bytes for card in load_snapshot(FV_ML1_SNAPSHOT).cards
    ]
