"""`check --ledger`: approvals hold their bytes, so two deploys checked at once never share them.

fv-ml1's card 1 has 5,704 MiB free (5.32 GiB to plan into after the margin); one 3 GiB seat
fits, two do not.
"""

from __future__ import annotations

import json
import multiprocessing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from inventory.ledger.store import open_ledger
from inventory.snapshot import load_snapshot
from placement.cli import check as cli_check
from placement.cli import ledger as cli_ledger
from placement.cli import main as cli_main
from placement.cli import plan as cli_plan
from placement.cli import report as cli_report
from placement.cli import sources

ROOT = Path(__file__).resolve().parents[3]
SNAPSHOT = ROOT / "seats/catalogue/fv-ml1.snapshot.json"
TAKEN = load_snapshot(SNAPSHOT).taken_at
SEATS = [f"tts-{n}" for n in range(8)]


@pytest.fixture
def catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = yaml.safe_load((ROOT / "seats/catalogue/fv-ml1.yaml").read_text())
    for name in SEATS:
        data["seats"].append(
            {
                "name": name,
                "host": "fv-ml1",
                "gpus": [1],
                "resident": "3 GiB",
                "state": "planned",
                "match": f"{name}-server",
            }
        )
    path = tmp_path / "catalogue.yaml"
    path.write_text(yaml.safe_dump(data))
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    monkeypatch.setenv("USER", "ci-deploy")
    at(monkeypatch, minutes=1)
    return path


def at(monkeypatch: pytest.MonkeyPatch, *, minutes: float) -> None:
    """The CLI's clock, `minutes` after the snapshot was taken (no sleeping)."""
    for module in (sources, cli_check, cli_ledger, cli_plan):
        monkeypatch.setattr(module, "utc_now", lambda: TAKEN + timedelta(minutes=minutes))


def check(catalogue: Path, db: Path, seat: str, *extra: str) -> list[str]:
    return [
        "check", seat, "--gpu", "1", "--catalogue", str(catalogue),
        "--snapshot", str(SNAPSHOT), "--ledger", str(db), *extra,
    ]  # fmt: skip


