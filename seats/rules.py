"""Cross-field rules of a catalogue (DESIGN.md, "Rules a loader enforces").

Each failure names the file, the path of the field and a sentence. Rules that need a
snapshot (a reserve against a card's CUDA total when `card_total` is not given) are
checked where the snapshot is met, in `placement`.
"""

from __future__ import annotations

from collections import defaultdict

from seats.errors import CatalogueError
from seats.model import Catalogue, Reserve, Seat
from seats.units import format_bytes


def check_rules(catalogue: Catalogue, path: str) -> None:
    """Raise `CatalogueError` at the first broken rule."""
    _names_unique(catalogue, path)
    _seats_on_hosts(catalogue, path)
    _reserves(catalogue, path)
    _profiles(catalogue, path)


def _names_unique(catalogue: Catalogue, path: str) -> None:
    seen: dict[str, str] = {}
    names = {
        "seats": [seat.name for seat in catalogue.seats],
        "reserves": [reserve.name for reserve in catalogue.reserves],
    }
    for key, listed in names.items():
        for i, name in enumerate(listed):
            if name in seen:
                raise CatalogueError(
                    path, f"{key}[{i}].name", f"name {name!r} is already used by {seen[name]}"
                )
            seen[name] = f"{key}[{i}]"


def _seats_on_hosts(catalogue: Catalogue, path: str) -> None:
    for i, seat in enumerate(catalogue.seats):
        at = f"seats[{i}]"
        _seat_names_its_host(catalogue, seat, path, at)
        if seat.host is None:
            if not any(seat.card_count <= host.cards for host in catalogue.hosts.values()):
                raise CatalogueError(
                    path,
                    f"{at}.gpus",
                    f"seat {seat.name!r} needs {seat.card_count} cards; no host has that many",
                )
        else:
            _seat_cards_on_host(seat, catalogue.hosts[seat.host].cards, path, at)


def _seat_names_its_host(catalogue: Catalogue, seat: Seat, path: str, at: str) -> None:
    """A named host exists; a running seat and a seat that pins cards name one."""
    if seat.host is not None and seat.host not in catalogue.hosts:
        raise CatalogueError(
            path,
            f"{at}.host",
            f"host {seat.host!r} is not among hosts ({', '.join(catalogue.hosts)})",
        )
    pinned = seat.pinned_cards
    if seat.state == "running":
        if pinned is None:
            raise CatalogueError(
                path,
                f"{at}.gpus",
                f"running seat {seat.name!r} needs a card list, e.g. gpus: [0]",
            )
        if seat.host is None:
            raise CatalogueError(path, f"{at}.host", f"running seat {seat.name!r} needs its host")
    if pinned is not None and seat.host is None:
        raise CatalogueError(
            path,
            f"{at}.host",
            f"seat {seat.name!r} pins cards {list(pinned)} but names no host",
        )


def _seat_cards_on_host(seat: Seat, cards: int, path: str, at: str) -> None:
    """The cards a seat pins exist on its host, or the host has as many cards as it needs."""
    pinned = seat.pinned_cards
    if pinned is not None:
        for j, card in enumerate(pinned):
            if card >= cards:
                raise CatalogueError(
                    path,
                    f"{at}.gpus[{j}]",
                    f"host {seat.host!r} has cards 0–{cards - 1}; there is no card {card}",
                )
    elif seat.card_count > cards:
        raise CatalogueError(
            path,
            f"{at}.gpus",
            f"seat {seat.name!r} needs {seat.card_count} cards; host {seat.host!r} has {cards}",
        )


def _reserves(catalogue: Catalogue, path: str) -> None:
    seat_hosts = {seat.name: seat.host for seat in catalogue.seats}
    per_card: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, reserve in enumerate(catalogue.reserves):
        _reserve_refers(catalogue, reserve, seat_hosts, path, f"reserves[{i}]")
        per_card[(reserve.host, reserve.gpu)].append(i)
    for (host_name, gpu), indices in per_card.items():
        _reserves_share_card(catalogue, host_name, gpu, indices, path)


