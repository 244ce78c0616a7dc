"""Where else a refused seat would start: other cards and hosts of the same snapshots, best three.

Every candidate is judged by fit's verifier (`judge`, mode `check`) exactly as the named cards
were; the ranking is fewest bytes the seat takes, then most room left on its tightest card.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from inventory.attribution import attribute
from inventory.snapshot import Snapshot
from placement.check.elsewhere import Elsewhere
from placement.check.seat import CheckResult
from placement.fit.card import CardKey, CardModel
from placement.fit.verdict import Verdict
from placement.fit.verify import Placement, host_catalogues, judge
from seats.model import Catalogue, Seat

LIMIT = 3


def _passing(verdict: Verdict) -> Elsewhere | None:
    if verdict.verdict != "pass" or not verdict.figures or verdict.host is None:
        return None
    return Elsewhere(
        host=verdict.host,
        cards=verdict.cards,
        need_bytes=max(f.need_bytes for f in verdict.figures),
        room_after_bytes=min(f.room_bytes - f.need_bytes for f in verdict.figures),
        util=verdict.util,
    )


def _on_host(
    catalogue: Catalogue,
    snapshot: Snapshot,
    seat: Seat,
    skip: tuple[int, ...] | None,
    others: Sequence[Placement],
    models: Mapping[CardKey, CardModel] | None,
) -> list[Elsewhere]:
    """Each card of the host alone, then (for a multi-card seat) its roomiest cards together."""
    host = snapshot.host
    here = [p for p in others if p.host == host]
    single = seat.model_copy(update={"host": host, "gpus": 1})
    alone: list[Elsewhere] = []
    for card in snapshot.cards:
        found = _passing(
            judge(
                catalogue,
                snapshot,
                single,
                (card.index,),
                others=here,
                mode="check",
                models=models,
            )
        )
        if found is not None:
            alone.append(found)
    count = seat.card_count
    if count == 1:
        return [e for e in alone if skip is None or e.cards != skip]
    if len(alone) < count:
        return []
    alone.sort(key=lambda e: -e.room_after_bytes)
    cards = tuple(sorted(c for e in alone[:count] for c in e.cards))
    if skip is not None and set(cards) == set(skip):
        return []
    whole = seat.model_copy(update={"host": host, "gpus": cards})
    found = _passing(
        judge(catalogue, snapshot, whole, cards, others=here, mode="check", models=models)
    )
    return [found] if found is not None else []


def nearest_cards(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    seat: Seat,
    refused: Verdict,
    *,
    others: Sequence[Placement] = (),
    limit: int = LIMIT,
    models: Mapping[CardKey, CardModel] | None = None,
) -> tuple[Elsewhere, ...]:
    """Up to `limit` other card sets, on the catalogue's hosts, where `seat` would pass.

    `refused` is the verdict on the named cards (left out of the answer); `others` are the new
    seats of the same deploy, counted where they land; `models`: cards' models the caller
    simulates on (see `judge`). Nothing when the refusal was not on room
    or gate figures (a card in error decides nothing).
    """
    if refused.verdict != "refuse":
        return ()
    views = host_catalogues(catalogue)
    found: list[Elsewhere] = []
    for snapshot in snapshots:
        if snapshot.host not in catalogue.hosts:
            continue
        view = views.get(snapshot.host, catalogue)
        skip = refused.cards if snapshot.host == refused.host else None
        found += _on_host(view, attribute(snapshot, catalogue), seat, skip, others, models)
    found.sort(key=lambda e: (e.need_bytes * len(e.cards), -e.room_after_bytes, e.host, e.cards))
    return tuple(found[:limit])


def with_nearest(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    result: CheckResult,
    others: Sequence[Placement] = (),
    models: Mapping[CardKey, CardModel] | None = None,
) -> CheckResult:
    """`result` with the nearest other cards that would take its seat, where it was refused."""
    found = nearest_cards(
        catalogue, snapshots, result.seat, result.verdict, others=others, models=models
    )
    if not result.resident_known:
        found = tuple(replace(e, need_floor=True) for e in found)
    return replace(result, elsewhere=found) if found else result
