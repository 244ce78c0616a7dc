"""The weekly report of a fleet built from Prometheus: range queries instead of a ledger of snapshots.

The figures come from `inventory.history`'s Prometheus source, "now" per host from its snapshots at
the host's newest sample; `figures.assemble` then builds the same `Report` the ledger path builds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from inventory.attribution import attribute
from inventory.history.figures import DecisionRow
from inventory.history.prometheus import (
    DCGM_FREE,
    PERCENTILE_DEFINITION,
    SNAPSHOT_TIMESTAMP,
    HostSpan,
    PrometheusHistory,
    PrometheusWindow,
    ReserveSpec,
)
from inventory.prometheus.tiles import Tiling
from inventory.snapshot import Snapshot, format_utc, utc
from placement.report.figures import (
    Probe,
    Provenance,
    assemble,
    chart_step,
    host_catalogue,
    segment,
)
from placement.report.rows import (
    LOOKBACK_DAYS,
    DriftThreshold,
    HoldRow,
    Report,
    UnusableHost,
    Window,
)
from seats.errors import CannotDecideError
from seats.model import Catalogue
from seats.units import MiB

# A host whose newest sample is older than this before the window's newest has stopped.
_STOP_SLACK_S = 300


@dataclass(frozen=True)
class LedgerRecords:
    """What `--ledger` adds to a Prometheus report: the window's decisions and the active holds."""

    name: str
    decisions: tuple[DecisionRow, ...]
    holds: tuple[HoldRow, ...]
    expired_holds: tuple[HoldRow, ...] = ()


def build_prometheus_report(
    history: PrometheusHistory,
    catalogue: Catalogue,
    window: Window,
    *,
    now: datetime,
    threshold: DriftThreshold,
    probe: Probe | None = None,
    records: LedgerRecords | None = None,
    charts: bool = True,
) -> tuple[Report, PrometheusWindow]:
    """The report of the catalogue's hosts over `window`, and the window's answers (with timings).
    Without `charts` (a format that prints none, as JSON) the charts' range queries are not asked.

    Hosts are named as `plan --prometheus` names them (DESIGN.md's labels, or the history's
    `host_label`), read at its `step_s`;
    others are ignored, catalogue hosts without series unusable. Exit 3 (CannotDecideError)
    when no catalogue host has a series in the window.
    """
    hosts = sorted(catalogue.hosts)
    if not hosts:
        raise CannotDecideError(
            "the catalogue describes no host: a Prometheus report covers only the catalogue's hosts"
        )
    history.client.window_text = f"the window {window.label}"
    with ThreadPoolExecutor(max_workers=1) as side:
        early = _Early(side, history, catalogue, probe)
        try:
            return _build(history, catalogue, window, early, now, threshold, records, charts)
        finally:
            early.stop.set()


