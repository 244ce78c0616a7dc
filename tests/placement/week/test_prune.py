"""The replay from rollups (`placement.fit.week.prune`) equals the replay of every moment: the
whole `window` block, on random weeks (seeded) and on every scenario of test_scenarios.py."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace as dc_replace
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from inventory.attribution import attribute
from inventory.history.ledger import LedgerHistory
from inventory.history.model import Rollups
from inventory.ledger.store import open_ledger
from placement.fit.engines import requested_bytes
from placement.fit.week import NewSeat, WindowRules, replay
from placement.fit.week.prune import Pruned, open_windows_history, replay_history
from placement.fit.week.replay import open_windows
from seats.loader import load_catalogue
from seats.model import Catalogue
from tests.placement.week import test_scenarios
from tests.placement.week.builders import CUDA_TOTAL, GIB, MIB, START, Proc, moments, write_week

CATALOGUE = """
hosts:
  h1: {cards: 3, card_total: 97871 MiB, cuda_context: 1183 MiB}
seats:
  - {name: stt, host: h1, gpus: [0], resident: 20 GiB, state: running, match: 'stt[.]py'}
  - name: gen
    host: h1
    gpus: [1]
    resident: 30 GiB
    state: running
    match: 'vllm.*--port 8001'
    engine: {kind: vllm, version: "0.11.0", gpu_memory_utilization: 0.4}
  - {name: old, host: h1, gpus: [2], resident: 5 GiB, state: retired, match: 'old[.]py'}
  - {name: fresh, host: h1, gpus: [2], resident: 10 GiB, state: running, match: 'fresh[.]py'}
  - {name: tts, host: h1, gpus: [0], resident: 40 GiB}
  - name: big
    host: h1
    gpus: [1, 2]
    resident: 30 GiB
    engine: {kind: vllm, version: "0.11.0", gpu_memory_utilization: 0.35}
