"""The weekly report as Markdown (readable in a terminal) or one self-contained HTML page.

Both are rendered from one list of blocks built from a `Report`, so they always say the same thing.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from placement.report.advice import signed
from placement.report.rows import LOOKBACK_DAYS, ChartSeries, HoldRow, Report
from placement.report.text import alt_text, code_span, name, short
from placement.report.week import LEVELS as LEVEL_CELLS
from placement.report.week import SHORT as SHORT_CELL
from placement.report.week import UNSEEN as UNSEEN_CELL
from placement.report.week import hour_ranges
from seats.units import format_bytes as _b

# --- blocks -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    text: str
    lead: str = ""  # printed bold before the text
    kind: str = ""  # "note", "demo", "act" change how HTML styles it


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: frozenset[int] = frozenset()  # column indexes aligned right
    flagged: tuple[bool, ...] = ()  # rows HTML highlights


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


# A drawn chart: SVG markup (inline in the HTML page, a file beside the Markdown), or None where
# it was not drawn.
Picture = str | None


@dataclass(frozen=True)
class Chart:
    alt: str
    filename: str
    picture: Picture


Block = Heading | Para | Table | Bullets | Chart


def _at(text: str | None) -> str:
    """'2026-09-12T13:26:00Z' → '2026-09-12 13:26Z': shorter in a table cell."""
    if not text:
        return "-"
    return text.replace("T", " ").replace(":00Z", "Z")


def blocks(
    report: Report,
    charts: Sequence[tuple[ChartSeries, str, Picture]],
    *,
    demo: str | None = None,
    fleet: tuple[str, Picture] | None = None,
) -> list[Block]:
    """The report as blocks; `charts` are (series, file name, SVG or None when not drawn), `fleet`
    the (file name, SVG) of the hosts' small multiples, for several hosts."""
    out: list[Block] = [Heading(1, f"Capacity report · {report.window.label}")]
    if demo:
        out.append(Para(demo, lead="DEMO DATA — not measurements.", kind="demo"))
    out.append(Para(_provenance(report)))
    out += _hosts_left_out(report)
    for note in report.notes:
        out.append(Para(note, lead="Note:", kind="note"))
    out += _headline(report)
    out += _cards(report)
    out += _seats(report)
    out += _week(report)
    out += _reserves(report)
    out += _decisions(report)
    out += _holds(report)
    out += _loras(report)
    return out + _charts(report, charts, fleet)


def _charts(
    report: Report,
    charts: Sequence[tuple[ChartSeries, str, Picture]],
    fleet: tuple[str, Picture] | None,
) -> list[Block]:
    out: list[Block] = [Heading(2, "Charts")]
    if fleet is not None:
        out.append(Heading(3, "Headroom per host, worst first"))
        out.append(
            Para(
                "One panel per host, the host whose cards came closest to its margin first: each "
                "card's free memory (lowest per bucket) over the window, the margin dashed. The "
                "axis is linear over the last 4 GiB and logarithmic above, so the last GiB show."
            )
        )
        out.append(Chart("free memory per card, one panel per host, worst first", *fleet))
        out.append(Heading(3, "Per card"))
    out.append(
        Para(
            "Per card, three views of the window. Headroom: free memory (lowest per bucket) and "
            "plannable = free − held − margin (held and margin as now), the largest new seat that "
            "room alone would let on; the dashed line is the lowest plannable, what would have fit "
            "all window; the axis shows the last 4 GiB linearly. Drift: each declared seat's bytes "
            "(mean per bucket) minus its declared resident; above zero it holds more than planned. "
            "Used: memory stacked by seat; grey is memory no seat explains; lines: the CUDA total "
            "(NVML total − driver reserve), the declared total of the catalogue's seats; the red "
            "band is what reserves hold (and seats that are down keep)."
        )
    )
    if not charts:
        out.append(Para("Charts are written as SVG files with --out DIR.", kind="note"))
    hosts = {s.host for s in report.charts}
    drawn = {s.host for s, _, _ in charts}
    if charts and len(drawn) < len(hosts):
        out.append(
            Para(
                f"Per-card charts of the {len(drawn)} hosts with least headroom (the first "
                f"panels above); the other {len(hosts) - len(drawn)} hosts are in the panels only.",
                kind="note",
            )
        )
    for series, filename, picture in charts:
        out.append(
            Chart(
                f"{series.host} card {series.card}: headroom, drift per seat, used memory",
                filename,
                picture,
            )
        )
    return out


