"""`ledger --window` of hosts judged on their hourly rollups (placement.fit.week.hourly): every
host's buckets read in one query equal those read host by host, and where every seat was warm and
up all week the figures equal the replay's of every moment."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from inventory.history.ledger import LedgerHistory
from inventory.ledger.store import open_ledger
from placement.cli import main as cli
from tests.placement.week.builders import (
    CUDA_TOTAL,
    GIB,
    MIB,
    START,
    Proc,
    between,
    moments,
    write_week,
)

HOSTS = ("h1", "h2", "h3")
CATALOGUE = "hosts:\n" + "".join(
    f"  {h}: {{cards: 2, card_total: 97871 MiB, cuda_context: 1183 MiB, margin: 256 MiB}}\n"
    for h in HOSTS
) + "seats:\n" + "".join(
    f"  - {{name: stt-{h}, host: {h}, gpus: [0], resident: 20 GiB, state: running, "
    "match: 'stt[.]py'}\n"
    for h in HOSTS
)  # fmt: skip
END = START + timedelta(days=7) - timedelta(minutes=10)  # the newest moment: Sunday 23:50


def week_of(n: int) -> list[Any]:
    """Host n: card 0 a speech seat and a cache growing n GiB a day; card 1 an Ollama of
    10·(n + 1) GiB each afternoon, 14:00–15:59 UTC."""

    def card0(at: datetime) -> list[Proc]:
        day = (at - START).days
        grow = Proc(12, (4 + n * day) * GIB + (at.minute % 3) * MIB, "python3 cache.py")
        return [Proc(11, 20 * GIB, "python3 stt.py", f"stt-{HOSTS[n]}"), grow]

    def card1(at: datetime) -> list[Proc]:
        return (
            [Proc(21, 10 * (n + 1) * GIB, "/usr/bin/ollama serve")] if between(at, 14, 15) else []
        )

    return list(moments(HOSTS[n], [card0, card1]))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The catalogue, the ledger, and a copy whose hosts' raw moments are marked kept only from
    the last hour (as `compact` leaves them; the rows stay, so both can be compared)."""
    folder = tmp_path_factory.mktemp("hourly")
    catalogue = folder / "catalogue.yaml"
    catalogue.write_text(CATALOGUE)
    ledger = write_week(folder / "ledger.sqlite", iter([m for n in range(3) for m in week_of(n)]))
    thinned = folder / "thinned.sqlite"
    shutil.copyfile(ledger, thinned)
    since = int(END.timestamp()) - int(END.timestamp()) % 3600
    with sqlite3.connect(thinned) as connection:
        connection.executemany(
            "INSERT INTO raw_kept(host, since_s) VALUES (?, ?)", [(h, since) for h in HOSTS]
        )
    return catalogue, ledger, thinned


@pytest.mark.slow
def test_every_hosts_buckets_in_one_query_equal_each_hosts_rollups(
    fleet: tuple[Path, Path, Path],
) -> None:
    _, ledger, _ = fleet
    start = START  # whole hours from the window's start: Monday 00:00 to Sunday 23:00
    stop = END + timedelta(seconds=1)
    with open_ledger(ledger, readonly=True) as opened:
        history = LedgerHistory(opened.connection)
        found = history.daily_rooms({h: (start, stop) for h in HOSTS})
        by_host: list[tuple[str, int, int, int | None, int | None, int, int, int, bool]] = []
        for host in HOSTS:
            least: dict[tuple[int, int], tuple[int, int]] = {}
            seen: dict[tuple[int, int], list[int]] = {}
            for row in history.rollups(host, start, stop).cards:
                k = (int(stop.timestamp()) - 1 - int(row.hour.timestamp())) // 86400
                key = (row.card, k)
                counts = seen.setdefault(key, [0, 0, 0])
                counts[1] += row.samples
                counts[2] += row.error_samples
                if row.min_free_bytes is None or row.min_free_at is None:
                    continue
                counts[0] += 1
                value = (row.min_free_bytes, int(row.min_free_at.timestamp()))
                least[key] = min(least.get(key, value), value)
            for (card, k), (hours, samples, errors) in sorted(seen.items()):
                free, at = least[(card, k)]
                by_host.append((host, card, k, free, at, hours, samples, errors, True))
    assert [tuple(r) for r in found] == by_host
    assert len(found) == 3 * 2 * 7
    # h3's card 1 on the first day: the 30 GiB Ollama at 14:00 its least, 24 hours, 144 moments.
    first = next(r for r in found if (r.host, r.card, r.day) == ("h3", 1, 6))
    at_14 = int((START + timedelta(hours=14)).timestamp())
    assert (first.min_free_bytes, first.min_free_at_s) == (CUDA_TOTAL - 30 * GIB, at_14)
    assert (first.hours, first.samples, first.error_samples) == (24, 144, 0)


