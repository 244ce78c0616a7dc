"""`--window` from a real Prometheus: the same week stored in a ledger and backfilled as the
exporter's scrapes gives the same verdicts and the same JSON `window` block from either source.

The week is the seed's host (tests/placement/week/test_check_window.py): `cyberprev` and
`gen-small` on card 0 as they really are, an Ollama on card 1 loaded 14:00–15:59 UTC every day.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from inventory.ledger.store import open_ledger
from inventory.snapshot import Snapshot
from placement.cli import main as cli
from seats.loader import load_catalogue
from tests.e2e.harness import Processes, free_port, prometheus_and_promtool, start_prometheus_on
from tests.e2e.promweek import backfill
from tests.placement.week.builders import between, moments, write_week
from tests.placement.week.test_check_window import COMPOSE, CYBERPREV, GEN_SMALL, OLLAMA, SEED

pytestmark = pytest.mark.slow

HOST = "fv-ml1"
# The newest snapshot is 2026-09-20T23:50Z; the commands run a minute later.
NOW = datetime.fromisoformat("2026-09-20T23:51:00+00:00")
# A second host whose clock runs 6 minutes behind the ledger's and Prometheus's: each snapshot
# arrives (is scraped) 360 s after its taken_at.
SKEWED = "fv-ml2"
SKEW_S = 360
CATALOGUE = (
    SEED.replace(
        "hosts:\n",
        "hosts:\n  fv-ml2: {cards: 1, card_total: 97871 MiB, cuda_context: 1183 MiB, margin: 256 MiB}\n",
    )
    + "  - {name: probe, host: fv-ml2, gpus: [0], resident: 5 GiB}\n"
)


@dataclass(frozen=True)
class Week:
    catalogue: Path
    ledger: Path
    prometheus: str


def _card0(at: datetime) -> list[Any]:
    return [CYBERPREV, GEN_SMALL]


def _card1(at: datetime) -> list[Any]:
    return [OLLAMA] if between(at, 14, 15) else []


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Week]:
    binary, promtool = prometheus_and_promtool()
    folder = tmp_path_factory.mktemp("promweek")
    catalogue = folder / "fv-ml1.yaml"
    catalogue.write_text(CATALOGUE)
    ledger = write_week(folder / "ledger.sqlite", moments(HOST, [_card0, _card1]))
    skewed = list(moments(SKEWED, [_card0]))
    with open_ledger(ledger) as writing:
        for snapshot in skewed:
            writing.store(snapshot, snapshot.taken_at + timedelta(seconds=SKEW_S))
    scrapes = [*moments(HOST, [_card0, _card1]), *skewed]

    def scraped_s(snapshot: Snapshot) -> float:
        skew = SKEW_S if snapshot.host == SKEWED else 0
        return snapshot.taken_at.timestamp() + skew

    data = backfill(scrapes, load_catalogue(catalogue), folder, promtool, scraped_s=scraped_s)
    processes = Processes()
    try:
        url = start_prometheus_on(processes, binary, data, folder / "prometheus")
        yield Week(catalogue, ledger, url)
    finally:
        processes.stop_all()


def at_now(monkeypatch: pytest.MonkeyPatch, now: datetime) -> None:
    for module in ("check", "plan", "ledger"):
        monkeypatch.setattr(f"placement.cli.{module}.utc_now", lambda: now)


@pytest.fixture(autouse=True)
def _now(monkeypatch: pytest.MonkeyPatch) -> None:
    at_now(monkeypatch, NOW)


def run(
    capsys: pytest.CaptureFixture[str], week: Week, source: str, *argv: str
) -> tuple[int, str, str]:
    where = (
        ["--ledger", str(week.ledger)] if source == "ledger" else ["--prometheus", week.prometheus]
    )
    holds = ["--no-hold"] if argv[0] == "check" else []
    code = cli.main([*argv, "--catalogue", str(week.catalogue), *where, *holds])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def as_prometheus_keeps(
    block: dict[str, Any], host: str = HOST, unknowns: tuple[str, ...] = ("command_lines",)
) -> dict[str, Any]:
    """The ledger's window block as Prometheus can know it: a process of no seat has no command
    line (so no name, no engine), and the window says that no seat could be rebased."""
    out = json.loads(json.dumps(block))
    for card in out["cards"]:
        for squeezer in card["squeezed_by"]:
            if not squeezer["seat"]:
                squeezer.update(name="", engine=None, behaviour=None)
    if "warnings" in out:
        out["warnings"].extend({"kind": kind, "host": host} for kind in unknowns)
    return out


SCENARIOS = [
    # (name, argv, exit, expected: window key → value, from either source)
    (
        "afternoon ollama refused by peak at p100",
        ["check", "tts", "--window", "7d"],
        1,
        {"moments": 1008, "short_moments": 84, "allowed_short": 0, "pass_percentile": 91.66},
    ),
    (
        "afternoon ollama passing at p91.66",
        ["check", "tts", "--window", "7d", "--percentile", "91.66"],
        0,
        {"short_moments": 84, "allowed_short": 84, "status": "pass"},
    ),
    (
        "voices copy leaves gen-small unable to restart",
        ["check", "voices-copy", "--window", "7d"],
        0,
        {"short_moments": 0, "coverage": 1.0, "status": "pass"},
    ),
    (
        "refused by restart with --restart-safe",
        ["check", "voices-copy", "--window", "7d", "--restart-safe"],
        1,
        {"short_moments": 0, "status": "refuse"},
    ),
]


@pytest.mark.parametrize(
    ("name", "argv", "exit_code", "expected"), SCENARIOS, ids=[s[0] for s in SCENARIOS]
)
def test_the_window_block_is_the_same_from_either_source(
    capsys: pytest.CaptureFixture[str],
    week: Week,
    name: str,
    argv: list[str],
    exit_code: int,
    expected: dict[str, Any],
) -> None:
    code, out, err = run(capsys, week, "ledger", *argv, "--json")
    from_ledger = json.loads(out)
    assert code == exit_code, err
    code, out, err = run(capsys, week, "prometheus", *argv, "--json")
    from_prometheus = json.loads(out)
    assert code == exit_code, err
    assert from_prometheus["window"] == as_prometheus_keeps(from_ledger["window"])
    assert {k: from_ledger["window"][k] for k in expected} == expected
    assert from_prometheus["verdict"] == from_ledger["verdict"]
    rules = [(r["rule"], r["card"], r["short_bytes"]) for r in from_prometheus["reasons"]]
    assert rules == [(r["rule"], r["card"], r["short_bytes"]) for r in from_ledger["reasons"]]


def test_a_compose_deploy_is_judged_over_the_same_window_from_either_source(
    capsys: pytest.CaptureFixture[str], week: Week, tmp_path: Path
) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(COMPOSE)
    argv = ["check", "--compose", str(compose), "--window", "7d", "--restart-safe", "--json"]
    blocks = []
    for source in ("ledger", "prometheus"):
        code, out, err = run(capsys, week, source, *argv)
        assert code == 1, err
        data = json.loads(out)
        assert data["verdict"] == "refuse"
        (voices,) = data["verdicts"]
        assert [r["rule"] for r in voices["reasons"]] == ["restart"]
        blocks.append(voices["window"])
    from_ledger, from_prometheus = blocks
    assert [r["seat"] for r in from_ledger["restart_risks"]] == ["gen-small"]
    assert from_prometheus == as_prometheus_keeps(from_ledger)


def test_a_skewed_clock_is_said_from_either_source(
    capsys: pytest.CaptureFixture[str], week: Week, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prometheus scraped fv-ml2's newest snapshot at 23:56: it is read a minute later.
    at_now(monkeypatch, NOW + timedelta(minutes=6))
    blocks = []
    for source in ("ledger", "prometheus"):
        code, out, err = run(capsys, week, source, "check", "probe", "--window", "7d", "--json")
        assert code == 0, err
        blocks.append(json.loads(out)["window"])
    from_ledger, from_prometheus = blocks
    clock = {"kind": "clock", "host": SKEWED, "moments": 1008, "largest_skew_seconds": SKEW_S}
    assert clock in from_ledger["warnings"]
    assert from_prometheus == as_prometheus_keeps(from_ledger, host=SKEWED)


def test_an_unreachable_prometheus_is_exit_3_in_one_line(
    capsys: pytest.CaptureFixture[str], week: Week
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    argv = ["check", "tts", "--window", "7d", "--catalogue", str(week.catalogue), "--no-hold"]
    code = cli.main([*argv, "--prometheus", nobody, "--timeout", "2"])
    captured = capsys.readouterr()
    assert code == 3
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("error: ") and "127.0.0.1" in line
    assert "Traceback" not in captured.err


def test_a_host_with_no_series_cannot_be_decided(
    capsys: pytest.CaptureFixture[str], week: Week, tmp_path: Path
) -> None:
    catalogue = tmp_path / "three.yaml"
    catalogue.write_text(
        CATALOGUE.replace(
            "hosts:\n",
            "hosts:\n  fv-ml3: {cards: 1, card_total: 97871 MiB, cuda_context: 1183 MiB}\n",
        )
        + "  - {name: ghost, host: fv-ml3, gpus: [0], resident: 1 GiB}\n"
    )
    argv = ["check", "ghost", "--window", "7d", "--catalogue", str(catalogue), "--no-hold"]
    code = cli.main([*argv, "--prometheus", week.prometheus])
    captured = capsys.readouterr()
    assert code == 3
    (line,) = captured.err.strip().splitlines()
    assert line == (
        f"error: Prometheus at {week.prometheus}: fv-ml3: absent: no gpuplan_* or "
        "DCGM_FI_DEV_FB_FREE series names it (hosts are read from labels exported_host, host, "
        "Hostname, hostname, else instance without its port); cannot check on that host"
    )


def test_plan_window_places_the_same_from_either_source(
    capsys: pytest.CaptureFixture[str], week: Week
) -> None:
    found = []
    for source in ("ledger", "prometheus"):
        code, out, err = run(capsys, week, source, "plan", "--window", "7d", "--json")
        assert code == 1, err  # tts refused by peak
        found.append({v["seat"]: v for v in json.loads(out)["seats"] if v["host"] == HOST})
    from_ledger, from_prometheus = found
    assert {s: v["verdict"] for s, v in from_ledger.items()} == {
        "voices-copy": "pass",
        "tts": "refuse",
    }
    assert [r["rule"] for r in from_ledger["tts"]["reasons"]] == ["peak"]
    for seat, verdict in from_ledger.items():
        # Prometheus keeps no command lines: the plan says so as `check` does.
        expected = as_prometheus_keeps(verdict["window"])
        assert from_prometheus[seat]["window"] == expected
        assert from_prometheus[seat]["cards"] == verdict["cards"]


def test_ledger_window_shows_the_same_rooms_from_either_source(
    capsys: pytest.CaptureFixture[str], week: Week
) -> None:
    found = []
    warned = []
    for source in ("ledger", "prometheus"):
        code, out, err = run(capsys, week, source, "ledger", "--window", "7d", "--json")
        assert code == 0, err
        (host,) = [h for h in json.loads(out)["hosts"] if h["host"] == HOST]
        found.append(host["window"])
        warned.append([line for line in err.splitlines() if line.startswith("warning: rebase")])
    from_ledger, from_prometheus = found
    rooms = [(c["card"], c["window_room_bytes"], c["short_moments"]) for c in from_ledger["cards"]]
    assert rooms == [(0, 13_624_147_968, 0), (1, 80_229_695_488, 84)]
    assert from_ledger["warnings"] == []
    assert from_prometheus == as_prometheus_keeps(from_ledger)
    # Prometheus keeps no command lines: `ledger` says so as `check` does, once per host.
    assert warned[0] == []
    assert warned[1] == [
        f"warning: rebase: the history of {host} keeps no command lines (Prometheus): a seat "
        "redeployed with other flags in the window is counted as observed, not rebased"
        for host in (HOST, SKEWED)
    ]