def _hosts_left_out(report: Report) -> list[Block]:
    """Catalogue hosts with nothing to report, and hosts the catalogue does not describe."""
    out: list[Block] = []
    for u in report.unusable_hosts:
        out.append(
            Para(f"{name(u.host)} ({u.kind}): {u.reason}", lead="Unusable host:", kind="note")
        )
    if report.ignored_hosts:
        out.append(
            Para(
                ", ".join(map(name, report.ignored_hosts))
                + " — not in the catalogue: left out of every "
                "figure (nothing is planned, checked or reported on a host it does not describe).",
                lead="Ignored hosts:",
                kind="note",
            )
        )
    return out


def _provenance(report: Report) -> str:
    """Where the figures come from, the window, how percentiles are taken, the drift flag."""
    window = (
        f"window {_at(report.window.start.isoformat().replace('+00:00', 'Z'))} "
        f"to {_at(report.window.end.isoformat().replace('+00:00', 'Z'))} (end excluded)"
    )
    tail = (
        f"Percentiles are {report.percentile}. A seat is flagged when its drift "
        f"(observed p95 − declared resident) reaches {report.threshold.text()}."
    )
    if report.source == "prometheus":
        return (
            f"Prometheus `{report.ledger}` · {report.snapshots:,} host samples from "
            f"{_at(report.first_at)} to {_at(report.last_at)} · {window}. {tail}"
        )
    return (
        f"Ledger `{report.ledger}` · {report.snapshots:,} snapshots from {_at(report.first_at)} "
        f"to {_at(report.last_at)} · {window}. {tail}"
    )


def _headline(report: Report) -> list[Block]:
    out: list[Block] = [Heading(2, "Headline")]
    for head in report.headlines:
        out.append(Heading(3, f"{name(head.host)} · now = snapshot {_at(head.taken_at)}"))
        out.append(Para(head.action, lead="Most worth acting on:", kind="act"))
        if head.fits:
            out.append(
                Para(
                    "Largest new seat that would fit right now, per card, judged by the same verifier "
                    "as `plan` and `check` (room, margin, reserves; for vLLM also its start-up gate, "
                    "with the util that asks for the seat's resident and its KV cache pinned):"
                )
            )
            rows = tuple(
                (
                    str(f.card),
                    _b(f.largest_bytes),
                    _b(f.largest_vllm_bytes),
                    f.vllm_util or "-",
                    f.binding or "-",
                )
                for f in head.fits
            )
            out.append(
                Table(
                    (
                        "card",
                        "any seat (no gate)",
                        "vLLM seat, KV pinned",
                        "its util",
                        "what binds next",
                    ),
                    rows,
                    numeric=frozenset({1, 2, 3}),
                )
            )
        honoured = "yes" if head.reserves_honoured else "NO"
        out.append(Para(head.reserves_text, lead=f"Reserves honoured all window: {honoured}."))
        if head.other_actions:
            out.append(Para("", lead="Also:"))
            out.append(Bullets(head.other_actions))
    return out


def _cards(report: Report) -> list[Block]:
    out: list[Block] = [
        Heading(2, "Cards"),
        Para(
            "NVML total and driver reserve as read now; declared = Σ catalogue residents of the running "
            "seats on the card; held = reserves not yet consumed by their own seats plus seats that "
            "are down but keep their place; used (v2, reserve excluded) over the window; unexplained = "
            "used − bytes of processes matched to seats; plannable = max(0, free − held − margin) now."
        ),
    ]
    return out + _cards_now(report) + _cards_over_window(report)