@dataclass
class _Early:
    """Work done beside the queries, as soon as the hosts' spans are known: each host's 'now'
    (the snapshot reader's own queries), then the headline's largest fits, which depend only on
    the catalogue and those snapshots (the verifier's answers are kept for `assemble`)."""

    side: ThreadPoolExecutor
    history: PrometheusHistory
    catalogue: Catalogue
    probe: Probe | None
    answers: dict[tuple[str, datetime, int, int, bool], tuple[bool, str, str | None]] = field(
        default_factory=dict
    )
    # The largest MiB that fits, by (host, taken at, card, vLLM?), where the search found it.
    bounds: dict[tuple[str, datetime, int, bool], int] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    latest: Future[tuple[list[Snapshot], list[str], tuple[UnusableHost, ...]]] | None = None
    fits: Future[None] | None = None

    def start(self, spans: dict[str, HostSpan]) -> None:
        last_s = max(s.last_s for s in spans.values())
        self.latest = self.side.submit(_latest, self.history, self.catalogue, spans, last_s)
        if self.probe is not None:
            self.fits = self.side.submit(self._search, self.latest)

    def cached(
        self, catalogue: Catalogue, snapshot: Snapshot, card: int, resident: int, vllm: bool
    ) -> tuple[bool, str, str | None]:
        """The probe, answering again what it answered beside the queries.

        Where the search beside the queries found a card's boundary (the largest MiB that fits),
        a size it did not ask about is answered from it: fitting is monotone in the seat's size
        (`largest_fit`'s premise), so a smaller seat fits and a larger one does not, binding as
        the first size that does not. `largest_fit` ends on the boundary and the MiB above it,
        whose answers are the verifier's own, so its result is the same.
        """
        assert self.probe is not None
        key = (snapshot.host, snapshot.taken_at, card, resident, vllm)
        hit = self.answers.get(key)
        if hit is None:
            hit = self._implied(key)
        if hit is None:
            hit = self.answers[key] = self.probe(catalogue, snapshot, card, resident, vllm)
        return hit

    def _implied(
        self, key: tuple[str, datetime, int, int, bool]
    ) -> tuple[bool, str, str | None] | None:
        host, taken_at, card, resident, vllm = key
        low = self.bounds.get((host, taken_at, card, vllm))
        if low is None:
            return None
        if resident <= low * MiB:
            return True, "", None
        above = self.answers.get((host, taken_at, card, (low + 1) * MiB, vllm))
        return None if above is None else (False, above[1], None)

    def _search(
        self, latest: Future[tuple[list[Snapshot], list[str], tuple[UnusableHost, ...]]]
    ) -> None:
        """What `figures.assemble` asks for each card's largest fit, asked now: each card's
        boundary, searched from a guess (the previous card's distance below its free memory;
        for vLLM, the plain seat's boundary) and remembered for `cached`."""
        gap = 0
        for found in latest.result()[0]:
            if found.host not in self.catalogue.hosts:
                continue
            snapshot = attribute(found, self.catalogue)
            catalogue = host_catalogue(self.catalogue, found.host)
            for card in snapshot.cards:
                if self.stop.is_set():
                    return
                if not card.ok:
                    continue
                top = (card.free_bytes or 0) // MiB
                plain = self._boundary(catalogue, snapshot, card.index, False, top - gap)
                if plain is not None:
                    gap = top - plain
                self._boundary(catalogue, snapshot, card.index, True, plain or top - gap)

    def _boundary(
        self, catalogue: Catalogue, snapshot: Snapshot, card: int, vllm: bool, guess: int
    ) -> int | None:
        """The largest MiB a new seat may hold on `card`, searched outward from `guess`, with the
        verifier's answers at it and at the MiB above (None where nothing fits or all the free
        memory does: `largest_fit` reads those from its first probes)."""

        def fits(n: int) -> bool:
            return self.cached(catalogue, snapshot, card, n * MiB, vllm)[0]

        top = (snapshot.card(card).free_bytes or 0) // MiB
        if top <= 1:
            return None
        # 0 fits and top + 1 does not without asking; every size asked lies between them.
        low, high = _bracket(fits, 0, top + 1, min(max(guess, 1), top))
        while high - low > 1:
            mid = (low + high) // 2
            if fits(mid):
                low = mid
            else:
                high = mid
        if low == 0 or high == top + 1:
            return None
        self.bounds[(snapshot.host, snapshot.taken_at, card, vllm)] = low
        return low


def _bracket(fits: Callable[[int], bool], low: int, high: int, guess: int) -> tuple[int, int]:
    """A narrower (fits, does not fit) pair around `guess`, within `low` (fits) and `high`
    (does not), galloping away from the guess in doubling steps."""
    step = 1
    if fits(guess):
        low = guess
        while low + step < high:
            if not fits(low + step):
                return low, low + step
            low, step = low + step, step * 2
        return low, high
    high = guess
    while high - step > low:
        if fits(high - step):
            return high - step, high
        high, step = high - step, step * 2
    return low, high


def _build(
    history: PrometheusHistory,
    catalogue: Catalogue,
    window: Window,
    early: _Early,
    now: datetime,
    threshold: DriftThreshold,
    records: LedgerRecords | None,
    charts: bool = True,
) -> tuple[Report, PrometheusWindow]:
    hosts = sorted(catalogue.hosts)
    step_s = history.step_s
    answers = _load(history, catalogue, window, early, charts)
    span = answers.span()
    if span is None:
        others = (
            f"; only of {', '.join(answers.ignored)}, not in the catalogue"
            if answers.ignored
            else ""
        )
        raise CannotDecideError(
            f"Prometheus at {history.shown} has no {SNAPSHOT_TIMESTAMP} or {DCGM_FREE} series "
            f"of the catalogue's hosts ({', '.join(hosts)}) in {window.label}{others}"
        )
    assert early.latest is not None  # started with the spans
    latest, fleet_notes, unreadable = early.latest.result()
    if early.fits is not None:
        wait([early.fits])  # its failures, if any, come again from `assemble`
    notes = (
        *_coverage_notes(hosts, answers.hosts, span.first_s, span.last_s, step_s),
        *fleet_notes,
        f"times of extremes and broken reserves are to the query step ({step_s} s); "
        f"'samples' count the {step_s} s steps with a reading",
        *_recorded_notes(answers.answers.tiles),
    )
    provenance = Provenance(
        name=history.shown,
        decisions=records.decisions if records is not None else (),
        kind="prometheus",
        percentile=PERCENTILE_DEFINITION,
        notes=notes,
        holds=records.holds if records is not None else None,
        expired_holds=records.expired_holds if records is not None else (),
        ignored_hosts=answers.ignored,
        unusable_hosts=unreadable,
    )
    report = assemble(
        answers,
        catalogue,
        window,
        latest,
        provenance,
        now=now,
        threshold=threshold,
        probe=early.cached if early.probe is not None else None,
    )
    return report, answers


