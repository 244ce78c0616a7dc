"""The report's week (placement.report.week) over a synthetic week of fv-ml1, read as a history.

Three days of 10-minute moments of fv-ml1 as recorded, changed by hour: an Ollama server loads a
model into all but 128 MiB of card 1 from 14:00 to 15:59 UTC each day, embed grows 1 GiB a day
on card 1, and
cyberprev takes 1 GiB more on card 0 from 14:00 to 14:59 on the last day only (vllm-voices then
cannot restart). The raw moments are counted by a spy, so what the rollups decided is checked too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from inventory.attribution import attribute
from inventory.history import CardReading, Moment, ProcessReading, Rollups
from inventory.history.rollup import hourly
from inventory.snapshot import Snapshot, parse_snapshot
from placement.report.week import build_week, hour_ranges, slope_per_day, strip_cell
from seats.loader import load_catalogue
from seats.units import GiB
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

CATALOGUE = load_catalogue(FV_ML1_CATALOGUE)
RECORDED: dict[str, Any] = json.loads(FV_ML1_SNAPSHOT.read_text())
START = datetime(2026, 9, 13, 0, 0, tzinfo=UTC)
DAYS = 3
STEP = timedelta(minutes=10)
OLLAMA = "ollama serve"
LEFT = 128 * 2**20  # what Ollama leaves free on card 1
MARGIN = 256 * 2**20


def _state(at: datetime) -> dict[str, Any]:
    data = copy.deepcopy(RECORDED)
    data["taken_at"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    day = (at - START).days
    card0, card1 = data["cards"][0], data["cards"][1]
    if day == DAYS - 1 and at.hour == 14:
        card0["processes"][0]["used_bytes"] += GiB  # cyberprev
        card0["used_bytes"] += GiB
        card0["free_bytes"] -= GiB
    # embed: 1 GiB a day more, from 3 GiB less than recorded on day 0.
    grow = (day - 3) * GiB
    card1["processes"][1]["used_bytes"] += grow
    card1["used_bytes"] += grow
    card1["free_bytes"] -= grow
    if at.hour in (14, 15):
        model = card1["free_bytes"] - LEFT
        card1["processes"].append({"pid": 7777, "used_bytes": model, "cmdline": OLLAMA})
        card1["used_bytes"] += model
        card1["free_bytes"] -= model
    return data


def _moment(snapshot: Snapshot) -> Moment:
    return Moment(
        snapshot.host,
        snapshot.taken_at,
        tuple(
            CardReading(
                c.index,
                c.total_bytes,
                c.reserved_bytes,
                c.used_bytes,
                c.free_bytes,
                c.error,
                tuple(ProcessReading(p.pid, p.used_bytes, p.cmdline, p.seat) for p in c.processes),
            )
            for c in snapshot.cards
        ),
    )


class WeekHistory:
    """A history held in memory; counts the moments read raw."""

    def __init__(self) -> None:
        at, self.all = START, []
        while at < START + timedelta(days=DAYS):
            self.all.append(_moment(parse_snapshot(_state(at), "test")))
            at += STEP
        self.raw_reads = 0

    def moments(self, host: str, start: datetime, end: datetime) -> Iterator[Moment]:
        for moment in self.all:
            if moment.host == host and start <= moment.taken_at < end:
                self.raw_reads += 1
                yield moment

    def rollups(self, host: str, start: datetime, end: datetime) -> Rollups:
        return hourly(m for m in self.all if m.host == host and start <= m.taken_at < end)


def _week() -> tuple[Any, WeekHistory]:
    history = WeekHistory()
    end = START + timedelta(days=DAYS)
    newest = parse_snapshot(_state(end - STEP), "test")
    return build_week(history, CATALOGUE, [attribute(newest, CATALOGUE)], START, end), history


def test_room_by_hour_shows_the_afternoon_ollama_on_card_1() -> None:
    week, _ = _week()
    strips = {r.card: r for r in week.room}
    card1 = strips[1]
    # Card 1 as recorded has 5,981,077,504 B free; embed is 3 GiB smaller on day 0, 1 GiB on
    # day 2; Ollama leaves 128 MiB, under the 256 MiB margin, from 14:00 to 15:59 every day.
    assert card1.room_now_bytes == 5981077504 + 1 * GiB - MARGIN
    assert card1.min_room_bytes == LEFT - MARGIN
    assert card1.min_room_at == "2026-09-13T14:00:00Z"  # the earliest of equals
    assert card1.short_hours == (14, 15)
    assert card1.strip[14:16] == "!!" and "!" not in card1.strip[:14] + card1.strip[16:]
    # Card 0: cyberprev's hour on the last day is its tightest.
    assert strips[0].min_room_at == "2026-09-15T14:00:00Z"
    assert strips[0].strip[14] == "▁"
    # Card 3, held whole for flash-next: no room at any hour.
    assert strips[3].short_hours == tuple(range(24))


@pytest.mark.slow
def test_restart_safety_counts_every_moment_and_reads_only_undecided_hours() -> None:
    week, history = _week()
    rows = {r.seat: r for r in week.restarts}
    assert set(rows) == {"cyberprev", "gen-small", "vllm-voices", "chat-large", "code-assist"}
    moments = DAYS * 24 * 6
    voices = rows["vllm-voices"]
    # 14:00–14:59 on the last day: free 1,961,885,696 − 1 GiB + own 11,261,706,240 − 1,183 MiB
    # against ceil(0.11 × 101,972,967,424) = 11,217,026,417: short 307,641,713 B at 6 moments.
    assert (voices.moments, voices.unsafe_moments) == (moments, 6)
    assert voices.worst_short_bytes == 307641713
    assert voices.worst_at == "2026-09-15T14:00:00Z"
    assert (voices.unsafe_hours, voices.unsafe_days) == ((14,), 1)
    gen_small = rows["gen-small"]
    assert (gen_small.unsafe_moments, gen_small.unsafe_hours) == (moments, tuple(range(24)))
    assert gen_small.worst_short_bytes == 9533149676 + GiB
    assert rows["chat-large"].unsafe_moments == 0 and rows["chat-large"].raw_hours == 0
    # Raw moments were read for gen-small's 72 hours and for card 0's hour 14 of the last day
    # for voices (its bounds: min free − 1 GiB + its own is short); cyberprev needs none.
    assert rows["cyberprev"].raw_hours == 0
    assert voices.raw_hours == 1
    assert history.raw_reads == (gen_small.raw_hours + voices.raw_hours) * 6


def test_co_tenants_name_ollama_s_hours_and_embed_s_growth() -> None:
    week, _ = _week()
    tenants = {(t.card, t.seat or t.cmdline): t for t in week.tenants}
    ollama = tenants[(1, OLLAMA)]
    # Largest on day 0, when embed was smallest: all of card 1's free but 128 MiB.
    assert (ollama.peak_bytes, ollama.peak_at) == (
        5981077504 + 3 * GiB - LEFT,
        "2026-09-13T14:00:00Z",
    )
    assert ollama.recurrence == "present 14:00–15:59 UTC on 3 of 3 days"
    assert ollama.growth_bytes_per_day is None  # a foreign command has no growth figure
    embed = tenants[(1, "embed")]
    assert embed.growth_bytes_per_day == GiB
    assert embed.peak_bytes == 31567380480 - GiB
    assert tenants[(0, "cyberprev")].recurrence == "present all day on 3 of 3 days"
    # Per card, seats first (largest peak first), then foreign commands.
    assert [t.seat or t.cmdline for t in week.tenants if t.card == 1] == [
        "chat-large",
        "embed",
        OLLAMA,
    ]


def test_coverage_by_hour() -> None:
    week, _ = _week()
    (row,) = week.coverage
    assert (row.moments, row.hours, row.seen_hours, row.largest_gap_hours) == (432, 72, 72, 0)
    assert row.coverage == 1.0


def test_helpers() -> None:
    assert hour_ranges((14, 15)) == "14:00–15:59 UTC"
    assert hour_ranges((0, 1, 5, 23)) == "00:00–01:59, 05:00–05:59, 23:00–23:59 UTC"
    assert hour_ranges(tuple(range(24))) == "all day"
    assert [strip_cell(v, 0, 100) for v in (None, -1, 0, 1, 50, 100)] == [
        "·",
        "!",
        "!",
        "▁",
        "▄",
        "█",
    ]
    assert slope_per_day([(0, 10), (1, 20)]) is None
    assert slope_per_day([(0, 10), (1, 20), (2, 30)]) == 10