def _cards_now(report: Report) -> list[Block]:
    now_rows = tuple(
        (
            f"{name(c.host)}:{c.card}" + (" (v1)" if c.nvml_v1 else ""),
            _b(c.total_bytes),
            _b(c.reserved_bytes),
            _b(c.declared_bytes),
            _b(c.held_bytes),
            _b(c.free_now_bytes),
            _b(c.unexplained_now_bytes),
            _b(c.plannable_now_bytes),
        )
        for c in report.cards
    )
    return [
        Heading(3, "Now"),
        Table(
            (
                "card",
                "NVML total",
                "driver reserve",
                "declared",
                "held",
                "free",
                "unexplained",
                "plannable",
            ),
            now_rows,
            numeric=frozenset(range(1, 8)),
            flagged=tuple(bool(c.unexplained_now_bytes) for c in report.cards),
        ),
    ]


def _cards_over_window(report: Report) -> list[Block]:
    week_rows = tuple(
        (
            f"{name(c.host)}:{c.card}",
            _b(c.used_p50_bytes),
            _b(c.used_p95_bytes),
            _b(c.used_max_bytes),
            _b(c.min_free_bytes),
            _at(c.min_free_at),
            _b(c.unexplained_max_bytes) if c.unexplained_max_bytes else "0",
            _at(c.unexplained_max_at) if c.unexplained_max_bytes else "-",
            f"{c.samples:,}" + (f" (+{c.error_samples:,} in error)" if c.error_samples else ""),
        )
        for c in report.cards
    )
    return [
        Heading(3, "Over the window"),
        Table(
            (
                "card",
                "used p50",
                "used p95",
                "used max",
                "min free",
                "min free at",
                "unexplained max",
                "at",
                "samples",
            ),
            week_rows,
            numeric=frozenset({1, 2, 3, 4, 6, 8}),
            flagged=tuple(
                bool(c.unexplained_max_bytes) or c.error_samples > 0 for c in report.cards
            ),
        ),
    ]


def _seats(report: Report) -> list[Block]:
    out: list[Block] = [
        Heading(2, "Seats"),
        Para(
            "Declared resident (catalogue) against what the seat's processes held on the card. Drift = "
            "observed p95 − declared: positive, the seat holds more than planned for (the seed's "
            "cyberprev, util 0.40, held ~8 GB more); negative, it holds less and the catalogue hides room "
            "(gen-small, util 0.48, ~10 GB less). Growth compares the median of the window's first "
            "and last part (a day each, for a week)."
        ),
    ]
    rows = []
    for s in report.seats:
        rows.append(
            (
                name(s.seat),
                f"{name(s.host)}:{s.card}",
                _b(s.declared_bytes) if s.declared_bytes is not None else "not in catalogue",
                _b(s.p50_bytes),
                _b(s.p95_bytes),
                _b(s.max_bytes),
                signed(s.drift_bytes),
                f"{s.drift_percent:+.2f}%" if s.drift_percent is not None else "-",
                "DRIFT" if s.flagged else "",
                f"{signed(s.growth_bytes)}" + (" GREW" if s.grew else ""),
                f"{s.samples:,}",
            )
        )
    out.append(
        Table(
            (
                "seat",
                "card",
                "declared",
                "p50",
                "p95",
                "max",
                "drift",
                "drift %",
                "flag",
                "growth",
                "samples",
            ),
            tuple(rows),
            numeric=frozenset({2, 3, 4, 5, 6, 7, 9, 10}),
            flagged=tuple(s.flagged or s.grew for s in report.seats),
        )
    )
    return out + _missing(report) + _foreign(report)


def _missing(report: Report) -> list[Block]:
    out: list[Block] = []
    if report.missing:
        out.append(Para("", lead="Seats seen nowhere in the window (stopped?):"))
        out.append(
            Bullets(
                tuple(
                    f"{name(m.seat)} — declared on {name(m.host)} card(s) {', '.join(map(str, m.cards))}, "
                    f"{_b(m.declared_bytes)}; "
                    + (
                        f"last seen {_at(m.last_seen)}"
                        if m.last_seen
                        else f"not seen in the {LOOKBACK_DAYS} days before the window either"
                    )
                    for m in report.missing
                )
            )
        )
    else:
        out.append(
            Para(
                "every running seat with a `match` was seen in the window.",
                lead="Seats seen nowhere:",
            )
        )
    if report.absent_now:
        out.append(
            Para(
                ", ".join(
                    f"{name(seat)} ({name(host)}:{card})" for seat, host, card in report.absent_now
                )
                + " — each still keeps its declared bytes held.",
                lead="Down at the newest snapshot:",
            )
        )
    return out


