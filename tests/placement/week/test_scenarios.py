"""The week's scenarios as one table over synthetic ledgers (issue 34 item 5): each a host's
week written by the real ledger writer, replayed through the history interface, with exact
counts. The seed's host is in test_check_window.py (through the command)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from inventory.attribution import attribute
from inventory.history.ledger import LedgerHistory
from inventory.history.model import Moment
from inventory.ledger.store import open_ledger
from inventory.snapshot import Snapshot
from placement.fit.engines import requested_bytes
from placement.fit.week import NewSeat, SeatWindow, WindowRules, replay
from seats.loader import load_catalogue
from tests.placement.week.builders import (
    CUDA_TOTAL,
    GIB,
    START,
    Proc,
    between,
    moments,
    write_week,
)

CATALOGUE = """
hosts:
  h1: {cards: 2, card_total: 97871 MiB, cuda_context: 1183 MiB}
seats:
  - {name: stt, host: h1, gpus: [0], resident: 30 GiB, state: running, match: 'stt[.]py'}
  - name: chat
    host: h1
    gpus: [0]
    resident: 40 GiB
    engine: {kind: vllm, version: "0.11.0", gpu_memory_utilization: 0.5, kv_cache_memory: 20 GiB}
"""
CTX = 1183 * 2**20
DAY = timedelta(days=1)
# ceil(0.5 × CUDA total): chat's own gate request
CHAT_REQUEST = requested_bytes(Decimal("0.5"), CUDA_TOTAL)


def foreign(gib: float, pid: int = 900, line: str = "python3 serve.py") -> Proc:
    return Proc(pid, int(gib * GIB), line)


def stt(gib: float, line: str = "python3 stt.py --batch 8") -> Proc:
    return Proc(11, int(gib * GIB), line)


@dataclass(frozen=True)
class Scenario:
    name: str
    cards: list[Callable[[datetime], list[Proc] | None]]
    seat: NewSeat
    expect: dict[str, Any]
    rules: dict[str, Any] = field(default_factory=dict)
    days: float = 7
    skip: Callable[[datetime], bool] = lambda at: False


def day_of(at: datetime) -> int:
    return (at - START) // DAY


SCENARIOS = [
    Scenario(
        "flat",
        [lambda at: [stt(30)], lambda at: []],
        NewSeat("new", (0,), 60 * GIB),
        {"status": "pass", "short": 0, "window_room": CUDA_TOTAL - 30 * GIB},
    ),
    Scenario(
        # A request-gated seat that fits by room at every moment, but whose own gate would
        # refuse a restart while a PyTorch neighbour holds 30 GiB more in the working hours.
        "vllm restart in the busy hours",
        [lambda at: [stt(20)] + ([foreign(30)] if between(at, 9, 17) else []), lambda at: []],
        NewSeat("chat", (0,), 40 * GIB, {0: CHAT_REQUEST}),
        {
            "status": "pass",
            "short": 0,
            "restart": ("chat", 9 * 6 * 7, CHAT_REQUEST - (CUDA_TOTAL - 50 * GIB - CTX)),
            "restart_hours": list(range(9, 18)),
        },
    ),
    Scenario(
        "vllm restart in the busy hours, --restart-safe",
        [lambda at: [stt(20)] + ([foreign(30)] if between(at, 9, 17) else []), lambda at: []],
        NewSeat("chat", (0,), 40 * GIB, {0: CHAT_REQUEST}),
        {"status": "refuse", "rules": ["restart"]},
        rules={"restart_safe": True},
    ),
    Scenario(
        # 4 GiB more each day: the daily minima fall on a line, 2.74 days left with the seat.
        "a co-tenant growing every day",
        [lambda at: [stt(30), foreign(10 + 4 * day_of(at))], lambda at: []],
        NewSeat("new", (0,), 20 * GIB),
        {
            "status": "pass",
            "short": 0,
            "forecast": (7, -4 * GIB, CUDA_TOTAL - 64 * GIB, (CUDA_TOTAL - 84 * GIB) / (4 * GIB)),
            "warnings": ["trend"],
        },
    ),
    Scenario(
        "a co-tenant growing every day, --horizon 7d",
        [lambda at: [stt(30), foreign(10 + 4 * day_of(at))], lambda at: []],
        NewSeat("new", (0,), 20 * GIB),
        {"status": "refuse", "rules": ["trend"]},
        rules={"horizon_days": Decimal(7)},
    ),
    Scenario(
        # A server whose cache grows through the day and is restarted at 23:00: the newest
        # snapshot (23:50) shows it small.
        "a nightly restart hides the peak",
        [lambda at: [stt(30), foreign(35 if 8 <= at.hour < 23 else 5)], lambda at: []],
        NewSeat("new", (0,), 40 * GIB),
        {
            "status": "refuse",
            "rules": ["peak"],
            "short": 15 * 6 * 7,
            "room_now": CUDA_TOTAL - 35 * GIB,
        },
    ),
    Scenario(
        "gaps over the peak",
        [lambda at: [stt(30), foreign(40 if between(at, 14, 15) else 10)], lambda at: []],
        NewSeat("new", (0,), 40 * GIB),
        {"status": "unknown", "why": "coverage", "short": 0, "unseen_hours": [13, 14, 15, 16]},
        skip=lambda at: between(at, 13, 16),
    ),
    Scenario(
        "too little history",
        [lambda at: [stt(30)], lambda at: []],
        NewSeat("new", (0,), 60 * GIB),
        {"status": "unknown", "why": "history", "short": 0},
        days=0.5,
    ),
    Scenario(
        # stt redeployed with other flags 3 days before the end, 30 → 20 GiB: counted at its
        # peak since (20 GiB) before the change.
        "a redeploy 3 days ago (rebase)",
        [
            lambda at: [stt(30) if day_of(at) < 4 else stt(20, "python3 stt.py --batch 4")],
            lambda at: [],
        ],
        NewSeat("new", (0,), 70 * GIB),
        {"status": "pass", "short": 0, "rebased": ("stt", START + 4 * DAY, 20 * GIB)},
    ),
    Scenario(
        "a redeploy 3 days ago, --no-rebase",
        [
            lambda at: [stt(30) if day_of(at) < 4 else stt(20, "python3 stt.py --batch 4")],
            lambda at: [],
        ],
        NewSeat("new", (0,), 70 * GIB),
        {"status": "refuse", "rules": ["peak"], "short": 4 * 144},
        rules={"rebase": False},
    ),
    Scenario(
        # Redeployed 6 hours before the end at 20 GiB: seen under --min-history, so counted at
        # max(its bytes, its declared 30 GiB) at every moment.
        "a redeploy 6 hours ago (cold)",
        [
            lambda at: [
                stt(30)
                if at < START + 7 * DAY - timedelta(hours=6)
                else stt(20, "python3 stt.py --batch 4")
            ],
            lambda at: [],
        ],
        NewSeat("new", (0,), 70 * GIB),
        {
            "status": "refuse",
            "rules": ["peak"],
            "short": 1008,
            "cold": ("stt", 6 * 3600 - 600, 30 * GIB),
        },
    ),
    Scenario(
        # Tensor parallel on cards 0 and 1: short on card 0 at 10:00 and on card 1 at 20:00;
        # the union by moment counts both hours.
        "a tensor-parallel seat short on each card at a different hour",
        [
            lambda at: [stt(30), foreign(40 if at.hour == 10 else 10)],
            lambda at: [foreign(80 if at.hour == 20 else 10, 901)],
        ],
        NewSeat("tp", (0, 1), 45 * GIB),
        {
            "status": "refuse",
            "rules": ["peak"],
            "short": 84,
            "short_by_hour": {10: 42, 20: 42},
            "per_card": [42, 42],
        },
    ),
    Scenario(
        "a card in error for an hour",
        [lambda at: None if day_of(at) == 3 and at.hour == 10 else [stt(30)], lambda at: []],
        NewSeat("new", (0,), 60 * GIB),
        {
            "status": "pass",
            "short": 0,
            "seen": 1002,
            "coverage": Decimal(1) - Decimal(6 * 600) / 604800,
        },
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario(tmp_path: Path, scenario: Scenario) -> None:
    catalogue_path = tmp_path / "catalogue.yaml"
    catalogue_path.write_text(CATALOGUE)
    catalogue = load_catalogue(str(catalogue_path))
    week = moments("h1", scenario.cards, days=scenario.days, skip=scenario.skip)
    path = write_week(tmp_path / "ledger.sqlite", week)
    with open_ledger(path) as ledger:
        newest = ledger.latest("h1")
        assert newest is not None
        end = newest.taken_at
        rules = WindowRules(start=end - 7 * DAY, end=end, **scenario.rules)
        found = LedgerHistory(ledger.connection).moments(
            "h1", rules.start, end + timedelta(seconds=1)
        )
        (judged,) = replay(catalogue, attribute(newest, catalogue), found, [scenario.seat], rules)
    check(judged, scenario.expect)


def check(judged: SeatWindow, expect: dict[str, Any]) -> None:
    assert judged.status == expect["status"]
    assert [r.rule for r in judged.reasons] == expect.get("rules", [])
    assert judged.unknown_why == expect.get("why")
    if "short" in expect:
        assert judged.short_moments == expect["short"]
    card = judged.cards[0]
    if "window_room" in expect:
        assert card.window_room_bytes == expect["window_room"]
    if "room_now" in expect:
        assert card.room_now_bytes == expect["room_now"] >= judged.need_bytes
    if "restart" in expect:
        (risk,) = judged.restart_risks
        assert (risk.seat, risk.short_moments, risk.short_bytes) == expect["restart"]
        assert [h for h, days in enumerate(risk.by_hour) if days == 7] == expect["restart_hours"]
    if "forecast" in expect:
        cast = card.forecast
        buckets, slope, intercept, days = expect["forecast"]
        assert (cast.buckets, cast.slope_bytes_per_day, cast.intercept_bytes) == (
            buckets,
            slope,
            intercept,
        )
        assert cast.days_to_full_with_seat == pytest.approx(days)
        assert (cast.r2, cast.confidence) == (1.0, "high")
    if "warnings" in expect:
        assert [w.kind for w in judged.warnings] == expect["warnings"]
    if "unseen_hours" in expect:
        assert list(judged.host.unseen_hours) == expect["unseen_hours"]
        assert judged.coverage == Decimal(1) - Decimal(7 * (4 * 3600 + 600 - 600)) / 604800
    if "rebased" in expect:
        (moved,) = judged.rebased
        assert (moved.seat, moved.changed_at, moved.peak_bytes) == expect["rebased"]
    if "cold" in expect:
        (cold,) = judged.cold
        assert (cold.seat, cold.seen_s, cold.need_bytes) == expect["cold"]
    if "short_by_hour" in expect:
        assert {h: n for h, n in enumerate(judged.short_by_hour) if n} == expect["short_by_hour"]
        assert [c.short_moments for c in judged.cards] == expect["per_card"]
    if "seen" in expect:
        assert judged.seen_moments == expect["seen"]
        assert judged.coverage == expect["coverage"]
        assert [w.kind for w in judged.warnings] == ["gap"]


@dataclass(frozen=True, slots=True)
class Arrived(Moment):
    """A moment with its arrival time, as a ledger that records arrivals will yield it."""

    arrived_at: datetime | None = None


def test_a_clock_skew_is_counted_and_named(tmp_path: Path) -> None:
    catalogue_path = tmp_path / "catalogue.yaml"
    catalogue_path.write_text(CATALOGUE)
    catalogue = load_catalogue(str(catalogue_path))
    snapshots = list(moments("h1", [lambda at: [stt(30)], lambda at: []], days=2))

    def arrived(found: Iterable[Moment]) -> Iterator[Moment]:
        for i, m in enumerate(found):
            late = timedelta(minutes=7 if i % 10 == 0 else 1)  # every tenth arrived 7 min late
            yield Arrived(m.host, m.taken_at, m.cards, m.taken_at + late)

    path = write_week(tmp_path / "ledger.sqlite", iter(snapshots))
    newest: Snapshot = snapshots[-1]
    with open_ledger(path) as ledger:
        rules = WindowRules(start=newest.taken_at - 2 * DAY, end=newest.taken_at)
        found = LedgerHistory(ledger.connection).moments(
            "h1", rules.start, newest.taken_at + timedelta(seconds=1)
        )
        (judged,) = replay(
            catalogue,
            attribute(newest, catalogue),
            arrived(found),
            [NewSeat("new", (0,), GIB)],
            rules,
        )
    assert (judged.host.skewed, judged.host.largest_skew_s) == (29, 420)  # 288 moments, every tenth
    assert [w.kind for w in judged.warnings] == ["clock"]
    assert judged.status == "pass"
