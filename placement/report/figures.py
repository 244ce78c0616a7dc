"""The weekly capacity report built from the ledger: its aggregates joined with the catalogue.

Every figure over the window comes from `inventory.history` (the ledger's or Prometheus's); this
module adds the catalogue's side, asks the verifier for the largest seat that fits, and the
advice rules for the headline. Rows are `rows`'; rendering is `render`'s and `charts`'.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from inventory.attribution import attribute, host_seats, match_lines
from inventory.history.figures import CardBuckets, CatalogueBound, SeatOf, SeatUsage, WindowFigures
from inventory.history.ledger import LedgerHistory
from inventory.snapshot import Card, Snapshot, format_utc, utc
from placement.fit.capacity import (
    absent_seats,
    held_parts,
    margin_bytes,
    plannable_at,
    plannable_bytes,
    seats_declared_on,
)
from placement.fit.card import cuda_total, fixed_reserve_bytes, reserve_bytes
from placement.fit.engines import requests_util
from placement.report.advice import (
    NOTHING_TO_DO,
    HostFacts,
    advice,
    host_facts,
    reserves_text,
)
from placement.report.rows import (
    LOOKBACK_DAYS,
    PERCENTILE_DEFINITION,
    CardFit,
    CardRow,
    ChartSeries,
    DecisionRow,
    DriftThreshold,
    ForeignProcess,
    Headline,
    HoldRow,
    LoraRow,
    MissingSeat,
    Report,
    ReserveRow,
    SeatRow,
    UnusableHost,
    Window,
)
from placement.report.text import code_span, short
from placement.report.week import build_week
from seats.errors import CannotDecideError
from seats.model import Catalogue, Engine, Seat
from seats.units import MiB, format_bytes

_CHART_STEPS_S = (60, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
_CHART_POINTS = 400  # a week in 30-minute means

_DEFAULT_THRESHOLD = DriftThreshold()

# A verifier probe: (catalogue, attributed snapshot, card, resident, vllm?) → (passes, binding rules, util).
Probe = Callable[[Catalogue, Snapshot, int, int, bool], tuple[bool, str, str | None]]


def build_report(
    history: LedgerHistory,
    catalogue: Catalogue,
    window: Window,
    latest: Sequence[Snapshot],
    *,
    ledger_name: str,
    now: datetime,
    threshold: DriftThreshold = _DEFAULT_THRESHOLD,
    probe: Probe | None = None,
    records_until_s: int | None = None,
) -> Report:
    """Aggregate the window's rows in the ledger and join them with the catalogue.

    `latest` are the newest snapshots per host inside the window (the "now" of the report);
    `probe` asks the verifier whether a seat of a given size fits a card (see `verifier_probe`);
    decisions and holds are listed up to `records_until_s` when it is past the window's end
    (the checks recorded after the newest snapshot, which never move the window itself).
    """
    records = Window(
        window.start_s, max(window.end_s, records_until_s or window.end_s), window.label
    )
    source = history.window(window.start_s, window.end_s, _seat_matcher(catalogue))
    if source is None:
        raise CannotDecideError(f"ledger {ledger_name} holds no snapshot in {window.label}")
    report = assemble(
        source,
        catalogue,
        window,
        latest,
        Provenance(
            ledger_name,
            tuple(history.decisions(records.start_s, records.end_s)),
            **_ledger_holds(history, records, now),
        ),
        now=now,
        threshold=threshold,
        probe=probe,
    )
    current = [attribute(s, catalogue) for s in latest if s.host in catalogue.hosts]
    return replace(report, week=build_week(history, catalogue, current, window.start, window.end))


@dataclass(frozen=True)
class Provenance:
    """Where the figures come from, what the report says about them, and the ledger's records."""

    name: str  # the ledger file, or the Prometheus URL
    decisions: tuple[DecisionRow, ...] = ()
    kind: str = "ledger"  # or "prometheus"
    percentile: str = PERCENTILE_DEFINITION
    notes: tuple[str, ...] = ()
    holds: tuple[HoldRow, ...] | None = None  # None: the report does not list holds
    expired_holds: tuple[HoldRow, ...] = ()
    # Hosts outside the catalogue the source had series of, and catalogue hosts it could not
    # read; the ledger path finds both itself (`_bound`).
    ignored_hosts: tuple[str, ...] = ()
    unusable_hosts: tuple[UnusableHost, ...] = ()