def verdict(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return dict(json.loads(capsys.readouterr().out))


def test_the_second_deploy_is_refused_by_the_first_ones_hold(
    catalogue: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.sqlite"
    assert cli_main.main([*check(catalogue, db, "tts-0"), "--json"]) == 0
    capsys.readouterr()
    assert cli_main.main([*check(catalogue, db, "tts-1"), "--json"]) == 1
    data = verdict(capsys)
    reasons = {r["rule"]: r for r in data["reasons"]}
    assert set(reasons) == {"hold"}
    hold = reasons["hold"]
    assert hold["short_bytes"] == 696 * 2**20  # 3 GiB against 5,704 − 3,072 − 256 MiB
    assert (
        "3.00 GiB approved for tts-0 at" in hold["text"] and "by ci-deploy, until" in hold["text"]
    )
    # Its hold is listed; the refused seat holds nothing.
    assert cli_main.main(["holds", "--ledger", str(db), "--json"]) == 0
    holds = json.loads(capsys.readouterr().out)["holds"]
    assert [(h["seat"], h["cards"], h["need_bytes"], h["user"]) for h in holds] == [
        ("tts-0", [1], 3 * 2**30, "ci-deploy")
    ]


def test_a_hold_ends_at_its_expiry(
    catalogue: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "l.sqlite"
    assert cli_main.main([*check(catalogue, db, "tts-0"), "--hold-for", "10m"]) == 0
    at(monkeypatch, minutes=10.9)
    assert cli_main.main(check(catalogue, db, "tts-1")) == 1
    at(monkeypatch, minutes=11)
    assert cli_main.main(check(catalogue, db, "tts-1")) == 0


def test_no_hold_records_the_decision_only(catalogue: Path, tmp_path: Path) -> None:
    db = tmp_path / "l.sqlite"
    assert cli_main.main([*check(catalogue, db, "tts-0"), "--no-hold"]) == 0
    assert cli_main.main(check(catalogue, db, "tts-1")) == 0
    with open_ledger(db, readonly=True) as ledger:
        assert [d["seat"] for d in ledger.decisions()] == ["tts-0", "tts-1"]


def test_a_second_check_of_the_same_seat_replaces_its_own_hold(
    catalogue: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.sqlite"
    assert cli_main.main(check(catalogue, db, "tts-0")) == 0
    assert cli_main.main(check(catalogue, db, "tts-0")) == 0  # its own hold does not count
    capsys.readouterr()
    assert cli_main.main(["holds", "--ledger", str(db), "--json"]) == 0
    assert [h["seat"] for h in json.loads(capsys.readouterr().out)["holds"]] == ["tts-0"]


def test_seeing_the_seat_ends_its_hold(
    catalogue: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.sqlite"
    assert cli_main.main(check(catalogue, db, "tts-0")) == 0
    # Two minutes on, a snapshot of fv-ml1 shows tts-0's server on card 1.
    raw = json.loads(SNAPSHOT.read_text())
    raw["taken_at"] = (TAKEN + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    card = next(c for c in raw["cards"] if c["index"] == 1)
    card["processes"].append({"pid": 4242, "used_bytes": 3 * 2**30, "cmdline": "tts-0-server"})
    card["used_bytes"] += 3 * 2**30
    card["free_bytes"] -= 3 * 2**30
    seen = tmp_path / "seen.json"
    seen.write_text(json.dumps(raw))
    argv = ["snapshot", "--from", str(seen), "--ledger", str(db), "--catalogue", str(catalogue)]
    assert cli_main.main(argv) == 0
    capsys.readouterr()
    assert cli_main.main(["holds", "--ledger", str(db)]) == 0
    assert "no active holds" in capsys.readouterr().out


def test_the_seat_name_is_not_taken_as_the_ledger(
    catalogue: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [
        "check",
        "--ledger",
        "tts-0",
        "--gpu",
        "1",
        "--catalogue",
        str(catalogue),
        "--snapshot",
        str(SNAPSHOT),
    ]
    assert cli_main.main(argv) == 2
    assert "put the seat first (gpuplan check tts-0" in capsys.readouterr().err
    assert not (tmp_path / "tts-0").exists()


def _racer(
    catalogue: str,
    db: str,
    seat: str,
    start: multiprocessing.synchronize.Barrier,
    out: multiprocessing.Queue,
) -> None:  # type: ignore[type-arg]
    import contextlib
    import io

    sink = io.StringIO()
    start.wait()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(io.StringIO()):
        code = cli_main.main([*check(Path(catalogue), Path(db), seat), "--json"])
    data = json.loads(sink.getvalue()) if sink.getvalue() else {}
    out.put((code, [r["rule"] for r in data.get("reasons", [])], data.get("error")))


@pytest.mark.slow
def test_eight_checks_at_the_same_moment_pass_exactly_one(catalogue: Path, tmp_path: Path) -> None:
    # Forked children share the parent's clock patch and imports: each start is cheap, so the
    # eight really meet the ledger together.
    context = multiprocessing.get_context("fork")
    for round_ in range(20):
        db = tmp_path / f"race-{round_}.sqlite"
        with open_ledger(db):
            pass  # the deploy scripts share a ledger that exists
        start = context.Barrier(len(SEATS))
        out = context.Queue()
        racers = [
            context.Process(target=_racer, args=(str(catalogue), str(db), seat, start, out))
            for seat in SEATS
        ]
        for racer in racers:
            racer.start()
        results = [out.get(timeout=60) for _ in racers]
        for racer in racers:
            racer.join(timeout=60)
        codes = sorted(code for code, _, _ in results)
        assert codes == [0] + [1] * 7, (round_, [e for _, _, e in results if e])
        assert all(rules == ["hold"] for code, rules, _ in results if code == 1), results


def test_plan_and_ledger_read_the_holds(
    catalogue: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.sqlite"
    assert cli_main.main(check(catalogue, db, "tts-0")) == 0
    capsys.readouterr()
    source = ["--catalogue", str(catalogue), "--snapshot", str(SNAPSHOT), "--ledger", str(db)]
    assert cli_main.main(["ledger", *source]) == 0
    out = capsys.readouterr().out
    assert "tts-0 (hold: 3.00 GiB approved for tts-0 at" in out
    assert cli_main.main(["plan", *source, "--json"]) == 1  # not every tts seat fits card 1
    captured = capsys.readouterr()
    assert "note: tts-0 kept on fv-ml1 card(s) [1]" not in captured.err
    placed = {s["seat"]: s for s in json.loads(captured.out)["seats"]}
    assert placed["tts-0"]["verdict"] == "pass" and placed["tts-0"]["cards"] == [1]
    # The approved seat is counted once: another 3 GiB seat no longer fits card 1.
    assert placed["tts-1"]["cards"] != [1] or placed["tts-1"]["verdict"] != "pass"


def test_the_report_lists_holds_and_approvals_that_expired_unseen(
    catalogue: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "l.sqlite"
    assert cli_main.main([*check(catalogue, db, "tts-0"), "--hold-for", "10m"]) == 0
    at(monkeypatch, minutes=5)
    assert cli_main.main([*check(catalogue, db, "tts-1"), "--hold-for", "1h", "--gpu", "2"]) == 1
    assert (
        cli_main.main([*check(catalogue, db, "tts-2"), "--hold-for", "1h"]) == 1
    )  # tts-0 holds it
    capsys.readouterr()
    at(monkeypatch, minutes=30)
    monkeypatch.setattr(cli_report, "utc_now", lambda: TAKEN + timedelta(minutes=30))
    argv = ["report", "--ledger", str(db), "--catalogue", str(catalogue), "--json"]
    assert cli_main.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    # The decisions after the newest snapshot are in the window (the checks came after it).
    assert [d["seat"] for d in data["decisions"]] == ["tts-0", "tts-1", "tts-2"]
    assert data["holds"] == []  # tts-0's expired at minute 11
    assert [h["seat"] for h in data["expired_holds"]] == ["tts-0"]
    assert cli_main.main(argv[:-1]) == 0
    text = capsys.readouterr().out
    assert "## Holds" in text and "Expired unseen." in text


def test_a_held_card_that_then_errors_decides_nothing(
    catalogue: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "l.sqlite"
    assert cli_main.main(check(catalogue, db, "tts-0")) == 0
    raw = json.loads(SNAPSHOT.read_text())
    raw["cards"] = [
        {"index": 1, "error": "GpuIsLost"} if c["index"] == 1 else c for c in raw["cards"]
    ]
    lost = tmp_path / "lost.json"
    lost.write_text(json.dumps(raw))
    argv = [
        "check", "tts-1", "--gpu", "1", "--catalogue", str(catalogue),
        "--snapshot", str(lost), "--ledger", str(db), "--json",
    ]  # fmt: skip
    capsys.readouterr()
    assert cli_main.main(argv) == 3
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "unknown" and [r["rule"] for r in data["reasons"]] == ["error"]
    # tts-0's approval still stands: nothing was decided on the lost card.
    assert cli_main.main(["holds", "--ledger", str(db), "--json"]) == 0
    assert [h["seat"] for h in json.loads(capsys.readouterr().out)["holds"]] == ["tts-0"]


def test_plan_and_check_give_the_same_rule_for_the_same_blocked_seat(
    catalogue: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # tts-0 approved on card 1: tts-1 (3 GiB, pinned there too) no longer fits beside it.
    db = tmp_path / "l.sqlite"
    assert cli_main.main(check(catalogue, db, "tts-0")) == 0
    capsys.readouterr()
    assert cli_main.main([*check(catalogue, db, "tts-1"), "--json", "--no-hold"]) == 1
    checked = {r["rule"] for r in verdict(capsys)["reasons"]}
    source = ["--catalogue", str(catalogue), "--snapshot", str(SNAPSHOT), "--ledger", str(db)]
    assert cli_main.main(["plan", *source, "--json", "--explain", "all"]) == 1
    seats = {s["seat"]: s for s in json.loads(capsys.readouterr().out)["seats"]}
    planned = {r["rule"] for r in seats["tts-1"]["reasons"] if r["card"] == 1}
    assert checked == planned == {"hold"}
    # The approved seat is judged where it was approved, not placed again.
    assert seats["tts-0"]["verdict"] == "pass" and seats["tts-0"]["cards"] == [1]
    assert any("approved, not placed again" in w for w in seats["tts-0"]["warnings"])