def _reserve_refers(
    catalogue: Catalogue,
    reserve: Reserve,
    seat_hosts: dict[str, str | None],
    path: str,
    at: str,
) -> None:
    """A reserve names an existing host and card, and seats of this catalogue on that host."""
    host = catalogue.hosts.get(reserve.host)
    if host is None:
        raise CatalogueError(
            path,
            f"{at}.host",
            f"host {reserve.host!r} is not among hosts ({', '.join(catalogue.hosts)})",
        )
    if reserve.gpu >= host.cards:
        raise CatalogueError(
            path,
            f"{at}.gpu",
            f"host {reserve.host!r} has cards 0–{host.cards - 1}; there is no card {reserve.gpu}",
        )
    for j, name in enumerate(reserve.for_):
        if name not in seat_hosts:
            raise CatalogueError(
                path, f"{at}.for[{j}]", f"{name!r} names no seat of this catalogue"
            )
        if seat_hosts[name] not in (None, reserve.host):
            # Such a reserve could never be used: it would hold its card for nobody.
            raise CatalogueError(
                path,
                f"{at}.for[{j}]",
                f"seat {name!r} is on host {seat_hosts[name]!r}; this reserve is on {reserve.host!r}",
            )


def _reserves_share_card(
    catalogue: Catalogue, host_name: str, gpu: int, indices: list[int], path: str
) -> None:
    """The reserves on one card: a whole-card reserve alone, the rest within a known total."""
    host = catalogue.hosts[host_name]
    wholes = [i for i in indices if catalogue.reserves[i].amount_bytes == "card"]
    if wholes and len(indices) > 1:
        raise CatalogueError(
            path,
            f"reserves[{indices[-1]}]",
            f"card {host_name}:{gpu} is held whole by {catalogue.reserves[wholes[0]].name!r}; "
            "no other reserve fits beside it",
        )
    if host.card_total_bytes is None or wholes:
        return
    total = sum(int(catalogue.reserves[i].amount_bytes) for i in indices)
    if total > host.card_total_bytes:
        raise CatalogueError(
            path,
            f"reserves[{indices[-1]}].bytes",
            f"reserves on {host_name}:{gpu} add up to {format_bytes(total)} ({total} B), "
            f"more than the card's {format_bytes(host.card_total_bytes)} ({host.card_total_bytes} B)",
        )


def _profiles(catalogue: Catalogue, path: str) -> None:
    """A profile's weights, non-KV and CUDA graph bytes fit the card they are for (when its total is known)."""
    for i, seat in enumerate(catalogue.seats):
        profile = seat.engine.profile
        if profile is None:
            continue
        totals = [
            host.card_total_bytes
            for name, host in catalogue.hosts.items()
            if seat.host in (None, name)
        ]
        if not totals or any(total is None for total in totals):
            continue  # judged against the snapshot's card instead (rule kv_capacity)
        card = max(total for total in totals if total is not None)
        at = f"seats[{i}].engine.profile"
        fields = (
            ("weights", profile.weights_bytes),
            ("non_kv", profile.non_kv_bytes),
            ("cuda_graphs", profile.cuda_graphs_bytes),
        )
        for field, amount in fields:
            if amount > card:
                raise CatalogueError(
                    path,
                    f"{at}.{field}",
                    f"{field} {format_bytes(amount)} ({amount} B) is more than the card's "
                    f"{format_bytes(card)} ({card} B)",
                )
        both = profile.weights_bytes + profile.non_kv_bytes
        if both > card:
            raise CatalogueError(
                path,
                f"{at}.non_kv",
                f"weights + non_kv = {format_bytes(both)} ({both} B) is more than the card's "
                f"{format_bytes(card)} ({card} B): no KV cache would be left",
            )