def _ledger_holds(history: LedgerHistory, window: Window, now: datetime) -> dict[str, Any]:
    """The holds active now, and those made in the window that expired unseen; none if neither."""
    from inventory.ledger import holds as hold_queries
    from placement.report.rows import hold_rows

    now_s, conn = int(now.timestamp()), history.connection
    active = hold_queries.active(conn, now_s)
    expired = hold_queries.expired_unseen(conn, window.start_s, window.end_s, now_s)
    if not active and not expired:
        return {}
    return {"holds": hold_rows(active), "expired_holds": hold_rows(expired)}


def assemble(
    source: WindowFigures,
    catalogue: Catalogue,
    window: Window,
    latest: Sequence[Snapshot],
    provenance: Provenance,
    *,
    now: datetime,
    threshold: DriftThreshold = _DEFAULT_THRESHOLD,
    probe: Probe | None = None,
) -> Report:
    """The report from a window's aggregates (ledger or Prometheus) and the catalogue.

    Only the catalogue's hosts are reported (DESIGN.md "Fleets"): any other host's rows are left
    out and the host listed as ignored; a catalogue host without a sample is listed as unusable.
    """
    span = source.span()
    if span is None:
        raise CannotDecideError(f"{provenance.name} holds no sample in {window.label}")
    source, provenance = _bound(source, catalogue, provenance)
    if not source.window_hosts():
        raise CannotDecideError(
            f"{provenance.name} holds no sample of the catalogue's hosts "
            f"({', '.join(sorted(catalogue.hosts)) or 'none'}) in {window.label}; "
            f"only of {', '.join(provenance.ignored_hosts)}, which the catalogue does not describe"
        )
    current = {s.host: attribute(s, catalogue) for s in latest if s.host in catalogue.hosts}
    charts = _charts(source, catalogue, current, span.first_s, span.last_s)
    cards = _cards(source, catalogue, current)
    seats = _seats(source, catalogue, threshold, span.first_s, span.last_s)
    report = Report(
        window=window,
        ledger=provenance.name,
        first_at=format_utc(utc(span.first_s)),
        last_at=format_utc(utc(span.last_s)),
        snapshots=span.snapshots,
        threshold=threshold,
        headlines=(),
        cards=cards,
        seats=seats,
        missing=_missing(source, catalogue, window, {(s.seat, s.host) for s in seats}),
        absent_now=_absent_now(catalogue, current),
        foreign=_foreign(source),
        reserves=_reserves(source, catalogue, current),
        decisions=provenance.decisions,
        loras=_loras(catalogue),
        charts=charts,
        notes=provenance.notes + _notes(catalogue, current, cards, now, span.last_s),
        source=provenance.kind,
        percentile=provenance.percentile,
        holds=provenance.holds,
        expired_holds=provenance.expired_holds,
        ignored_hosts=provenance.ignored_hosts,
        unusable_hosts=provenance.unusable_hosts,
    )
    # The headline reads the rest of the report: its advice rules, and the verifier's largest fits.
    headlines = tuple(
        _headline(
            snapshot,
            host_facts(report, snapshot.host, catalogue, _fits(probe, catalogue, snapshot)),
        )
        for snapshot in current.values()
    )
    return replace(report, headlines=headlines)


def _bound(
    source: WindowFigures, catalogue: Catalogue, provenance: Provenance
) -> tuple[WindowFigures, Provenance]:
    """The source cut to the catalogue's hosts; the hosts left out added to the provenance."""
    hosts = set(catalogue.hosts)
    seen = source.window_hosts()
    ignored = sorted(set(provenance.ignored_hosts) | (seen - hosts))
    listed = {u.host for u in provenance.unusable_hosts}
    where = "Prometheus at" if provenance.kind == "prometheus" else "ledger"
    absent = tuple(
        UnusableHost(
            host, "absent", f"absent: {where} {provenance.name} has no sample of it in the window"
        )
        for host in sorted(hosts - seen - listed)
    )
    unusable = tuple(sorted((*provenance.unusable_hosts, *absent), key=lambda u: u.host))
    bound = replace(provenance, ignored_hosts=tuple(ignored), unusable_hosts=unusable)
    return CatalogueBound(source, frozenset(hosts)), bound