def _foreign(report: Report) -> list[Block]:
    out: list[Block] = [Heading(3, "Processes matching no seat")]
    if not report.foreign:
        out.append(Para("none in the window."))
    else:
        out.append(
            Table(
                ("card", "command line", "pids", "snapshots", "first", "last", "max"),
                tuple(
                    (
                        f"{name(f.host)}:{f.card}",
                        (
                            code_span(short(f.cmdline))
                            if f.cmdline is not None
                            else "(vanished before /proc was read)"
                        )
                        + (f" (parent: {code_span(short(f.parent))})" if f.parent else ""),
                        str(f.pids),
                        f"{f.samples:,}",
                        _at(f.first_at),
                        _at(f.last_at),
                        _b(f.max_bytes),
                    )
                    for f in report.foreign
                ),
                numeric=frozenset({2, 3, 6}),
            )
        )
    return out


def _week(report: Report) -> list[Block]:
    """DESIGN.md "The week": room by UTC hour, restart safety, co-tenants and coverage."""
    week = report.week
    if week is None:
        return []
    out: list[Block] = [
        Heading(2, "The week"),
        Para(
            "Every hour of the window judged with today's catalogue (its reserves, margins and "
            "down seats hold their bytes at every hour), from the hourly rollups; an hour's raw "
            "moments are read only where the rollups cannot decide a restart."
        ),
        Heading(3, "Room by hour of the day"),
        Para(
            "room = free − held − margin; one cell per UTC hour 00–23, the lowest room in that "
            f"hour over the window: `{SHORT_CELL}` none left, `{UNSEEN_CELL}` never seen, else "
            f"a level between the card's tightest hour (`{LEVEL_CELLS[1]}`) and its roomiest "
            f"(`{LEVEL_CELLS[-1]}`). A card held whole for a reserve has no room all day."
        ),
    ]
    out.append(
        Table(
            ("card", "room now", "lowest room", "at", "00 … 23 UTC", "no room at"),
            tuple(
                (
                    f"{name(r.host)}:{r.card}",
                    _b(r.room_now_bytes),
                    _b(r.min_room_bytes),
                    _at(r.min_room_at),
                    f"`{r.strip}`",
                    hour_ranges(r.short_hours) if r.short_hours else "-",
                )
                for r in week.room
            ),
            numeric=frozenset({1, 2}),
            flagged=tuple(bool(r.short_hours) for r in week.room),
        )
    )
    out.append(Heading(3, "Restart safety"))
    if not week.restarts:
        out.append(Para("no running seat starts on a util request."))
    else:
        out.append(
            Para(
                "Could each request-gated seat have restarted at every moment? Its gate reads "
                "free + its own bytes − the CUDA context, against ceil(util × CUDA total)."
            )
        )
        out.append(
            Table(
                ("seat", "card", "request", "moments unsafe", "worst short", "at", "unsafe in"),
                tuple(
                    (
                        name(r.seat),
                        f"{name(r.host)}:{r.card}",
                        _b(r.requested_bytes),
                        f"{r.unsafe_moments:,} of {r.moments:,}",
                        _b(r.worst_short_bytes) if r.unsafe_moments else "-",
                        _at(r.worst_at),
                        (
                            f"{hour_ranges(r.unsafe_hours)} on {r.unsafe_days} day(s)"
                            if r.unsafe_moments
                            else "-"
                        ),
                    )
                    for r in week.restarts
                ),
                numeric=frozenset({2, 3, 4}),
                flagged=tuple(r.unsafe_moments > 0 for r in week.restarts),
            )
        )
    out.append(Heading(3, "Co-tenants"))
    out.append(
        Para(
            "Each seat and each command line matching no seat, per card: its peak, when it was "
            "there, and a seat's growth per day (the slope of its daily highs, from 3 days)."
        )
    )
    out.append(
        Table(
            ("card", "seat or command", "peak", "at", "recurrence", "growth / day"),
            tuple(
                (
                    f"{name(t.host)}:{t.card}",
                    name(t.seat) if t.seat is not None else code_span(short(t.cmdline or "?")),
                    _b(t.peak_bytes),
                    _at(t.peak_at),
                    t.recurrence,
                    signed(t.growth_bytes_per_day) if t.growth_bytes_per_day is not None else "-",
                )
                for t in week.tenants
            ),
            numeric=frozenset({2, 5}),
        )
    )
    out.append(Heading(3, "Coverage"))
    out.append(
        Table(
            (
                "host",
                "moments",
                "hours seen",
                "coverage",
                "hours with a card in error",
                "largest gap",
            ),
            tuple(
                (
                    name(c.host),
                    f"{c.moments:,}",
                    f"{c.seen_hours:,} of {c.hours:,}",
                    f"{100 * c.coverage:.1f}%",
                    str(c.error_hours),
                    f"{c.largest_gap_hours} h from {_at(c.largest_gap_from)}"
                    if c.largest_gap_hours
                    else "-",
                )
                for c in week.coverage
            ),
            numeric=frozenset({1, 3, 4}),
            flagged=tuple(c.seen_hours < c.hours for c in week.coverage),
        )
    )
    return out


