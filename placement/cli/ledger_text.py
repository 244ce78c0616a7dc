"""The `ledger` command's text: per host the card, held and seat tables and foreign processes.

The same content as `ledger --json` (`placement.report.ledger_view.ledger_json`), for people.
"""

from __future__ import annotations

from collections.abc import Sequence

from inventory.snapshot import format_utc
from placement.cli.notes_text import parts_text
from placement.cli.reasons_text import hold_note
from placement.cli.render import Align, b, table
from placement.fit.card import HeldPart
from placement.fit.engines.registry import engine
from placement.fit.state import hold_facts
from placement.report.ledger_view import HostView, LedgerCardRow, LedgerView
from seats.names import escaped
from seats.units import format_mib

_CARD_HEADERS = (
    "card",
    "total",
    "reserve",
    "declared",
    "held",
    "used",
    "attributed",
    "unexplained",
    "free",
    "plannable",
)


def render_ledger(view: LedgerView) -> str:
    """The ledger view as text tables, one block per host; warnings are the caller's to print."""
    return "\n".join(_render_host(host) for host in view.hosts)


def _render_host(host: HostView) -> str:
    context = b(host.cuda_context_bytes) if host.cuda_context_bytes else "0 (not declared)"
    lines = [
        f"{escaped(host.host)} · snapshot {format_utc(host.taken_at)} ({host.source})"
        + (f" · driver {escaped(host.driver)}" if host.driver else ""),
        f"margin {b(host.margin_bytes)} per card · cuda_context {context}",
        "",
        _card_table(host.cards),
        "",
        _held_table(host.cards),
        "",
        _seat_table(host),
        "",
        *_foreign_lines(host),
    ]
    if any(card.nvml_v1 for card in host.cards):
        lines.append(
            "v1: NVML v1 only: the driver reserve is unknown and counted in used (and so in "
            "unexplained); cuda_total taken as NVML total"
        )
    return "\n".join(lines) + "\n"


def _foreign_lines(host: HostView) -> list[str]:
    if not host.foreign:
        return ["foreign processes: none (every process is matched to a seat)"]
    rows = [
        [p.card, p.pid, b(p.used_bytes), _title(p.engine), _short(p.cmdline, p.parent)]
        for p in host.foreign
    ]
    return [
        "foreign processes (no seat's match; their bytes are unexplained):",
        table(
            rows,
            ["card", "pid", "used", "engine", "cmdline"],
            ["left", "right", "right", "left", "left"],
        ),
    ]


def _title(kind: str | None) -> str:
    """The engine as users write it ("SGLang"), or "-" where none was recognised."""
    return engine(kind).title if kind is not None else "-"


def _card_table(cards: Sequence[LedgerCardRow]) -> str:
    rows: list[list[object]] = []
    for card in cards:
        if card.error is not None:
            rows.append(
                [card.index, f"error: {escaped(card.error)}", "-", b(card.declared_bytes)]
                + ["-"] * 5
                + [b(card.plannable_bytes)]
            )
            continue
        rows.append(
            [
                card.index,
                b(card.total_bytes),
                "v1" if card.nvml_v1 else b(card.reserved_bytes),
                b(card.declared_bytes),
                b(card.held_bytes),
                b(card.used_bytes),
                b(card.attributed_bytes),
                b(card.unexplained_bytes),
                b(card.free_bytes),
                b(card.plannable_bytes),
            ]
        )
    right: list[Align] = ["right"] * (len(_CARD_HEADERS) - 1)
    align: list[Align] = ["left", *right]
    return table(rows, _CARD_HEADERS, align)


def _held_part(part: HeldPart) -> str:
    """`flash-next-hold (reserve, 94.97 GiB)`, or a hold: `tts-a (hold: 3.00 GiB approved …)`."""
    if part.kind == "hold":
        return f"{part.name} (hold: {hold_note(hold_facts(part))})"
    return (
        f"{part.name} ({'reserve' if part.kind == 'reserve' else 'absent seat'}, {b(part.bytes)})"
    )


def _held_table(cards: Sequence[LedgerCardRow]) -> str:
    rows = []
    for card in cards:
        held = ", ".join(_held_part(part) for part in card.held_by)
        rows.append([card.index, held or "-", ", ".join(card.seats) or "-"])
    return table(rows, ["card", "held by", "declared seats"], ["left", "left", "left"])


def _seat_table(host: HostView) -> str:
    # Per-seat bytes in MiB, as nvidia-smi lists processes: the figures operators compare.
    if not host.seats:
        return f"seats: the catalogue places none on {host.host}"
    rows = []
    for seat in host.seats:
        cards = ",".join(str(c) for c in seat.cards) if seat.cards else "-"
        if seat.status == "elsewhere":
            cards += " (seen on " + ",".join(str(c) for c in seat.observed_cards) + ")"
        difference = seat.difference_bytes
        rows.append(
            [
                seat.seat,
                _title(seat.engine),
                cards,
                seat.state,
                format_mib(seat.declared_bytes),
                format_mib(seat.observed_bytes),
                "-"
                if difference is None
                else ("+" if difference > 0 else "") + format_mib(difference),
                seat.status,
            ]
        )
    headers = [
        "seat",
        "engine",
        "cards",
        "state",
        "declared",
        "observed",
        "observed − declared",
        "status",
    ]
    align: list[Align] = ["left", "left", "left", "left", "right", "right", "right", "left"]
    text = table(rows, headers, align)
    return "\n".join([text, *_profile_lines(host)])


def _profile_lines(host: HostView) -> list[str]:
    """Each profiled seat's breakdown per card, beside what the catalogue declares and NVML saw."""
    lines = []
    for seat in host.seats:
        if seat.profile is None:
            continue
        cards = len(seat.cards) or 1
        observed = (
            f", observed {format_mib(seat.observed_bytes // cards)}"
            if seat.observed_bytes is not None and seat.status == "present"
            else ""
        )
        lines.append(
            f"profile {seat.seat}: {parts_text(seat.profile.parts())} = "
            f"{format_mib(seat.profile.total_bytes)} per card (declared "
            f"{format_mib(seat.declared_bytes // cards)}{observed})"
        )
    return lines


def _short(text: str | None, parent: str | None = None, width: int = 72) -> str:
    """A command line in one cell: its control characters escaped (a newline in it would start
    a row of its own, an escape sequence could erase one), then cut to `width`."""
    if parent is not None:
        # A bare process title (`VLLM::EngineCore`) says nothing alone: its server's line does.
        own = text if text is not None else "(gone)"
        return f"{own} (parent: {_short(parent, width=width)})"
    if text is None:
        return "(process gone before its cmdline was read)"
    text = escaped(text)
    return text if len(text) <= width else text[: width - 1] + "…"
