"""`ledger --window D`: per card its room now, its least room over the window and when, the UTC
hours it had less room than now (and who held more then), and days to full by the trend.

Each card is replayed (placement.fit.week, the rollups first) for a seat nothing names whose need
is the card's room now: a moment is then "short" when the card had less room than now, so its
hours and its worst moment's squeezers say who takes the room, and when.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from placement.cli.check_window import options_of
from placement.cli.render import Align, b, table
from placement.cli.window_text import hours_text, squeezer_text, window_line

if TYPE_CHECKING:
    from inventory.snapshot import Snapshot
    from placement.fit.week import CardWindow, SeatWindow
    from placement.fit.week.hourly import HourlyCard, HourlyWindow
    from placement.fit.week.model import WindowWarning
    from placement.fit.week.windowed import WindowOptions
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
            "warnings": [w.to_json() for w in self.unknowns()],
        }

    def unknowns(self) -> list[WindowWarning]:
        """What the history could not know of the host (`history_source.with_unknowns`)."""
        return [w for w in self.window.warnings if w.kind == "command_lines"]


def host_rooms(
    args: argparse.Namespace, catalogue: Catalogue, snapshots: Sequence[Snapshot]
) -> list[HostRooms | HourlyWindow]:
    """Each host's cards over the window that ends at its snapshot, read from the ledger's
    rollups first (raw moments only for the hours they cannot decide)."""
    from placement.cli.window_history import window_history

    with window_history(args) as history:
        return rooms_of(catalogue, history, snapshots, options_of(args))


def unknown_texts(rooms: Sequence[HostRooms | HourlyWindow]) -> list[str]:
    """What each replayed host's history could not know, in `check`'s words."""
    from placement.cli.window_text import warning_texts

    out: list[str] = []
    for host in rooms:
        if isinstance(host, HostRooms) and host.unknowns():
            out.extend(warning_texts(replace(host.window, warnings=tuple(host.unknowns()))))
    return out


def rooms_of(
    catalogue: Catalogue,
    history: object,
    snapshots: Sequence[Snapshot],
    options: WindowOptions,
) -> list[HostRooms | HourlyWindow]:
    """`host_rooms` over any history: each host replayed (`prune.open_windows_history`: a history
    without rollups is replayed moment by moment), but hosts whose raw moments start after the
    window's start, judged on their hourly rollups, all of them in one read."""
    from inventory.attribution import attribute
    from placement.cli.history_source import with_unknowns
    from placement.fit.week import WindowRules
    from placement.fit.week.hourly import hourly_window
    from placement.fit.week.prune import open_windows_history, rooms_now

    thinned = _raw_kept(history, snapshots, options)
    hourly = {
        s.host: s
        for s in snapshots
        if s.host in thinned and thinned[s.host] > s.taken_at - options.length
    }
    # Prometheus keeps the rollups in its recording rules' series (`gpuplan rules`).
    judged_on = getattr(history, "recorded_rollups", "hourly rollups")
    found: dict[str, HostRooms | HourlyWindow] = {}
    if hourly:
        # Whole hours from the window's start on; hours before it held moments outside it.
        windows = {
            host: (_hour_up(s.taken_at - options.length), s.taken_at + timedelta(seconds=1))
            for host, s in hourly.items()
        }
        rows: dict[str, list[Any]] = {}
        for row in history.daily_rooms(windows):  # type: ignore[attr-defined]
            rows.setdefault(row.host, []).append(row)
        for host, snapshot in hourly.items():
            found[host] = hourly_window(
                catalogue,
                attribute(snapshot, catalogue),
                rows.get(host, []),
                snapshot.taken_at - options.length,
                thinned[host],
                judged_on,
            )
    for snapshot in snapshots:
        if snapshot.host in hourly:
            continue
        rules = WindowRules(
            start=snapshot.taken_at - options.length,
            end=snapshot.taken_at,
            percentile=options.percentile,
            min_history_s=int(options.min_history.total_seconds()),
            min_coverage=options.min_coverage,
            rebase=options.rebase,
        )
        attributed = attribute(snapshot, catalogue)
        # A moment is short when the card had less room than now: the need is the room now.
        needs = {card: max(0, room) for card, room in rooms_now(catalogue, attributed).items()}
        windows_of = open_windows_history(catalogue, attributed, history, rules, needs=needs)
        cards = tuple(c for w in windows_of for c in w.cards)
        if windows_of:
            window = with_unknowns(history, windows_of[0])
            found[snapshot.host] = HostRooms(snapshot.host, window, cards)
    return [found[s.host] for s in snapshots if s.host in found]


