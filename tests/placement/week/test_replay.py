"""The replay core over synthetic ledgers written by the ledger's own writer: exact counts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from inventory.attribution import attribute
from inventory.history.ledger import LedgerHistory
from inventory.ledger.store import open_ledger
from placement.fit.week import NewSeat, SeatWindow, WindowRules, replay
from seats.loader import load_catalogue
from seats.model import Catalogue
from tests.placement.week.builders import (
    CUDA_TOTAL,
    GIB,
    Proc,
    between,
    moments,
    write_week,
)

CATALOGUE = """
hosts:
  h1: {cards: 2, card_total: 97871 MiB, cuda_context: 1183 MiB}
seats:
  - {name: stt, host: h1, gpus: [0], resident: 20 GiB, state: running, match: 'stt\\.py'}
  - {name: tts, host: h1, gpus: [0], resident: 60 GiB}
"""
STT = Proc(11, 20 * GIB, "python3 stt.py")
OLLAMA = Proc(12, 20 * GIB, "ollama serve")


@pytest.fixture
def catalogue(tmp_path: Path) -> Catalogue:
    path = tmp_path / "catalogue.yaml"
    path.write_text(CATALOGUE)
    return load_catalogue(str(path))


def afternoon_ollama(at: datetime) -> list[Proc]:
    return [STT, OLLAMA] if between(at, 14, 15) else [STT]


def judge(
    tmp_path: Path, catalogue: Catalogue, week: Iterator, seat: NewSeat, **rules: object
) -> SeatWindow:
    path = write_week(tmp_path / "ledger.sqlite", week)
    with open_ledger(path) as ledger:
        newest = ledger.latest("h1")
        assert newest is not None
        end = newest.taken_at
        window = WindowRules(start=end - timedelta(days=7), end=end, **rules)  # type: ignore[arg-type]
        found = LedgerHistory(ledger.connection).moments(
            "h1", window.start, end + timedelta(seconds=1)
        )
        (judged,) = replay(catalogue, attribute(newest, catalogue), found, [seat], window)
    return judged


def test_a_flat_week_passes_with_its_room_at_every_moment(
    tmp_path: Path, catalogue: Catalogue
) -> None:
    week = moments("h1", [lambda at: [STT], lambda at: []])
    judged = judge(tmp_path, catalogue, week, NewSeat("tts", (0,), 60 * GIB))
    assert judged.status == "pass"
    assert (judged.host.moments, judged.host.interval_s, judged.host.history_s) == (
        1008,
        600,
        604800,
    )
    (card,) = judged.cards
    assert card.room_now_bytes == card.window_room_bytes == CUDA_TOTAL - 20 * GIB
    assert (card.short_moments, judged.short_moments, judged.reasons) == (0, 0, ())
    assert card.forecast.slope_bytes_per_day == 0 and card.forecast.days_to_full is None


@pytest.mark.parametrize(
    ("percentile", "status", "allowed"),
    [(Decimal(100), "refuse", 0), (Decimal("91.67"), "refuse", 83), (Decimal("91.66"), "pass", 84)],
)
def test_an_afternoon_ollama_refuses_by_peak_until_a_lower_percentile(
    tmp_path: Path, catalogue: Catalogue, percentile: Decimal, status: str, allowed: int
) -> None:
    week = moments("h1", [afternoon_ollama, lambda at: []])
    judged = judge(tmp_path, catalogue, week, NewSeat("tts", (0,), 60 * GIB), percentile=percentile)
    # 14:00–15:59 at 10-minute steps: 12 moments a day, 7 days.
    assert (judged.short_moments, judged.allowed_short, judged.status) == (84, allowed, status)
    assert judged.short_by_hour[14] == judged.short_by_hour[15] == 42
    assert judged.pass_percentile == Decimal("91.66")  # ⌊10000·(1008 − 84)/1008⌋ / 100
    (card,) = judged.cards
    assert card.room_now_bytes == CUDA_TOTAL - 20 * GIB
    assert card.window_room_bytes == CUDA_TOTAL - 40 * GIB
    assert judged.worst_at == datetime.fromisoformat("2026-09-14T14:00:00+00:00")
    assert judged.worst_short_bytes == 60 * GIB - (CUDA_TOTAL - 40 * GIB)
    (ollama,) = card.squeezed_by
    assert (ollama.name, ollama.engine, ollama.behaviour) == (
        "ollama serve",
        "ollama",
        "self-fitting",
    )
    assert (ollama.then_bytes, ollama.now_bytes, ollama.days, ollama.of_days) == (20 * GIB, 0, 7, 7)
    assert [h for h, days in enumerate(ollama.by_hour) if days] == [14, 15]
    if status == "refuse":
        (peak,) = judged.reasons
        assert (
            peak.rule,
            peak.card,
            dict(peak.facts)["short_moments"],
            dict(peak.facts)["allowed_short"],
        ) == (
            "peak",
            0,
            84,
            allowed,
        )
        assert peak.short_bytes == judged.worst_short_bytes
        assert dict(peak.facts)["at"] == "2026-09-14T14:00:00Z"
