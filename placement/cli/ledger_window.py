"""`ledger --window D`: per card its room now, its least room over the window and when, the UTC
hours it had less room than now (and who held more then), and days to full by the trend.

Each card is replayed (placement.fit.week) for a seat nothing names, once to learn its room now
and once with that room as the need: a moment is then "short" when the card had less room than
now, so its hours and its worst moment's squeezers say who takes the room, and when.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from placement.cli.check_window import options_of
from placement.cli.render import Align, b, table
from placement.cli.window_history import host_moments
from placement.cli.window_text import hours_text, squeezer_text, window_line

if TYPE_CHECKING:
    from inventory.snapshot import Snapshot
    from placement.fit.week import CardWindow, SeatWindow
    from seats.model import Catalogue


@dataclass(frozen=True)
class HostRooms:
    """One host over the window: its moments (`window`: the first card's, for the host's
    figures) and each card's window."""

    host: str
    window: SeatWindow
    cards: tuple[CardWindow, ...]

    def to_json(self) -> dict[str, Any]:
        data = self.window.to_json()
        return {
            **{
                key: data[key]
                for key in (
                    "start",
                    "end",
                    "seconds",
                    "percentile",
                    "moments",
                    "interval_seconds",
                    "history_seconds",
                    "coverage",
                    "gaps",
                )
            },
            "cards": [card.to_json() for card in self.cards],
        }


def host_rooms(
    args: argparse.Namespace, catalogue: Catalogue, snapshots: Sequence[Snapshot]
) -> list[HostRooms]:
    """Each host's cards over the window that ends at its snapshot."""
    from inventory.attribution import attribute
    from placement.fit.week import WindowRules, open_windows
    from placement.fit.week.series import series_of

    options = options_of(args)
    moments = host_moments(args.ledger, snapshots, options.length)
    out: list[HostRooms] = []
    for snapshot in snapshots:
        rules = WindowRules(
            start=snapshot.taken_at - options.length,
            end=snapshot.taken_at,
            percentile=options.percentile,
            min_history_s=int(options.min_history.total_seconds()),
            min_coverage=options.min_coverage,
            rebase=options.rebase,
        )
        attributed = attribute(snapshot, catalogue)
        # As columns once: both replays read them.
        found = series_of(catalogue, snapshot.host, moments.get(snapshot.host, []))
        now = open_windows(catalogue, attributed, found, rules)
        needs = {c.card: max(0, c.room_now_bytes) for w in now for c in w.cards}
        windows = open_windows(catalogue, attributed, found, rules, needs=needs)
        cards = tuple(c for w in windows for c in w.cards)
        if windows:
            out.append(HostRooms(snapshot.host, windows[0], cards))
    return out


def with_windows(data: Mapping[str, Any], rooms: Sequence[HostRooms]) -> dict[str, Any]:
    """`ledger --json` with a `window` block in each host that was replayed."""
    by_host = {r.host: r.to_json() for r in rooms}
    hosts = [
        {**host, "window": by_host[host["host"]]} if host["host"] in by_host else host
        for host in data["hosts"]
    ]
    return {**data, "hosts": hosts}


def _days(card: CardWindow) -> str:
    cast = card.forecast
    if cast.days_to_full is None:
        return "-" if cast.buckets >= 3 else f"- ({cast.buckets} days seen)"
    return f"{cast.days_to_full:.1f} ({cast.confidence})"


def render_rooms(rooms: Sequence[HostRooms]) -> str:
    """Per host: the window's line, then per card room now, window room and when, the hours
    with less room than now, and days to full; then who held more at each card's least."""
    blocks: list[str] = []
    for host in rooms:
        percentile = host.window.rules.percentile
        headers = [
            "card",
            "room now",
            "window room",
            "least at",
            "less room than now",
            "days to full",
        ]
        if percentile != 100:
            headers.insert(3, f"room at p{percentile.normalize()}")
        rows: list[list[object]] = []
        notes: list[str] = []
        for card in host.cards:
            hours = hours_text(card.short_by_hour)
            row: list[object] = [
                card.card,
                b(card.room_now_bytes),
                b(card.window_room_bytes) if card.window_room_bytes is not None else "-",
                _at(card),
                f"{hours} ({card.short_moments:,} moments)" if hours else "-",
                _days(card),
            ]
            if percentile != 100:
                shown = card.percentile_room_bytes
                row.insert(3, b(shown) if shown is not None else "-")
            rows.append(row)
            if card.squeezed_by:
                who = "; ".join(squeezer_text(s.to_json()) for s in card.squeezed_by)
                notes.append(f"  card {card.card} at its least: {who}")
        align: list[Align] = ["left", "right", "right", "left", "left", "left"]
        if percentile != 100:
            align.insert(3, "right")
        text = table(rows, headers, align)
        blocks.append("\n".join([f"{host.host} · {window_line(host.window)}", text, *notes]))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def _at(card: CardWindow) -> str:
    if card.min_room_at is None:
        return "-"
    return card.min_room_at.strftime("%Y-%m-%dT%H:%MZ")