def _reserves(report: Report) -> list[Block]:
    out: list[Block] = [
        Heading(2, "Reserves"),
        Para(
            "A reserve is broken in a snapshot when processes other than its own seats hold more of "
            "its card than the reserve leaves them (anything at all, for a whole-card reserve)."
        ),
    ]
    if not report.reserves:
        out.append(Para("the catalogue declares no reserve."))
        return out
    out.append(
        Table(
            ("reserve", "card", "for", "holds", "broken in", "first", "last", "worst (when)", "by"),
            tuple(
                (
                    name(r.name),
                    f"{name(r.host)}:{r.card}",
                    ", ".join(map(name, r.for_seats)),
                    _b(r.reserve_bytes),
                    f"{r.violations:,} snapshots" + (" (and now)" if r.violated_now else "")
                    if r.violations
                    else "honoured",
                    _at(r.first_at),
                    _at(r.last_at),
                    f"{_b(r.worst_bytes)} at {_at(r.worst_at)}"
                    if r.worst_bytes is not None
                    else "-",
                    "; ".join(r.holders) or "-",
                )
                for r in report.reserves
            ),
            numeric=frozenset({3}),
            flagged=tuple(r.violations > 0 for r in report.reserves),
        )
    )
    return out


def _reason_text(reason: dict[str, Any]) -> str:
    # The words were written when the decision was recorded (placement/cli/reasons_text.py).
    text = str(reason.get("text") or "")
    if text:
        return text
    parts = [str(reason.get("rule", "?"))]
    if reason.get("card") is not None:
        parts.insert(0, f"card {reason['card']}")
    for key, label in (("need_bytes", "need"), ("room_bytes", "room"), ("short_bytes", "short")):
        value = reason.get(key)
        if isinstance(value, int):
            parts.append(f"{label} {_b(value)}")
    return " ".join(parts)


def _decisions(report: Report) -> list[Block]:
    out: list[Block] = [Heading(2, "Decisions")]
    if not report.decisions:
        out.append(Para("no plan or check was recorded in the window."))
        return out
    passed = sum(d.verdict == "pass" for d in report.decisions)
    refused = sum(d.verdict == "refuse" for d in report.decisions)
    out.append(
        Para(
            f"{len(report.decisions)} recorded: {passed} passed, {refused} refused, "
            f"{len(report.decisions) - passed - refused} undecided."
        )
    )
    out.append(
        Table(
            ("when", "kind", "seat", "cards", "verdict", "reasons"),
            tuple(
                (
                    _at(d.decided_at),
                    d.kind,
                    name(d.seat) if d.seat else "-",
                    f"{name(d.host) if d.host else '?'}:{','.join(map(str, d.cards))}"
                    if d.cards
                    else (name(d.host) if d.host else "-"),
                    d.verdict,
                    " · ".join(_reason_text(r) for r in d.reasons) or "-",
                )
                for d in report.decisions
            ),
            flagged=tuple(d.verdict != "pass" for d in report.decisions),
        )
    )
    return out


