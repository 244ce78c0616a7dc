"""`plan --window` and `ledger --window` read the rollups first (placement.fit.week.prune): their
whole JSON equals what the replay of every moment prints (a ledger read as if it kept no rollups),
on every scenario of test_scenarios.py and on seeded random weeks of test_prune.py."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inventory.history.ledger import LedgerHistory
from placement.cli import main as cli
from tests.placement.week import test_prune, test_scenarios
from tests.placement.week.builders import moments, write_week

# (card readings read raw from the rollups first, from every moment) of each `both`.
READ: list[tuple[int, int]] = []


def _run(capsys: pytest.CaptureFixture[str], argv: list[str], ledger: Path) -> tuple[int, Any]:
    code = cli.main([str(ledger) if a == "LEDGER" else a for a in argv])
    data = json.loads(capsys.readouterr().out)
    return code, data


def _without_clock(data: Any) -> Any:
    """The plan's JSON without its own running time (the only figure two runs may differ in)."""
    if isinstance(data, dict):
        return {k: _without_clock(v) for k, v in data.items() if k not in ("timings", "seconds")}
    if isinstance(data, list):
        return [_without_clock(v) for v in data]
    return data


def both(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    ledger: Path,
    argv: list[str],
) -> tuple[tuple[int, Any], tuple[int, Any]]:
    """(exit, JSON) from the rollups first, then from every moment; each run on a fresh copy of
    `ledger` at the same path (plan records its decisions there)."""
    copy = ledger.with_name("run.sqlite")
    for stale in ledger.parent.glob("run.sqlite*"):
        stale.unlink()
    shutil.copyfile(ledger, copy)
    read = LedgerHistory.moments
    counted = [0, 0]

    def counting(self: LedgerHistory, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for moment in read(self, *args, **kwargs):
            counted[run] += len(moment.cards)
            yield moment

    monkeypatch.setattr(LedgerHistory, "moments", counting)
    run = 0
    pruned = _run(capsys, argv, copy)
    run = 1
    for stale in ledger.parent.glob("run.sqlite*"):
        stale.unlink()
    shutil.copyfile(ledger, copy)
    with monkeypatch.context() as patched:
        patched.setattr(LedgerHistory, "moment_times", lambda *_: None)
        patched.setattr("placement.cli.window_history.RememberedHistory", lambda h: h)
        full = _run(capsys, argv, copy)
    monkeypatch.undo()
    # Never more card readings read raw than every moment's (fewer where the rollups decided).
    assert counted[0] <= counted[1], counted
    READ.append((counted[0], counted[1]))
    return pruned, full


def _flags(rules: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if rules.get("restart_safe"):
        out.append("--restart-safe")
    if rules.get("rebase") is False:
        out.append("--no-rebase")
    if "horizon_days" in rules:
        out += ["--horizon", f"{rules['horizon_days']}d"]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("scenario", test_scenarios.SCENARIOS, ids=lambda s: s.name)
def test_plan_and_ledger_windows_equal_the_full_replay_on_every_scenario(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    scenario: test_scenarios.Scenario,
) -> None:
    seat = scenario.seat
    catalogue = tmp_path / "catalogue.yaml"
    catalogue.write_text(
        test_scenarios.CATALOGUE + f"  - {{name: planned, host: h1, gpus: {len(seat.cards)}, "
        f"resident: {seat.need_bytes}}}\n"
    )
    week = moments("h1", scenario.cards, days=scenario.days, skip=scenario.skip)
    ledger = write_week(tmp_path / "ledger.sqlite", week)
    source = ["--catalogue", str(catalogue), "--ledger", "LEDGER", "--max-age", "1000d"]
    window = ["--window", "7d", "--json", *_flags(scenario.rules)]

    pruned, full = both(capsys, monkeypatch, ledger, ["ledger", *source, *window])
    assert pruned == full
    assert pruned[1]["hosts"][0]["window"]["cards"]

    pruned, full = both(capsys, monkeypatch, ledger, ["plan", *source, *window])
    assert _without_clock(pruned) == _without_clock(full)
    assert any("window" in s for s in pruned[1]["seats"])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [4, 5])
def test_plan_and_ledger_windows_equal_the_full_replay_on_random_weeks(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
) -> None:
    catalogue = tmp_path / "catalogue.yaml"
    catalogue.write_text(test_prune.CATALOGUE)
    ledger = write_week(tmp_path / "ledger.sqlite", iter(test_prune.random_week(seed)))
    source = ["--catalogue", str(catalogue), "--ledger", "LEDGER", "--max-age", "1000d"]
    READ.clear()
    for extra in ([], ["--percentile", "99.5"], ["--restart-safe", "--min-history", "1h"]):
        window = ["--window", "7d", "--json", *extra]
        pruned, full = both(capsys, monkeypatch, ledger, ["ledger", *source, *window])
        assert pruned == full, extra
        cards = pruned[1]["hosts"][0]["window"]["cards"]
        assert [c["card"] for c in cards] == [0, 1, 2]
        pruned, full = both(capsys, monkeypatch, ledger, ["plan", *source, *window])
        assert _without_clock(pruned) == _without_clock(full), extra
        # tts (40 GiB on card 0) and big (card 1 and 2) are each judged over the window.
        assert {s["seat"] for s in pruned[1]["seats"] if "window" in s} >= {"tts"}, extra
    # plan --window at p100 read under half the card readings the replay of every moment reads
    # (ledger --window's need is each card's room now: every hour that may fall under it is read).
    assert READ[1][0] * 2 < READ[1][1], READ
