"""Every command's error paths end in exit 2 or 3 with one line, never a traceback (issue 32).

DESIGN.md "Never yes by accident": a traceback exits 1, which reads as "refused" to a deploy
script. Each case runs through the real entry point (`python -m placement`, as `gpuplan` runs)
and is run again with `--debug`, which may print more but never changes the exit code (it
turned every exit 2 or 3 into exit 1).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from placement.cli.main import main
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT, ROOT

C = ["--catalogue", str(FV_ML1_CATALOGUE)]
S = ["--snapshot", str(FV_ML1_SNAPSHOT)]


@dataclass(frozen=True)
class Case:
    words: tuple[str, ...]
    exit: int
    says: str  # in the last line of stderr


def _cases(tmp: Path) -> dict[str, Case]:
    """Each bad input or environment, by name; files under `tmp`."""
    bad_yaml = tmp / "bad.yaml"
    bad_yaml.write_text("seats: [\n")
    bad_json = tmp / "bad.json"
    bad_json.write_text('{"host": ')
    missing = str(tmp / "missing.json")
    ledger_dir = tmp / "a-directory"
    ledger_dir.mkdir()
    fifo = tmp / "fifo.sqlite"
    os.mkfifo(fifo)
    existing = tmp / "exists.yaml"
    existing.write_text("hosts: {}\n")
    no_ledger = str(tmp / "none" / "l.sqlite")
    cases = [
        ("unknown-command", ("frobnicate",), 2, "invalid choice"),
        ("option-before-command", ("--catalogue", "x", "plan"), 2, "options go after the command"),
        ("init-from-missing", ("init", "--from", missing), 2, "missing.json"),
        ("init-out-exists", ("init", "--from", str(FV_ML1_SNAPSHOT), "--out", str(existing)), 2, "exists"),
        ("plan-missing-catalogue", ("plan", "--catalogue", missing, *S), 2, "missing.json"),
        ("plan-bad-yaml", ("plan", "--catalogue", str(bad_yaml), *S), 2, "bad.yaml"),
        ("plan-bad-snapshot", ("plan", *C, "--snapshot", str(bad_json)), 2, "bad.json"),
        ("plan-missing-ledger", ("plan", *C, "--ledger", no_ledger), 3, "l.sqlite"),
        ("plan-bad-solver", ("plan", *C, *S, "--solver", "gurobi"), 2, "invalid choice"),
        ("plan-bad-flag", ("plan", "--no-such-flag"), 2, "unrecognized arguments"),
        ("check-no-seat", ("check", *C, *S), 2, "name a seat"),
        ("check-bad-gpu", ("check", "vllm-voices", "--gpu", "x", *C, *S), 2, "cannot read 'x' as cards"),
        ("check-missing-compose", ("check", "--compose", missing, *C, *S), 2, "missing.json"),
        ("check-too-old", ("check", "vllm-voices", "--gpu", "0", *C, *S, "--max-age", "1m"), 3, "old"),
        ("check-ledger-fifo", ("check", "vllm-voices", "--gpu", "0", *C, "--ledger", str(fifo)), 3, "FIFO"),
        ("check-ledger-directory", ("check", "vllm-voices", "--gpu", "0", *C, "--ledger", str(ledger_dir)), 3, "directory"),
        ("check-bad-hold-for", ("check", "vllm-voices", "--gpu", "0", *C, *S, "--hold-for", "1e999d"), 2, "hold-for"),
        ("holds-missing-ledger", ("holds", "--ledger", no_ledger), 3, "l.sqlite"),
        ("holds-foreign-file", ("holds", "--ledger", str(bad_yaml)), 3, "not an SQLite file"),
        ("ledger-no-catalogue", ("ledger", *S), 2, "catalogue"),
        ("ledger-bad-snapshot", ("ledger", *C, "--snapshot", str(bad_json)), 2, "bad.json"),
        ("snapshot-from-missing", ("snapshot", "--from", missing, *C), 2, "missing.json"),
        ("snapshot-from-bad", ("snapshot", "--from", str(bad_json), *C), 2, "bad.json"),
        ("snapshot-ledger-fifo", ("snapshot", "--from", str(FV_ML1_SNAPSHOT), *C, "--ledger", str(fifo)), 3, "FIFO"),
        ("report-missing-ledger", ("report", "--ledger", no_ledger, *C), 3, "l.sqlite"),
        ("report-bad-since", ("report", "--ledger", no_ledger, *C, "--since", "soon"), 2, "soon"),
        ("report-bad-format", ("report", "--format", "pdf"), 2, "invalid choice"),
        ("pack-no-card-bytes", ("pack", *C), 2, "card-bytes"),
        ("pack-bad-card-bytes", ("pack", *C, "--card-bytes", "lots"), 2, "lots"),
        ("demo-ledger-missing-snapshot", ("demo-ledger", *C, "--snapshot", missing, "--out", str(tmp / "d.sqlite")), 2, "missing.json"),
        ("demo-ledger-no-directory", ("demo-ledger", *C, *S, "--out", no_ledger), 2, "does not exist"),
        ("exporter-from-missing", ("exporter", *C, "--from", missing, "--port", "0"), 2, "missing.json"),
        ("alerts-bad-catalogue", ("alerts", "--catalogue", str(bad_yaml)), 2, "bad.yaml"),
        ("learn-missing-log", ("learn", "vllm-voices", *C, "--vllm-log", missing), 2, "missing.json"),
        ("learn-unknown-seat", ("learn", "no-such-seat", *C, "--vllm-log", str(bad_json)), 2, "no-such-seat"),
        ("schema-extra-word", ("schema", "extra"), 2, "unrecognized arguments"),
        ("completion-bad-shell", ("completion", "fish"), 2, "fish"),
    ]  # fmt: skip
    return {name: Case(words, code, says) for name, words, code, says in cases}


def _names() -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return list(_cases(Path(tmp)))


def _run(words: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GPUPLAN_CATALOGUE"}
    return subprocess.run(
        [sys.executable, "-m", "placement", *words],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", _names())
def test_an_error_path_exits_2_or_3_in_one_line_and_debug_keeps_the_code(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = _cases(tmp_path)[name]
    done = _run(list(case.words), tmp_path)
    assert done.returncode == case.exit, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    last = done.stderr.rstrip("\n").splitlines()[-1]
    assert "error:" in last or last.startswith("usage:"), done.stderr
    assert case.says in done.stderr
    # Every line but argparse's usage lines is the one error (and warnings before it).
    said = [
        line
        for line in done.stderr.splitlines()
        if not line.startswith(("warning:", "usage:", " "))
    ]
    assert len(said) <= 1, done.stderr

    # --debug changes what is printed, never the exit code (in process: same entry, faster).
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main([case.words[0], "--debug", *case.words[1:]]) == case.exit
    assert main(["--debug", *case.words]) == case.exit
    capsys.readouterr()


@pytest.mark.slow
def test_no_command_shows_the_help_and_exits_2() -> None:
    done = _run([], ROOT)
    assert done.returncode == 2 and done.stderr.startswith("usage: gpuplan")
    assert "Traceback" not in done.stderr


def test_debug_prints_the_traceback_and_keeps_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--debug", "plan", "--catalogue", "missing.yaml", *S]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.splitlines()[-1] == "error: missing.yaml: no such file"


def test_a_bug_is_one_line_and_exit_3_naming_where(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Anything that is not a gpuplan error is a bug: said in one line with exit 3 ("cannot
    # decide"), never an exit 1 that reads as a refusal, and never the exception's text (it may
    # quote a file's content).
    from placement.cli import schema

    def broken(_: object) -> int:
        raise KeyError("HF_TOKEN=hf_secret")

    monkeypatch.setattr(schema, "run", broken)
    assert main(["schema"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: internal error (a bug in gpuplan): KeyError at tests/")
    assert "hf_secret" not in err and err.count("\n") == 1
    assert main(["--debug", "schema"]) == 3
    assert "hf_secret" in capsys.readouterr().err  # --debug shows the traceback, on request