"""
GEN_REQUEST = requested_bytes(Decimal("0.4"), CUDA_TOTAL)
BIG_REQUEST = requested_bytes(Decimal("0.35"), CUDA_TOTAL)
DAYS = 4
STEP = timedelta(minutes=5)


def random_week(seed: int) -> list[Any]:
    """A host of 3 cards over 4 days of 5-minute moments, drawn from `seed`: a seat that wanders
    and is down for some hours, an afternoon load at a drawn hour, single-moment spikes, a
    request-gated seat redeployed with other flags, a growing co-tenant, a retired seat's
    leftovers, a seat started late (cold), a card in error at drawn moments, and a gap."""
    rng = random.Random(seed)
    load_hour = rng.randrange(24)
    down = {rng.randrange(DAYS * 24) for _ in range(3)}
    spikes = {rng.randrange(DAYS * 24 * 12) for _ in range(6)}
    errors = {rng.randrange(DAYS * 24 * 12) for _ in range(4)}
    redeploy = rng.randrange(24, 48) * 12 + rng.randrange(12)
    gap = rng.randrange(30, 80) * 12
    fresh_from = (DAYS * 24 - rng.randrange(4, 20)) * 12
    steady = rng.randrange(DAYS * 24)  # from this hour on card 0's seat holds still

    def slot(at: datetime) -> int:
        return int((at - START) / STEP)

    def card0(at: datetime) -> list[Proc] | None:
        i = slot(at)
        procs = []
        if i // 12 not in down:
            wander = 0 if i // 12 >= steady else rng.randrange(0, 512) * MIB
            procs.append(Proc(11, 20 * GIB + wander, "python3 stt.py"))
        if at.hour == load_hour:
            procs.append(Proc(12, 20 * GIB, "ollama serve"))
        if i in spikes:
            procs.append(Proc(13, rng.randrange(1, 30) * GIB, "python3 spike.py"))
        return procs

    def card1(at: datetime) -> list[Proc] | None:
        i = slot(at)
        port = "--port 8001" + ("" if i < redeploy else " --max-model-len 8192")
        line = f"python3 -m vllm.entrypoints.openai.api_server {port}"
        grow = Proc(21, (5 + 2 * (i // 288)) * GIB + rng.randrange(0, 64) * MIB, "python3 grow.py")
        held = 34 * GIB + rng.randrange(0, 3) * GIB if i >= redeploy else 31 * GIB
        return [Proc(20, held, line, "gen"), grow]

    def card2(at: datetime) -> list[Proc] | None:
        i = slot(at)
        if i in errors:
            return None
        procs = []
        if i % 288 < 100:
            procs.append(Proc(30, 5 * GIB, "python3 old.py"))
        if i >= fresh_from:
            procs.append(Proc(31, 6 * GIB + rng.randrange(0, 4) * GIB, "python3 fresh.py"))
        return procs

    skip_from = START + gap * STEP
    return list(
        moments(
            "h1",
            [card0, card1, card2],
            days=DAYS,
            step=STEP,
            skip=lambda at: skip_from <= at < skip_from + timedelta(minutes=45),
        )
    )


@pytest.fixture
def catalogue(tmp_path: Path) -> Catalogue:
    path = tmp_path / "catalogue.yaml"
    path.write_text(CATALOGUE)
    return load_catalogue(str(path))


class Undated(LedgerHistory):
    """The ledger's history as Prometheus's aggregates bound it (`PrometheusHistory.bounds`):
    no card hour says when its least free fell, nor a group present at every moment whose bytes
    moved when its extremes fell; of the cards asked for only."""

    def bounds(
        self, host: str, start: datetime, end: datetime, cards: Sequence[int] | None = None
    ) -> Rollups:
        found = self.rollups(host, start, end)
        moments = {(c.hour, c.card): c.samples for c in found.cards}
        kept = range(64) if cards is None else cards
        return Rollups(
            cards=tuple(
                dc_replace(c, min_free_at=None, dated=False) for c in found.cards if c.card in kept
            ),
            commands=tuple(
                dc_replace(g, min_at=g.hour, max_at=g.hour, dated=False)
                if g.min_bytes != g.max_bytes and g.samples == moments[(g.hour, g.card)]
                else g
                for g in found.commands
                if g.card in kept
            ),
        )


def both(
    path: Path,
    catalogue: Catalogue,
    seats: list[NewSeat],
    open_every_card: bool = False,
    undated: bool = False,
    **rules: Any,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Pruned]:
    """The window blocks of the full replay and of the pruned one, and what the latter read;
    `open_every_card`: `open_windows` (ledger --window's) instead of `seats`; `undated`: the
    pruned replay reads bounds that do not date their extremes first (Prometheus's)."""
    with open_ledger(path, readonly=True) as ledger:
        newest = ledger.latest("h1")
        assert newest is not None
        end = newest.taken_at
        window = WindowRules(start=end - timedelta(days=7), end=end, **rules)
        history = (Undated if undated else LedgerHistory)(ledger.connection)
        snapshot = attribute(newest, catalogue)
        every = history.moments("h1", window.start, end + timedelta(seconds=1))
        if open_every_card:
            needs = {0: 50 * GIB, 1: 45 * GIB}
            full = open_windows(catalogue, snapshot, every, window, needs=needs)
            opened = open_windows_history(catalogue, snapshot, history, window, needs=needs)
            return [w.to_json() for w in full], [w.to_json() for w in opened], Pruned()
        full = replay(catalogue, snapshot, every, seats, window)
        stats = Pruned()
        pruned = replay_history(catalogue, snapshot, history, seats, window, stats)
    return [w.to_json() for w in full], [w.to_json() for w in pruned], stats


DEPLOYS = [
    # tts on card 0 at a need short in the afternoon load and at the spikes only
    ([NewSeat("tts", (0,), 50 * GIB)], {}),
    ([NewSeat("tts", (0,), 60 * GIB)], {"percentile": Decimal("99.5")}),
    # a redeploy of stt: its own bytes freed at every moment
    ([NewSeat("stt", (0,), 60 * GIB)], {}),
    # a tensor-parallel seat with a gate on card 1 (gen's restart at stake), card 2 cold/retired
    ([NewSeat("big", (1, 2), 30 * GIB, {1: BIG_REQUEST})], {"restart_safe": True}),
    # the same at a need short on the last day, where gen could no longer restart
    ([NewSeat("big", (1, 2), 45 * GIB, {1: BIG_REQUEST})], {}),
    # a gate that the growing co-tenant closes in some hours (the gate's hours, its own restart)
    ([NewSeat("big", (1, 2), 20 * GIB, {1: requested_bytes(Decimal("0.5"), CUDA_TOTAL)})], {}),
    # two seats at once, without rebase, with a horizon
    (
        [NewSeat("tts", (0,), 30 * GIB), NewSeat("big", (1, 2), 20 * GIB, {1: BIG_REQUEST})],
        {"rebase": False, "horizon_days": Decimal(30)},
    ),
    # room nobody names (ledger --window's probe): need 0
    ([NewSeat("", (1,), 0)], {"min_history_s": 3600}),
]


@pytest.mark.slow
@pytest.mark.parametrize("undated", [False, True], ids=["dated", "undated"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_pruned_replay_equals_the_full_one_on_random_weeks(
    tmp_path: Path, catalogue: Catalogue, seed: int, undated: bool
) -> None:
    path = write_week(tmp_path / "ledger.sqlite", iter(random_week(seed)))
    read = 0
    for seats, rules in DEPLOYS:
        full, pruned, stats = both(path, catalogue, seats, undated=undated, **rules)
        assert pruned == full, (seed, seats, rules)
        assert stats.hours == DAYS * 24
        read += stats.raw_moments
    full, pruned, _ = both(path, catalogue, [], open_every_card=True, undated=undated)
    assert pruned == full and len(full) == 3
    # The rollups decided most hours: fewer than half the moments were read raw.
    assert read < len(DEPLOYS) * DAYS * 24 * 12 / 2


@pytest.mark.slow
@pytest.mark.parametrize("undated", [False, True], ids=["dated", "undated"])
@pytest.mark.parametrize("scenario", test_scenarios.SCENARIOS, ids=lambda s: s.name)
def test_the_pruned_replay_equals_the_full_one_on_every_scenario(
    tmp_path: Path, scenario: test_scenarios.Scenario, undated: bool
) -> None:
    path = tmp_path / "catalogue.yaml"
    path.write_text(test_scenarios.CATALOGUE)
    catalogue = load_catalogue(str(path))
    week = moments("h1", scenario.cards, days=scenario.days, skip=scenario.skip)
    ledger = write_week(tmp_path / "ledger.sqlite", week)
    full, pruned, _ = both(ledger, catalogue, [scenario.seat], undated=undated, **scenario.rules)
    assert pruned == full