def _absent_now(
    catalogue: Catalogue, current: dict[str, Snapshot]
) -> tuple[tuple[str, str, int], ...]:
    """(seat, host, card) of every seat down at the newest snapshot that keeps its place."""
    return tuple(
        (seat.name, host, card.index)
        for host, snapshot in current.items()
        for card in snapshot.cards
        if card.ok
        for seat in absent_seats(catalogue, host, card)
    )


def _notes(
    catalogue: Catalogue,
    current: dict[str, Snapshot],
    cards: Sequence[CardRow],
    now: datetime,
    last_s: int,
) -> tuple[str, ...]:
    """What a reader must know to read the figures: a stale 'now', NVML v1 cards, unknown hosts."""
    notes: list[str] = []
    age = now - utc(last_s)
    if age > timedelta(hours=1):
        notes.append(
            f"the newest snapshot in the window is from {format_utc(utc(last_s))}, "
            f"{age.days} d {age.seconds // 3600} h before this report was made; 'now' means that snapshot"
        )
    if any(c.nvml_v1 for c in cards):
        notes.append(
            "some cards were read through NVML v1 only: their used bytes include the driver reserve"
        )
    return tuple(notes)


def _seat_matcher(catalogue: Catalogue) -> SeatOf:
    """(host, command line, ancestors' lines) → the seat of that host whose `match` claims the
    line, else the nearest ancestor's (inventory.attribution.match_lines), by the catalogue."""
    seats_of: dict[str, list[Seat]] = {}

    def seat_of(host: str, cmdline: str, parents: tuple[str, ...]) -> str | None:
        seats = seats_of.setdefault(host, host_seats(catalogue, host))
        found = match_lines((cmdline, *parents), seats)
        return None if found is None else found[0]

    return seat_of


def _card_of(snapshot: Snapshot | None, index: int) -> Card | None:
    """Card `index` of `snapshot`, None without a snapshot or such a card."""
    if snapshot is None:
        return None
    try:
        return snapshot.card(index)
    except KeyError:
        return None


def _declared(catalogue: Catalogue, host: str, index: int) -> int:
    return sum(seat.resident_bytes for seat in seats_declared_on(catalogue, host, index))


def _held(catalogue: Catalogue, host: str, card: Card | None) -> int:
    """Bytes reserves and down seats hold on the card now; 0 for a card not read now."""
    if card is None or not card.ok:
        return 0
    return sum(p.bytes for p in held_parts(catalogue, host, card))


def _at(seconds: int | None) -> str | None:
    return None if seconds is None else format_utc(utc(seconds))


def _cards(
    source: WindowFigures, catalogue: Catalogue, current: dict[str, Snapshot]
) -> tuple[CardRow, ...]:
    # Unexplained now: the same rule (used − bytes of processes matched to seats) on the
    # attributed newest snapshot, which is at hand already.
    now_unexplained = {
        (host, card.index): (card.used_bytes or 0)
        - sum(p.used_bytes or 0 for p in card.processes if p.seat is not None)
        for host, snapshot in current.items()
        for card in snapshot.cards
        if card.ok
    }
    rows: list[CardRow] = []
    for usage in source.card_usage():
        host, idx = usage.host, usage.card
        snapshot = current.get(host)
        card = _card_of(snapshot, idx)
        rows.append(
            CardRow(
                host=host,
                card=idx,
                uuid=card.uuid if card is not None else None,
                samples=usage.samples,
                error_samples=usage.error_samples,
                total_bytes=card.total_bytes if card is not None else None,
                reserved_bytes=card.reserved_bytes if card is not None else None,
                declared_bytes=_declared(catalogue, host, idx),
                held_bytes=_held(catalogue, host, card),
                used_p50_bytes=usage.used_p50_bytes,
                used_p95_bytes=usage.used_p95_bytes,
                used_max_bytes=usage.used_max_bytes,
                min_free_bytes=usage.min_free_bytes,
                min_free_at=_at(usage.min_free_at_s),
                unexplained_now_bytes=now_unexplained.get((host, idx)),
                unexplained_max_bytes=usage.unexplained_max_bytes,
                unexplained_max_at=_at(usage.unexplained_max_at_s),
                free_now_bytes=card.free_bytes if card is not None else None,
                plannable_now_bytes=plannable_bytes(catalogue, snapshot, card)
                if snapshot is not None and card is not None
                else 0,
                nvml_v1=usage.nvml_v1,
            )
        )
    return tuple(rows)


