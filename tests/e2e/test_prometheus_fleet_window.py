"""`ledger --window` of a fleet from Prometheus's recorded rollups: the rules `gpuplan rules`
prints, backfilled by promtool from a week of the exporter's scrapes, answer every host at once
with the figures each host's own replay of every moment gives.

The fleet is tests/placement/week/test_hourly.py's: three hosts, two cards each, a week of
10-minute moments (card 0 a speech seat beside a cache growing n GiB a day, card 1 an Ollama of
10·(n + 1) GiB every afternoon). Three Prometheus servers hold it: `raw` the scrapes alone (each
17 s after its snapshot), `recorded` the scrapes and the rules' series (promtool evaluated them
every minute over the week), `rollups` the rules' series and only the last hour's scrapes (a
short raw retention beside kept rollups: the case the fleet's window is for).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from inventory.prometheus.hours import render_recording_rules
from inventory.snapshot import Snapshot
from placement.cli import main as cli
from seats.loader import load_catalogue
from tests.e2e.harness import (
    Processes,
    free_port,
    merged_tsdb,
    prometheus_and_promtool,
    rule_blocks,
    start_prometheus_on,
)
from tests.e2e.promweek import backfill
from tests.e2e.test_prometheus_window import as_prometheus_keeps
from tests.placement.week.builders import CUDA_TOTAL, GIB, START, write_week
from tests.placement.week.test_hourly import CATALOGUE, END, HOSTS, week_of

pytestmark = pytest.mark.slow

SCRAPE_LAG_S = 17
# The commands run a minute after the newest snapshot was scraped.
NOW = END + timedelta(minutes=1)
LAST_HOUR = END - timedelta(minutes=50)  # 23:00, the last hour's first snapshot


@dataclass(frozen=True)
class Servers:
    catalogue: Path
    ledger: Path
    raw: str
    recorded: str
    rollups: str


def _scraped_s(snapshot: Snapshot) -> float:
    return snapshot.taken_at.timestamp() + SCRAPE_LAG_S


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    binary, promtool = prometheus_and_promtool()
    folder = tmp_path_factory.mktemp("promfleet")
    catalogue = folder / "fleet.yaml"
    catalogue.write_text(CATALOGUE)
    loaded = load_catalogue(catalogue)
    week = [m for n in range(len(HOSTS)) for m in week_of(n)]
    ledger = write_week(folder / "ledger.sqlite", iter(week))
    raw = backfill(week, loaded, folder / "raw", promtool, scraped_s=_scraped_s)
    last = [m for m in week if m.taken_at >= LAST_HOUR]
    recent = backfill(last, loaded, folder / "recent", promtool, scraped_s=_scraped_s)
    rules = folder / "rules.yml"
    rules.write_text(render_recording_rules())
    processes = Processes()
    try:
        raw_url = start_prometheus_on(processes, binary, raw, folder / "raw-server")
        kept = folder / "recorded-blocks"
        start_s, end_s = int(START.timestamp()), int((END + timedelta(hours=1)).timestamp())
        rule_blocks(promtool, raw_url, rules, kept, start_s, end_s)
        both = merged_tsdb(folder / "recorded", raw, kept)
        rolled = merged_tsdb(folder / "rollups", recent, kept)
        recorded_url = start_prometheus_on(processes, binary, both, folder / "recorded-server")
        rollups_url = start_prometheus_on(processes, binary, rolled, folder / "rollups-server")
        yield Servers(catalogue, ledger, raw_url, recorded_url, rollups_url)
    finally:
        processes.stop_all()


@pytest.fixture(autouse=True)
def _now(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("check", "ledger"):
        monkeypatch.setattr(f"placement.cli.{module}.utc_now", lambda: NOW)


def _ledger_window(
    capsys: pytest.CaptureFixture[str], servers: Servers, url: str, *extra: str
) -> tuple[int, str, str]:
    argv = ["ledger", "--catalogue", str(servers.catalogue), "--prometheus", url]
    code = cli.main([*argv, "--window", "7d", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _windows(capsys: pytest.CaptureFixture[str], servers: Servers, url: str) -> list[Any]:
    code, out, err = _ledger_window(capsys, servers, url, "--json")
    assert code == 0, err
    return [host["window"] for host in json.loads(out)["hosts"]]


KEYS = ("card", "room_now_bytes", "window_room_bytes", "forecast")


def test_the_fleet_on_recorded_rollups_shows_each_hosts_replayed_figures(
    capsys: pytest.CaptureFixture[str], servers: Servers
) -> None:
    replayed = _windows(capsys, servers, servers.raw)
    rolled = _windows(capsys, servers, servers.rollups)
    assert len(replayed) == len(rolled) == 3
    for every, block in zip(replayed, rolled, strict=True):
        assert "judged_on" not in every
        assert block["judged_on"] == "hourly rollups recorded by Prometheus (gpuplan rules)"
        assert block["raw_since"] == "2026-09-20T23:00:00Z"
        assert [{k: c[k] for k in KEYS} for c in every["cards"]] == [
            {k: c[k] for k in KEYS} for c in block["cards"]
        ]
        for exact, hourly in zip(every["cards"], block["cards"], strict=True):
            # The rules keep the hour of the least (its end, the rule's evaluation): the
            # replay's moment was scraped in it.
            closed = datetime.fromisoformat(hourly["min_room_at"])
            at = datetime.fromisoformat(exact["min_room_at"]) + timedelta(seconds=SCRAPE_LAG_S)
            assert hourly["min_room_dated"] is False
            assert closed - timedelta(hours=1) <= at <= closed
        # The rules' hours ending in the window, up to the newest recorded: 168 of them, of 6
        # moments each but the first, which begins before the week's first scrape (the hours
        # (e − 1 h, e] tile time: no scrape is counted twice). Where in the hour they end
        # comes from the rule file's path (promtool derives the offset as Prometheus does),
        # so the first holds 1 to 6 moments.
        for card in block["cards"]:
            assert card["hours"] == 168
            assert 167 * 6 + 1 <= card["samples"] <= 168 * 6
    # h2: card 1 had 20 GiB less room than now each afternoon, the first at 14:00 Monday,
    # scraped at 14:00:17, in the first hour of the rules' that holds it (their offset within the
    # hour comes from the group in Prometheus, from --start in promtool).
    h2 = rolled[1]["cards"]
    assert h2[1]["window_room_bytes"] == h2[1]["room_now_bytes"] - 20 * GIB
    closed = datetime.fromisoformat(h2[1]["min_room_at"])
    scraped = datetime.fromisoformat("2026-09-14T14:00:17+00:00")
    assert timedelta(0) <= closed - scraped < timedelta(hours=1)
    cast = h2[0]["forecast"]
    assert (cast["buckets"], cast["slope_bytes_per_day"], cast["r2"]) == (7, -GIB, 1.0)


def test_the_text_names_the_recorded_rollups_and_the_hour_of_the_least(
    capsys: pytest.CaptureFixture[str], servers: Servers
) -> None:
    code, out, err = _ledger_window(capsys, servers, servers.rollups)
    assert code == 0, err
    assert (
        "h2 · window 2026-09-13T23:50Z → 2026-09-20T23:50Z · judged on hourly rollups recorded "
        "by Prometheus (gpuplan rules) (raw moments from 2026-09-20T23:00Z; seats as observed)"
    ) in out
    # Each host's card 1, least at Monday's first Ollama load: the rule's hour holding 14:00:17.
    hours = re.findall(r"the hour to (2026-09-14T1[45]:\d\d:\d\dZ)", out)
    assert len(hours) == 3 and len(set(hours)) == 1
    closed = datetime.fromisoformat(hours[0])
    assert (
        timedelta(0) <= closed - datetime.fromisoformat("2026-09-14T14:00:17Z") < timedelta(hours=1)
    )


def test_recorded_rollups_beside_every_raw_scrape_change_no_replayed_window(
    capsys: pytest.CaptureFixture[str], servers: Servers
) -> None:
    # Raw scrapes reach the window's start: each host is replayed, the rules' series unread.
    assert _windows(capsys, servers, servers.recorded) == _windows(capsys, servers, servers.raw)


def test_a_check_window_reads_the_same_week_beside_recorded_rollups(
    capsys: pytest.CaptureFixture[str], servers: Servers
) -> None:
    # A redeploy of h2's speech seat, judged over the week from the ledger and from the
    # Prometheus that holds the rules' series beside every scrape: the same block.
    blocks = []
    for where in (["--ledger", str(servers.ledger)], ["--prometheus", servers.recorded]):
        argv = ["check", "stt-h2", "--catalogue", str(servers.catalogue), *where, "--no-hold"]
        code = cli.main([*argv, "--window", "7d", "--json"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        blocks.append(json.loads(captured.out)["window"])
    from_ledger, from_prometheus = blocks
    assert from_ledger["moments"] == 1008
    assert from_prometheus == as_prometheus_keeps(from_ledger, host="h2")


def test_the_room_now_is_the_newest_snapshots(
    capsys: pytest.CaptureFixture[str], servers: Servers
) -> None:
    rolled = _windows(capsys, servers, servers.rollups)
    # h1 at 23:50: card 0 holds the speech seat's 20 GiB, its 4 GiB cache (h1's grows by 0 GiB
    # a day) and 2 MiB (minute 50 % 3), less the margin; card 1 holds nothing then.
    card0, card1 = rolled[0]["cards"]
    assert card0["room_now_bytes"] == CUDA_TOTAL - 24 * GIB - 2 * 2**20 - 256 * 2**20
    assert card1["room_now_bytes"] == CUDA_TOTAL - 256 * 2**20


def test_an_unreachable_prometheus_is_exit_3_in_one_line(
    capsys: pytest.CaptureFixture[str], servers: Servers
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    code, _, err = _ledger_window(capsys, servers, nobody, "--timeout", "2")
    assert code == 3
    (line,) = err.strip().splitlines()
    assert line.startswith("error: ") and "127.0.0.1" in line
    assert "Traceback" not in err