def _raw_kept(
    history: object, snapshots: Sequence[Snapshot], options: WindowOptions
) -> Mapping[str, datetime]:
    """host → from when its raw moments are kept, for hosts whose rollups outlive them: the
    ledger's compacted hosts, or Prometheus's hosts whose raw samples start after the window's
    start where its recording rules kept the rollups (asked over the widest window)."""
    within = getattr(history, "raw_kept_in", None)
    if within is not None:
        if not snapshots:
            return {}
        start = min(s.taken_at for s in snapshots) - options.length
        return within(start, max(s.taken_at for s in snapshots))  # type: ignore[no-any-return]
    kept_since = getattr(history, "raw_kept", None)
    return kept_since() if kept_since is not None else {}  # type: ignore[no-any-return]


def _hour_up(moment: datetime) -> datetime:
    """The first whole hour's start at or after `moment`."""
    seconds = int(moment.timestamp())
    return datetime.fromtimestamp(-(-seconds // 3600) * 3600, UTC)


def with_windows(
    data: Mapping[str, Any], rooms: Sequence[HostRooms | HourlyWindow]
) -> dict[str, Any]:
    """`ledger --json` with a `window` block in each host that was replayed."""
    by_host = {r.host: r.to_json() for r in rooms}
    hosts = [
        {**host, "window": by_host[host["host"]]} if host["host"] in by_host else host
        for host in data["hosts"]
    ]
    return {**data, "hosts": hosts}


def _days(card: CardWindow | HourlyCard) -> str:
    cast = card.forecast
    if cast.days_to_full is None:
        return "-" if cast.buckets >= 3 else f"- ({cast.buckets} days seen)"
    return f"{cast.days_to_full:.1f} ({cast.confidence})"


def render_rooms(rooms: Sequence[HostRooms | HourlyWindow]) -> str:
    """Per host: the window's line, then per card room now, window room and when, the hours
    with less room than now, and days to full; then who held more at each card's least. A host
    judged on its hourly rollups: room now, window room and when, and days to full."""
    from placement.fit.week.hourly import HourlyWindow

    blocks: list[str] = []
    for host in rooms:
        if isinstance(host, HourlyWindow):
            blocks.append(_hourly_block(host))
            continue
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


def _hourly_block(host: HourlyWindow) -> str:
    """`fleet-0001 · window … (7d) · judged on hourly rollups (raw moments from …)` and its
    cards."""
    rows: list[list[object]] = [
        [
            card.card,
            b(card.room_now_bytes),
            b(card.window_room_bytes) if card.window_room_bytes is not None else "-",
            _at(card),
            _days(card),
        ]
        for card in host.cards
    ]
    headers = ["card", "room now", "window room", "least at", "days to full"]
    text = table(rows, headers, ["left", "right", "right", "left", "left"])
    line = (
        f"{host.host} · window {_minute(host.start)} → {_minute(host.end)} · judged on "
        f"{host.judged_on} (raw moments from {_minute(host.raw_since)}; seats as observed)"
    )
    return f"{line}\n{text}"


def _minute(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%MZ")


def _at(card: CardWindow | HourlyCard) -> str:
    if card.min_room_at is None:
        return "-"
    if getattr(card, "min_room_dated", True):
        return card.min_room_at.strftime("%Y-%m-%dT%H:%MZ")
    # Recorded rollups keep the hour of the least (the rule's, to the second), not its moment.
    return f"the hour to {card.min_room_at.strftime('%Y-%m-%dT%H:%M:%SZ')}"
