"""Seats that depend on a host nothing can be decided on: verdict `unknown`, never `refuse`.

DESIGN.md "Fleets": a seat pinned to an unusable catalogue host, or whose every eligible host is
unusable, cannot be judged; `plan` (and `check`) say so with exit 3 instead of refusing it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from placement.fit.verdict import Verdict, host_reason
from seats.model import Catalogue, Seat


def eligible_hosts(catalogue: Catalogue, seat: Seat) -> list[str]:
    """The catalogue hosts `seat` may go to: the one it names, else every host with enough cards."""
    if seat.host is not None:
        return [seat.host] if seat.host in catalogue.hosts else []
    return [name for name, host in catalogue.hosts.items() if host.cards >= seat.card_count]


def unknown_verdict(
    catalogue: Catalogue, seat: Seat, unusable: Mapping[str, str]
) -> Verdict | None:
    """`unknown` when every host `seat` may use is unusable (`unusable`: host → why), else None."""
    hosts = eligible_hosts(catalogue, seat)
    if not hosts or any(host not in unusable for host in hosts):
        return None
    why = tuple((host, unusable[host]) for host in ([seat.host] if seat.host else hosts))
    reason = host_reason(
        host=seat.host, said="unusable", seat=seat.name, seat_host=seat.host, unusable=why
    )
    return Verdict(
        verdict="unknown",
        seat=seat.name,
        host=seat.host,
        cards=seat.pinned_cards or (),
        reasons=(reason,),
        need_bytes=seat.resident_bytes,
        engine=seat.engine,
    )


def with_unknowns(
    catalogue: Catalogue,
    seats: Sequence[Seat],
    verdicts: Sequence[Verdict],
    unusable: Mapping[str, str],
) -> list[Verdict]:
    """`verdicts` (one per seat, in order) with each seat that depends on unusable hosts unknown.

    Such a seat has no card to be placed on (its hosts have no snapshot), so only refusals change.
    """
    if not unusable:
        return list(verdicts)
    out = []
    for seat, verdict in zip(seats, verdicts, strict=True):
        unknown = None if verdict.passed else unknown_verdict(catalogue, seat, unusable)
        out.append(unknown or verdict)
    return out