def _window(catalogue: Path, ledger: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    argv = ["ledger", "--catalogue", str(catalogue), "--ledger", str(ledger)]
    code = cli.main([*argv, "--max-age", "1000d", "--window", "7d", "--json"])
    assert code == 0
    return json.loads(capsys.readouterr().out)


KEYS = ("card", "room_now_bytes", "window_room_bytes", "min_room_at", "forecast")


@pytest.mark.slow
def test_a_fleet_on_its_rollups_shows_the_replays_figures_where_seats_are_warm(
    fleet: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue, ledger, thinned = fleet
    replayed = _window(catalogue, ledger, capsys)
    hourly = _window(catalogue, thinned, capsys)
    for every, rolled in zip(replayed["hosts"], hourly["hosts"], strict=True):
        assert "judged_on" not in every["window"]
        block = rolled["window"]
        assert (block["judged_on"], block["raw_since"]) == (
            "hourly rollups",
            "2026-09-20T23:00:00Z",
        )
        assert [{k: c[k] for k in KEYS} for c in every["window"]["cards"]] == [
            {k: c[k] for k in KEYS} for c in block["cards"]
        ]
        assert [(c["hours"], c["samples"]) for c in block["cards"]] == [(168, 1008)] * 2
    # h2: card 1 had 20 GiB less room than now at the first afternoon's 14:00; card 0's cache
    # grows 1 GiB a day, so its daily least room falls 1 GiB a day (exactly: R² = 1).
    h2 = hourly["hosts"][1]["window"]["cards"]
    assert h2[1]["window_room_bytes"] == h2[1]["room_now_bytes"] - 20 * GIB
    assert h2[1]["min_room_at"] == "2026-09-14T14:00:00Z"
    cast = h2[0]["forecast"]
    assert (cast["buckets"], cast["slope_bytes_per_day"], cast["r2"]) == (7, -GIB, 1.0)
    room_now = CUDA_TOTAL - 20 * GIB - 10 * GIB - 2 * MIB - 256 * MIB  # 23:50: minute 50 % 3 = 2
    assert h2[0]["room_now_bytes"] == room_now
    # The least is Sunday's (the cache at its largest, 2 MiB over at minutes 20, 50): now's,
    # first at 00:20; the line passes through it at the end.
    assert (h2[0]["window_room_bytes"], h2[0]["min_room_at"]) == (room_now, "2026-09-20T00:20:00Z")
    assert (cast["intercept_bytes"], cast["days_to_full"]) == (room_now, round(room_now / GIB, 2))


def test_the_text_says_the_window_was_judged_on_hourly_rollups(
    fleet: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue, _, thinned = fleet
    argv = ["ledger", "--catalogue", str(catalogue), "--ledger", str(thinned), "--max-age", "1000d"]
    assert cli.main([*argv, "--window", "7d"]) == 0
    out = capsys.readouterr().out
    assert (
        "h1 · window 2026-09-13T23:50Z → 2026-09-20T23:50Z · judged on hourly rollups "
        "(raw moments from 2026-09-20T23:00Z; seats as observed)"
    ) in out
    block = out[out.index("h3 · window") :].splitlines()
    assert block[1].split() == [
        "card",
        "room",
        "now",
        "window",
        "room",
        "least",
        "at",
        "days",
        "to",
        "full",
    ]
    # card 1: room now CUDA total − margin (94.72 GiB), 30 GiB less at the Ollama's afternoons
    assert block[3].split()[:5] == ["1", "94.72", "GiB", "64.72", "GiB"]
