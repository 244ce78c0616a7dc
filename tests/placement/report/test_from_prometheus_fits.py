"""The headline's largest fits searched beside the Prometheus queries: the same answers as
`largest_fit` asking the verifier at every step, from far fewer questions."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from inventory.history.prometheus import PromClient, PrometheusHistory
from inventory.snapshot import Card, Snapshot
from placement.report.figures import largest_fit
from placement.report.from_prometheus import _Early
from seats.loader import parse_catalogue
from seats.model import Catalogue
from seats.units import GiB, MiB

T0 = datetime(2026, 9, 14, 8, 0, tzinfo=UTC)
FREE = 80 * GiB + 7 * MiB
TOP = FREE // MiB
HISTORY = PrometheusHistory(PromClient("http://prometheus:9090"), step_s=60)


def snapshot() -> Snapshot:
    card = Card(
        index=0,
        uuid="GPU-0",
        total_bytes=96 * GiB,
        reserved_bytes=0,
        used_bytes=96 * GiB - FREE,
        free_bytes=FREE,
        processes=(),
    )
    return Snapshot(host="h1", taken_at=T0, cards=(card,))


class Verifier:
    """A monotone stub: fits up to `limit` MiB; the binding rule and util vary with the size,
    so an answer read from the wrong probe shows."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.asked = 0

    def __call__(
        self, _c: Catalogue, _s: Snapshot, _card: int, resident: int, vllm: bool
    ) -> tuple[bool, str, str | None]:
        self.asked += 1
        util = f"{resident / FREE:.3f}" if vllm else None
        if resident <= self.limit * MiB:
            return True, "", util
        return False, "room" if resident < 2 * self.limit * MiB else "gate", util


def catalogue() -> Catalogue:
    return parse_catalogue({"hosts": {"h1": {"cards": 1}}}, "x")


LIMITS = [0, 1, 2, 1000, 54321, TOP - 1, TOP]
GUESSES = [1, 2, 999, 1000, 1001, 60000, TOP - 1, TOP]


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("guess", GUESSES)
@pytest.mark.parametrize("vllm", [False, True])
def test_searched_boundary_gives_largest_fits_answer(limit: int, guess: int, vllm: bool) -> None:
    shot, cat = snapshot(), catalogue()
    asked_everything = largest_fit(Verifier(limit), cat, shot, 0, vllm)
    verifier = Verifier(limit)
    with ThreadPoolExecutor(max_workers=1) as side:
        early = _Early(side, HISTORY, cat, verifier)
        early._boundary(cat, shot, 0, vllm, guess)
        searched = verifier.asked
        assert largest_fit(early.cached, cat, shot, 0, vllm) == asked_everything
    # At most one question more than the search asked where no boundary lies inside the card.
    assert verifier.asked - searched <= (1 if limit in (0, TOP) else 0)


def test_an_exact_guess_costs_two_questions() -> None:
    shot, cat = snapshot(), catalogue()
    verifier = Verifier(54321)
    with ThreadPoolExecutor(max_workers=1) as side:
        early = _Early(side, HISTORY, cat, verifier)
        assert early._boundary(cat, shot, 0, False, 54321) == 54321
    assert verifier.asked == 2
    assert largest_fit(Verifier(54321), cat, shot, 0, False)[0] == 54321 * MiB


def test_a_far_guess_still_finds_the_boundary() -> None:
    shot, cat = snapshot(), catalogue()
    verifier = Verifier(3)
    with ThreadPoolExecutor(max_workers=1) as side:
        early = _Early(side, HISTORY, cat, verifier)
        assert early._boundary(cat, shot, 0, True, TOP) == 3
    assert verifier.asked < 2 * TOP.bit_length() + 2