def segment(first_s: int, last_s: int) -> int:
    """Length of the 'first' and 'last' parts compared for growth: a day, or a quarter of a short window."""
    return max(1, min(86400, (last_s - first_s) // 4))


def _seats(
    source: WindowFigures,
    catalogue: Catalogue,
    threshold: DriftThreshold,
    first_s: int,
    last_s: int,
) -> tuple[SeatRow, ...]:
    known = {seat.name: seat for seat in catalogue.seats}
    usages = source.seat_usage(first_s, last_s, segment(first_s, last_s))
    return tuple(_seat_row(u, known.get(u.seat), threshold) for u in usages)


def _seat_row(usage: SeatUsage, seat: Seat | None, threshold: DriftThreshold) -> SeatRow:
    """drift = p95 − declared; growth = last part's median − first part's; flags by `threshold`."""
    declared = seat.resident_bytes if seat is not None else None
    drift = usage.p95_bytes - declared if declared is not None else None
    first, last = usage.first_p50_bytes, usage.last_p50_bytes
    growth = last - first if first is not None and last is not None else None
    return SeatRow(
        seat=usage.seat,
        host=usage.host,
        card=usage.card,
        declared_bytes=declared,
        samples=usage.samples,
        p50_bytes=usage.p50_bytes,
        p95_bytes=usage.p95_bytes,
        max_bytes=usage.max_bytes,
        drift_bytes=drift,
        drift_percent=round(100 * drift / declared, 2) if drift is not None and declared else None,
        flagged=drift is not None and declared is not None and threshold.flags(drift, declared),
        first_p50_bytes=first,
        last_p50_bytes=last,
        growth_bytes=growth,
        grew=growth is not None
        and growth > 0
        and threshold.flags(growth, declared or usage.p50_bytes),
    )


def _missing(
    source: WindowFigures, catalogue: Catalogue, window: Window, seen: set[tuple[str, str]]
) -> tuple[MissingSeat, ...]:
    hosts = source.window_hosts()
    out: list[MissingSeat] = []
    for seat in catalogue.seats:
        if (
            seat.state != "running"
            or seat.match is None
            or seat.host is None
            or seat.host not in hosts
        ):
            continue
        if (seat.name, seat.host) in seen:
            continue
        # Searched no further back than LOOKBACK_DAYS before the window.
        last = source.last_sighting(
            seat.host, seat.name, window.start_s, window.start_s - LOOKBACK_DAYS * 86400
        )
        out.append(
            MissingSeat(
                seat.name, seat.host, seat.pinned_cards or (), seat.resident_bytes, _at(last)
            )
        )
    return tuple(out)


def _foreign(source: WindowFigures) -> tuple[ForeignProcess, ...]:
    return tuple(
        ForeignProcess(
            host=f.host,
            card=f.card,
            cmdline=f.cmdline,
            pids=f.pids,
            samples=f.samples,
            first_at=format_utc(utc(f.first_s)),
            last_at=format_utc(utc(f.last_s)),
            max_bytes=f.max_bytes,
            parent=f.parent,
        )
        for f in source.foreign_usage()
    )


def _reserves(
    source: WindowFigures, catalogue: Catalogue, current: dict[str, Snapshot]
) -> tuple[ReserveRow, ...]:
    rows: list[ReserveRow] = []
    for reserve in catalogue.reserves:
        snapshot = current.get(reserve.host)
        card = _card_of(snapshot, reserve.gpu)
        fixed = fixed_reserve_bytes(reserve)
        held = reserve_bytes(reserve, card) if card is not None and card.ok else fixed
        breaches = source.reserve_breaches(reserve.host, reserve.gpu, reserve.for_, fixed)
        violated_now = (
            breaches.snapshots > 0
            and card is not None
            and card.ok
            and snapshot is not None
            and breaches.last_s == int(snapshot.taken_at.timestamp())
        )
        rows.append(
            ReserveRow(
                name=reserve.name,
                host=reserve.host,
                card=reserve.gpu,
                for_seats=reserve.for_,
                reserve_bytes=held,
                violations=breaches.snapshots,
                first_at=_at(breaches.first_s),
                last_at=_at(breaches.last_s),
                worst_bytes=breaches.worst_bytes,
                worst_at=_at(breaches.worst_at_s),
                holders=tuple(
                    f"{code_span(short(h.name, 60))} ({format_bytes(h.max_bytes)})"
                    for h in breaches.holders
                ),
                violated_now=violated_now,
            )
        )
    return tuple(rows)


def _loras(catalogue: Catalogue) -> tuple[LoraRow, ...]:
    rows: list[LoraRow] = []
    for seat in catalogue.seats:
        if seat.lora is None or seat.state == "retired":
            continue
        adapters = seat.lora.adapters
        merged = len(adapters) * seat.weights_bytes if seat.weights_bytes is not None else None
        rows.append(
            LoraRow(
                seat=seat.name,
                host=seat.host,
                max_loras=seat.lora.max_loras,
                persisted=tuple(a.name for a in adapters if a.persisted),
                runtime_only=tuple(a.name for a in adapters if not a.persisted),
                carrier_bytes=seat.resident_bytes,
                weights_bytes=seat.weights_bytes,
                merged_bytes=merged,
                saved_bytes=merged - seat.resident_bytes if merged is not None else None,
            )
        )
    return tuple(rows)


def chart_step(span_s: int) -> int:
    for step in _CHART_STEPS_S:
        if span_s / step <= _CHART_POINTS:
            return step
    return _CHART_STEPS_S[-1]


def _charts(
    source: WindowFigures,
    catalogue: Catalogue,
    current: dict[str, Snapshot],
    first_s: int,
    last_s: int,
) -> tuple[ChartSeries, ...]:
    step = chart_step(last_s - first_s)
    return tuple(
        _chart(catalogue, _card_of(current.get(b.host), b.card), b, step)
        for b in source.chart_buckets(step)
    )


def _chart(catalogue: Catalogue, card: Card | None, buckets: CardBuckets, step: int) -> ChartSeries:
    """One card's series: each seat's mean bytes per bucket (sum ÷ samples), 'other' last."""
    host, idx = buckets.host, buckets.card
    times = sorted(buckets.samples)
    counts = [buckets.samples[b] for b in times]
    by_seat = buckets.seat_bytes
    # Seats declared on the card first (stable colours across cards), then the rest.
    declared = [s.name for s in seats_declared_on(catalogue, host, idx)]
    names = [n for n in declared if n in by_seat] + sorted(n for n in by_seat if n not in declared)
    layers = [
        (name, tuple(by_seat[name].get(b, 0.0) / n for b, n in zip(times, counts, strict=True)))
        for name in names
    ]
    other = buckets.unexplained_bytes
    layers.append(("other", tuple(other[b] / n for b, n in zip(times, counts, strict=True))))
    held, margin = _held(catalogue, host, card), margin_bytes(catalogue, host)
    # Bytes, whatever the source: Prometheus answers floats (of whole bytes).
    free = tuple(_whole(buckets.free_min_bytes.get(b)) for b in times)
    return ChartSeries(
        host=host,
        card=idx,
        bucket_s=step,
        times_s=tuple(b * step for b in times),
        layers=tuple(layers),
        cuda_total_bytes=cuda_total(card) if card is not None and card.ok else None,
        declared_bytes=_declared(catalogue, host, idx),
        held_bytes=held,
        free_min=free,
        margin_bytes=margin,
        seat_declared=tuple(
            (s.name, s.resident_bytes) for s in seats_declared_on(catalogue, host, idx)
        ),
        plannable_min=tuple(None if f is None else plannable_at(f, held, margin) for f in free),
    )


def _whole(value: float | None) -> int | None:
    return None if value is None else round(value)


def _fits(probe: Probe | None, catalogue: Catalogue, snapshot: Snapshot) -> tuple[CardFit, ...]:
    """Per card, the largest new seat the verifier lets on now (none without a probe)."""
    fits: list[CardFit] = []
    if probe is None:
        return ()
    catalogue = host_catalogue(catalogue, snapshot.host)
    for card in snapshot.cards:
        if not card.ok:
            fits.append(CardFit(card.index, 0, 0, None, "error"))
            continue
        plain, why_plain, _ = largest_fit(probe, catalogue, snapshot, card.index, False)
        vllm, why_vllm, util = largest_fit(probe, catalogue, snapshot, card.index, True)
        binding = why_plain if why_plain == why_vllm else f"{why_plain}; vLLM: {why_vllm}"
        fits.append(CardFit(card.index, plain, vllm, util, binding))
    return tuple(fits)


def host_catalogue(catalogue: Catalogue, host: str) -> Catalogue:
    """The catalogue as judging a card of `host` reads it: its seats and reserves, the seats
    those reserves are for, and seats of no host. The same verdicts: the verifier looks at no
    other host's seats, and a fleet's thousands of them cost each of its probes a scan.
    """
    reserves = tuple(r for r in catalogue.reserves if r.host == host)
    named = {name for r in reserves for name in r.for_}
    seats = tuple(s for s in catalogue.seats if s.host in (host, None) or s.name in named)
    return catalogue.model_copy(update={"seats": seats, "reserves": reserves})


def _headline(snapshot: Snapshot, facts: HostFacts) -> Headline:
    """Room now, whether reserves held, and the advice rules' sentences (the first is the action)."""
    actions = advice(facts)
    return Headline(
        host=snapshot.host,
        taken_at=format_utc(snapshot.taken_at),
        fits=facts.fits,
        reserves_honoured=not facts.broken,
        reserves_text=reserves_text(facts.reserves),
        action=actions[0] if actions else NOTHING_TO_DO,
        other_actions=tuple(actions[1:]),
    )


# --- the headline -----------------------------------------------------------------------


def verifier_probe(
    catalogue: Catalogue, snapshot: Snapshot, card: int, resident: int, vllm: bool
) -> tuple[bool, str, str | None]:
    """Ask the shared verifier whether a new seat of `resident` bytes may start on `card` now.

    The vLLM probe pins its KV cache and asks for the smallest 3-decimal util that covers its
    resident (the seed's practice), so vLLM's own gate checks the whole seat: gates included.
    """
    from placement.fit.engines import smallest_util_covering
    from placement.fit.engines.registry import util_request_engine
    from placement.fit.verify import judge

    host = snapshot.host
    name = "(largest new seat)"
    if not vllm:
        seat = Seat(name=name, host=host, gpus=(card,), resident=resident)
        verdict = judge(catalogue, snapshot, seat, [card], mode="plan")
        return verdict.passed, _rules(verdict.reasons), None
    total = cuda_total(snapshot.card(card))
    util = smallest_util_covering(resident, total)
    if util is None:
        return False, "gate", None
    seat = Seat(
        name=name,
        host=host,
        gpus=(card,),
        resident=resident,
        engine=Engine(
            kind=util_request_engine().kind,
            version=_vllm_version(catalogue, host),
            kv_cache_memory=max(1, resident // 4),
        ),
    )
    verdict = judge(catalogue, snapshot, seat, [card], mode="check", util=util)
    return verdict.passed, _rules(verdict.reasons), str(util)


def _rules(reasons: Sequence[Any]) -> str:
    return ", ".join(sorted({str(reason.rule) for reason in reasons}))


def _vllm_version(catalogue: Catalogue, host: str) -> str:
    """The vLLM version most of the host's seats run (the next seat likely runs it too)."""
    versions = [
        s.engine.version
        for s in catalogue.seats
        if s.host == host and requests_util(s.engine) and s.engine.version is not None
    ]
    if not versions:
        return "0.11.0"
    return max(sorted(set(versions)), key=versions.count)


def largest_fit(
    probe: Probe, catalogue: Catalogue, snapshot: Snapshot, card: int, vllm: bool
) -> tuple[int, str, str | None]:
    """Largest whole MiB a new seat may hold on `card` per the verifier; binary search on bytes.

    Fitting is monotone in the seat's size (a bigger seat needs more room and, for vLLM,
    a bigger util), so the search is exact to the MiB.
    """
    top = (snapshot.card(card).free_bytes or 0) // MiB
    ok, binding, util = probe(catalogue, snapshot, card, MiB, vllm)
    if not ok:
        return 0, binding, None
    low, high = 1, top + 1  # low fits, high does not
    best_util = util
    ok_top, binding_top, util_top = (
        probe(catalogue, snapshot, card, top * MiB, vllm) if top > 1 else (True, "", util)
    )
    if ok_top:
        return top * MiB, "free", util_top
    binding = binding_top
    high = top
    while high - low > 1:
        mid = (low + high) // 2
        ok, why, util = probe(catalogue, snapshot, card, mid * MiB, vllm)
        if ok:
            low, best_util = mid, util
        else:
            high, binding = mid, why
    return low * MiB, binding, best_util
