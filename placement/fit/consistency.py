"""Does a snapshot belong with the catalogue it is judged against? Contradictions are bad input.

Called by every command that puts a catalogue beside a snapshot (`ledger`, `plan`, `check`,
`report`): what cannot both be true exits 2, what only weakens the arithmetic is a warning.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from inventory.snapshot import Snapshot
from placement.fit.card import cuda_total, reserve_bytes
from placement.fit.engines import requests_util
from placement.fit.engines.note import Note, note
from placement.fit.verify import host_catalogues
from seats.errors import BadInputError
from seats.model import Catalogue, Reserve, Seat
from seats.units import format_bytes


def check_snapshot(
    catalogue: Catalogue, snapshot: Snapshot, source: str, seats: Sequence[Seat] = ()
) -> list[Note]:
    """Warnings about `snapshot` (read from `source`) against `catalogue`; BadInputError on a contradiction.

    `seats`: seats the run judges beside the catalogue's (added ones), for the cuda_context warning.

    Bad input: the catalogue's host has another card count; a card whose NVML total differs
    from `card_total`; a card the catalogue pins a seat or reserve to that the snapshot lacks;
    reserves on one card that add up past its CUDA total. Warnings: a host the catalogue does
    not describe, cards in error, NVML v1 readings (cuda_total taken as NVML total), and vLLM
    seats on a host without `cuda_context`.
    """
    warnings: list[Note] = []
    name = snapshot.host
    host = catalogue.hosts.get(name)
    if host is None:
        warnings.append(note("unknown_host", source=source, host=name))
    else:
        if len(snapshot.cards) != host.cards:
            raise BadInputError(
                f"{source}: host {name} has {len(snapshot.cards)} cards in the snapshot, "
                f"{host.cards} in the catalogue (hosts.{name}.cards)"
            )
        _pinned_cards_exist(catalogue, snapshot, source)
        if host.card_total_bytes is not None:
            for i, card in enumerate(snapshot.cards):
                if card.total_bytes is not None and card.total_bytes != host.card_total_bytes:
                    difference = card.total_bytes - host.card_total_bytes
                    raise BadInputError(
                        f"{source}: cards[{i}].total_bytes: card {name}:{card.index} has NVML total "
                        f"{card.total_bytes} B ({format_bytes(card.total_bytes)}), but "
                        f"hosts.{name}.card_total is {host.card_total_bytes} B "
                        f"({format_bytes(host.card_total_bytes)}): {abs(difference)} B "
                        f"{'more' if difference > 0 else 'less'}; is this snapshot from another machine?"
                    )
    _reserves_fit(catalogue, snapshot, source)

    broken = [card for card in snapshot.cards if not card.ok]
    for card in broken:
        warnings.append(
            note("unread_card", source=source, host=name, card=card.index, error=card.error or "")
        )
    v1 = [card.index for card in snapshot.cards if card.ok and card.reserved_bytes is None]
    if v1:
        warnings.append(note("nvml_v1", source=source, cards=tuple(v1)))
    context = host.cuda_context_bytes if host is not None else 0
    if context == 0:
        vllm = [
            seat.name
            for seat in (*catalogue.seats, *seats)
            if requests_util(seat.engine) and seat.state != "retired" and seat.host in (name, None)
        ]
        if vllm:
            # vLLM's own CUDA context is then taken as nothing before its gate reads free.
            warnings.append(note("no_cuda_context", host=name, seats=tuple(dict.fromkeys(vllm))))
    return warnings


def _pinned_cards_exist(catalogue: Catalogue, snapshot: Snapshot, source: str) -> None:
    # The card count agrees, so this only fails on a snapshot whose indices skip a number.
    indices = {card.index for card in snapshot.cards}
    for i, seat in catalogue.on_host(snapshot.host):
        if seat.state == "retired":
            continue
        for card in seat.pinned_cards or ():
            if card not in indices:
                raise BadInputError(
                    f"{source}: seats[{i}] {seat.name!r} is pinned to card {snapshot.host}:{card}, "
                    f"which the snapshot does not have (cards {sorted(indices)})"
                )
    for i, reserve in enumerate(catalogue.reserves):
        if reserve.host == snapshot.host and reserve.gpu not in indices:
            raise BadInputError(
                f"{source}: reserves[{i}] {reserve.name!r} holds card {snapshot.host}:{reserve.gpu}, "
                f"which the snapshot does not have (cards {sorted(indices)})"
            )


def _reserves_fit(catalogue: Catalogue, snapshot: Snapshot, source: str) -> None:
    """Reserves on one card add up to at most that card's CUDA total (DESIGN.md's loader rules)."""
    per_card: dict[int, list[Reserve]] = defaultdict(list)
    for reserve in catalogue.reserves:
        if reserve.host == snapshot.host:
            per_card[reserve.gpu].append(reserve)
    by_index = {card.index: card for card in snapshot.cards}
    for gpu, reserves in sorted(per_card.items()):
        card = by_index.get(gpu)
        if card is None or not card.ok:
            continue
        total = cuda_total(card)
        # `bytes: card` is the CUDA total by definition; only amounts can overshoot it.
        held = sum(reserve_bytes(r, card) for r in reserves)
        if held > total:
            names = ", ".join(r.name for r in reserves)
            raise BadInputError(
                f"{source}: card {snapshot.host}:{gpu}: reserves ({names}) add up to {held} B "
                f"({format_bytes(held)}), more than the card's CUDA total {total} B "
                f"({format_bytes(total)}): {held - total} B ({format_bytes(held - total)}) too many"
            )


def check_snapshots(
    catalogue: Catalogue,
    snapshots: Sequence[Snapshot],
    sources: Sequence[str],
    seats: Sequence[Seat] = (),
) -> list[Note]:
    """`check_snapshot` for each snapshot beside its source: contradictions are bad input, the rest warns.

    `seats`: seats judged beside the catalogue's (added ones); each warning comes once per host.
    """
    warnings: list[Note] = []
    # Each host is checked against its own part of the catalogue (a fleet's cost stays linear).
    views = host_catalogues(catalogue, hostless=True)
    for snapshot, source in zip(snapshots, sources, strict=True):
        view = views.get(snapshot.host, catalogue)
        try:
            warnings.extend(check_snapshot(view, snapshot, source, seats))
        except BadInputError:
            if view is catalogue:
                raise
            # The same check fails on the whole catalogue; its message numbers the seats as
            # the file does (seats[i]), so let that one speak.
            check_snapshot(catalogue, snapshot, source, seats)
            raise
    return warnings