def _holds(report: Report) -> list[Block]:
    """Active holds, when the report was given a ledger to read them from."""
    if report.holds is None:
        return []
    out: list[Block] = [Heading(2, "Holds")]
    if not report.holds:
        out.append(Para("no approval holds bytes now."))
    else:
        out.append(_hold_table(report.holds))
    if report.expired_holds:
        out.append(
            Para(
                "Approved in the window but never seen on their cards before the hold expired: "
                "deployed elsewhere, under another name, or not at all.",
                lead="Expired unseen.",
            )
        )
        out.append(_hold_table(report.expired_holds))
    return out


def _hold_table(holds: Sequence[HoldRow]) -> Table:
    return Table(
        ("seat", "cards", "holds per card", "since", "until", "by"),
        tuple(
            (
                name(h.seat),
                f"{name(h.host)}:{','.join(map(str, h.cards))}",
                _b(h.need_bytes),
                _at(h.created_at),
                _at(h.expires_at),
                name(h.user),
            )
            for h in holds
        ),
        numeric=frozenset({2}),
    )


def _loras(report: Report) -> list[Block]:
    out: list[Block] = [
        Heading(2, "LoRA carriers"),
        Para(
            "Adapters in --lora-modules (persisted) come back after a recreate; runtime-loaded ones "
            "are gone on the next `compose up -d`. Merged copies = N adapters × the base weights (the "
            "weights alone: each copy would also need its own KV cache and context, so the real saving "
            "is larger); saved = merged copies − the carrier's declared resident."
        ),
    ]
    if not report.loras:
        out.append(Para("no seat of the catalogue carries LoRA adapters."))
        return out
    out.append(
        Table(
            (
                "carrier",
                "persisted",
                "runtime only",
                "max loras",
                "weights",
                "merged copies",
                "carrier",
                "saved",
            ),
            tuple(
                (
                    f"{name(lo.seat)} ({name(lo.host)})" if lo.host else name(lo.seat),
                    ", ".join(map(name, lo.persisted)) or "-",
                    ", ".join(map(name, lo.runtime_only)) or "-",
                    str(lo.max_loras),
                    _b(lo.weights_bytes) if lo.weights_bytes is not None else "not given",
                    _b(lo.merged_bytes) if lo.merged_bytes is not None else "-",
                    _b(lo.carrier_bytes),
                    signed(lo.saved_bytes),
                )
                for lo in report.loras
            ),
            numeric=frozenset({3, 4, 5, 6, 7}),
            flagged=tuple(bool(lo.runtime_only) for lo in report.loras),
        )
    )
    return out


# --- Markdown ---------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(items: Sequence[Block]) -> str:
    """Markdown that reads well in a terminal: pipe tables aligned by tabulate."""
    lines: list[str] = []
    for block in items:
        if isinstance(block, Heading):
            lines += ["#" * block.level + " " + block.text, ""]
        elif isinstance(block, Para):
            text = f"**{block.lead}** {block.text}".strip() if block.lead else block.text
            prefix = "> " if block.kind in {"note", "demo"} else ""
            lines += [prefix + text, ""]
        elif isinstance(block, Table):
            align = ["right" if i in block.numeric else "left" for i in range(len(block.headers))]
            rows = [[_md_cell(cell) for cell in row] for row in block.rows]
            lines += [
                tabulate(rows, headers=list(block.headers), tablefmt="pipe", colalign=align),
                "",
            ]
        elif isinstance(block, Bullets):
            lines += [f"- {item}" for item in block.items] + [""]
        elif block.picture is not None:  # an SVG file written beside the Markdown
            lines += [f"![{alt_text(block.alt)}]({block.filename})", ""]
    return "\n".join(lines).rstrip() + "\n"