def _load(
    history: PrometheusHistory, catalogue: Catalogue, window: Window, early: _Early, charts: bool
) -> PrometheusWindow:
    """The window's figures of the catalogue's hosts; `early` starts once their spans are in."""
    return history.window(
        sorted(catalogue.hosts),
        window.start_s,
        window.end_s,
        chart_step_s=chart_step,
        segment_s=segment,
        reserves=[
            ReserveSpec(
                r.host,
                r.gpu,
                tuple(r.for_),
                None if r.amount_bytes == "card" else int(r.amount_bytes),
            )
            for r in catalogue.reserves
        ],
        running_seats=[
            (s.host, s.name)
            for s in catalogue.seats
            if s.state == "running" and s.match is not None and s.host is not None
        ],
        lookback_s=LOOKBACK_DAYS * 86400,
        on_spans=early.start,
        charts=charts,
    )


def _latest(
    history: PrometheusHistory, catalogue: Catalogue, spans: dict[str, HostSpan], last_s: int
) -> tuple[list[Snapshot], list[str], tuple[UnusableHost, ...]]:
    """Each host's snapshot at its newest sample of the window, why any could not be read (as
    notes, and as unusable hosts: their window's figures stay, their 'now' is left out).

    Hosts still reporting at the window's end are read in one go; a host whose series stopped
    earlier is read at its own last sample.
    """
    expected = {name: host.cards for name, host in catalogue.hosts.items() if host.cards}
    moments = sorted({_moment(s, last_s) for s in spans.values()}, reverse=True)
    found: dict[str, Snapshot] = {}
    notes: list[str] = []
    unreadable: dict[str, UnusableHost] = {}
    for moment in moments:
        wanted = {h for h, s in spans.items() if _moment(s, last_s) == moment}
        fleet = history.latest(
            utc(moment),
            max_age=timedelta(seconds=max(history.step_s * 3, _STOP_SLACK_S)),
            expected_cards={h: n for h, n in expected.items() if h in wanted},
        )
        for snapshot in (*fleet.snapshots, *fleet.stale):
            if snapshot.host in wanted and snapshot.host not in found:
                found[snapshot.host] = snapshot
        for p in fleet.problems:
            if p.host in wanted and p.host not in found and p.kind != "absent":
                text = f"{p.text} (at {format_utc(utc(moment))}): its 'now' columns and headline are left out"
                notes.append(text)
                unreadable.setdefault(p.host, UnusableHost(p.host, p.kind, text))
    return [found[h] for h in sorted(found)], notes, tuple(unreadable.values())


def _recorded_notes(tiles: Tiling | None) -> list[str]:
    """Where the counts and extremes came from the hourly rollups `gpuplan rules` recorded."""
    if tiles is None:
        return []
    (_, head_end), (tail_start, _) = tiles.head, tiles.tail
    return [
        f"samples, most used and least free of each card and seat read from {tiles.hours} hours "
        "recorded by `gpuplan rules`, and raw samples before "
        f"{format_utc(utc(head_end // 1000 + 1))} and after {format_utc(utc(tail_start // 1000))}"
    ]


def _moment(span: HostSpan, last_s: int) -> int:
    return last_s if last_s - span.last_s <= _STOP_SLACK_S else span.last_s


def _coverage_notes(
    hosts: Sequence[str], spans: dict[str, HostSpan], first_s: int, last_s: int, step_s: int
) -> list[str]:
    """A catalogue host with no series; one whose series start late or stop early; DCGM-only ones."""
    slack = max(step_s * 3, _STOP_SLACK_S)
    notes: list[str] = []
    for host in hosts:
        span = spans.get(host)
        if span is None:  # listed as unusable (absent) by `figures.assemble`
            continue
        if last_s - span.last_s > slack:
            notes.append(
                f"{host}: its {span.metric} series stop at {format_utc(utc(span.last_s))}, "
                f"{_duration(last_s - span.last_s)} before the window's newest sample; its figures "
                "cover the window up to then, and its 'now' is that last sample"
            )
        if span.first_s - first_s > slack:
            notes.append(
                f"{host}: its {span.metric} series start at {format_utc(utc(span.first_s))}, "
                f"{_duration(span.first_s - first_s)} after the window's first sample"
            )
        if span.metric == DCGM_FREE:
            notes.append(
                f"{host}: read from DCGM's card figures only (whole MiB, no processes): no seat, "
                "foreign process or unexplained memory is reported for it"
            )
    return notes


def _duration(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min"