# --- HTML -------------------------------------------------------------------------------

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; margin: 24px auto;
       max-width: 1320px; padding: 0 16px; }
h1 { font-size: 24px; margin-bottom: 4px; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 32px; }
h3 { margin-bottom: 6px; }
table { border-collapse: collapse; margin: 8px 0 14px; font-size: 13px; }
th, td { border: 1px solid #d8d8d8; padding: 4px 8px; vertical-align: top; }
th { background: #f3f4f6; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.flag td { background: #fff4e5; }
p.note { background: #eef4ff; border-left: 4px solid #4a78d0; padding: 6px 10px; }
p.demo { background: #fff0f0; border-left: 4px solid #c0392b; padding: 6px 10px; }
p.act { background: #fff8e1; border-left: 4px solid #e0a800; padding: 8px 10px; font-size: 15px; }
code { background: #f3f4f6; padding: 0 3px; border-radius: 3px; }
figure { margin: 10px 0 22px; }
figure svg { display: block; max-width: 100%; height: auto; border: 1px solid #e5e5e5; }
table { display: block; max-width: 100%; overflow-x: auto; }
figcaption { color: #555; font-size: 12px; }
"""


_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)


def _inline(text: str) -> str:
    """Escape, then turn `code` spans (of any fence length, as `code_span` writes) into <code>."""

    def code(match: re.Match[str]) -> str:
        inner = match.group(2)
        if len(inner) > 2 and inner.startswith(" ") and inner.endswith(" ") and inner.strip():
            inner = inner[1:-1]
        return f"<code>{inner}</code>"

    return _CODE_SPAN.sub(code, html.escape(text, quote=True))


def draw_charts(
    report: Report,
) -> tuple[list[tuple[ChartSeries, str, Picture]], tuple[str, Picture] | None]:
    """Every chart the report shows, drawn once as SVG for either format: (series, file name,
    markup) per card, and the hosts' small multiples (file name, markup) for several hosts."""
    from placement.report.charts import FLEET_FILENAME, chart_filename, detail_series, seat_colours
    from placement.report.svg import card_chart, fleet_chart

    colours = seat_colours(name for s in report.charts for name, _ in s.layers)
    charts: list[tuple[ChartSeries, str, Picture]] = [
        (s, chart_filename(s), card_chart(s, colours)) for s in detail_series(report.charts)
    ]
    several = len({s.host for s in report.charts}) > 1
    return charts, (FLEET_FILENAME, fleet_chart(report.charts)) if several else None


def html_report(report: Report, demo: str | None = None) -> str:
    """The report as one self-contained page, its charts inline SVG."""
    charts, fleet = draw_charts(report)
    items = blocks(report, charts, demo=demo, fleet=fleet)
    return to_html(items, f"gpuplan capacity report · {report.window.label}")


def to_html(items: Sequence[Block], title: str) -> str:
    """One self-contained page: CSS inline, charts inline SVG, no scripts."""
    body: list[str] = []
    for block in items:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Para):
            lead = f"<strong>{_inline(block.lead)}</strong> " if block.lead else ""
            cls = f' class="{block.kind}"' if block.kind else ""
            body.append(f"<p{cls}>{lead}{_inline(block.text)}</p>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{_inline(h)}</th>" for h in block.headers)
            rows = []
            for r, row in enumerate(block.rows):
                flag = block.flagged[r] if r < len(block.flagged) else False
                cells = "".join(
                    f'<td class="n">{_inline(c)}</td>'
                    if i in block.numeric
                    else f"<td>{_inline(c)}</td>"
                    for i, c in enumerate(row)
                )
                rows.append(f'<tr class="flag">{cells}</tr>' if flag else f"<tr>{cells}</tr>")
            body.append(
                f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            )
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block.items) + "</ul>")
        elif block.picture is not None:
            body.append(
                f"<figure>{block.picture}<figcaption>{html.escape(block.alt)}</figcaption></figure>"
            )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
