"""Demo data: a seeded week of one-minute snapshots of an example host, for `make report`.

Everything here is invented from one base snapshot (the fv-ml1 example); it is labelled demo data wherever it shows.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from inventory.attribution import attribute
from inventory.history.ledger import Connection
from inventory.ledger.queries import meta_value
from inventory.ledger.store import Ledger
from inventory.ledger.writes import CardValues, ProcessValues, SnapshotValues
from inventory.snapshot import Card, Process, Snapshot
from placement.fit.engines import requests_util
from seats.errors import BadInputError
from seats.model import Catalogue, Seat
from seats.units import GiB, MiB

if TYPE_CHECKING:
    from placement.check.seat import CheckResult
    from placement.fit.verdict import Verdict

DEMO_DRIFT_BYTES = 3 * GiB  # the drifting seat gains this much, linearly, over the window
DEMO_FOREIGN_BYTES = 6 * GiB + 518 * MiB  # a 6 GiB tensor plus its CUDA context (docs/facts.md §1)
DEMO_FOREIGN_PID = 28811
DEMO_FOREIGN_CMDLINE = "python3 /home/ops/notebooks/probe_embeddings.py --device cuda"
DEMO_META_KEY = "demo"  # the ledger's meta entry that labels it demo data


@dataclass(frozen=True)
class DemoStory:
    """What the generator puts in the week, so tests and the README can name it."""

    start: datetime  # first snapshot
    end: datetime  # last snapshot
    minutes: int
    drift_seat: str | None
    drift_card: int | None
    foreign_card: int
    foreign_start: datetime
    foreign_end: datetime  # exclusive
    check_seat: str | None
    check_card: int | None
    check_at: datetime


def plan_story(catalogue: Catalogue, base: Snapshot, *, end: datetime, days: int) -> DemoStory:
    """Choose the drifting seat, the foreign afternoon and the checked seat from the base state."""
    if days < 1 or days > 62:
        raise BadInputError(f"--days {days}: give between 1 and 62 days")
    end = end.astimezone(UTC).replace(second=0, microsecond=0)
    minutes = days * 1440
    start = end - timedelta(minutes=minutes - 1)
    attributed = attribute(base, catalogue)
    present = {
        (p.seat, card.index)
        for card in attributed.cards
        for p in card.processes
        if p.seat is not None
    }
    running = [s for s in catalogue.seats if s.state == "running" and s.host == base.host]
    # The drifting seat: a leak is likeliest in a server without a preallocated KV cache,
    # so prefer the largest non-vLLM seat that is up; fall back to any seat that is up.
    candidates = [s for s in running if any((s.name, c) in present for c in s.pinned_cards or ())]
    others = [s for s in candidates if not requests_util(s.engine)]
    drift = max(others or candidates, key=lambda s: s.resident_bytes, default=None)
    drift_card = _first_present_card(drift, present)
    cards_ok = [c for c in base.cards if c.ok]
    if not cards_ok:
        raise BadInputError(f"base snapshot of {base.host} has no card that was read")
    foreign_card = _foreign_card(catalogue, base.host, cards_ok)
    foreign_start, foreign_end = _foreign_afternoon(start, end, days)
    check, check_card = _checked_seat(running, cards_ok, present)
    check_at = max(start, end - timedelta(days=2)).replace(hour=10, minute=14)
    if check_at < start or check_at > end:
        check_at = start + timedelta(minutes=minutes // 2)
    return DemoStory(
        start=start,
        end=end,
        minutes=minutes,
        drift_seat=drift.name if drift is not None else None,
        drift_card=drift_card,
        foreign_card=foreign_card,
        foreign_start=foreign_start,
        foreign_end=foreign_end,
        check_seat=check.name if check is not None else None,
        check_card=check_card,
        check_at=check_at,
    )


def _foreign_card(catalogue: Catalogue, host: str, cards_ok: list[Card]) -> int:
    """A reserved card when there is one (the foreign process breaks the reserve), else the freest."""
    reserved = [r.gpu for r in catalogue.reserves if r.host == host]
    if reserved and any(c.index == reserved[0] for c in cards_ok):
        return reserved[0]
    return max(cards_ok, key=lambda c: c.free_bytes or 0).index


def _foreign_afternoon(start: datetime, end: datetime, days: int) -> tuple[datetime, datetime]:
    """13:00 to 18:00 of the middle day; for one day (or too late a middle), hours 3 to 8."""
    middle = start + timedelta(days=days // 2)
    foreign_start = middle.replace(hour=13, minute=0)
    foreign_end = middle.replace(hour=18, minute=0)
    if days == 1 or foreign_end > end:
        return start + timedelta(hours=3), start + timedelta(hours=8)
    return foreign_start, foreign_end


def _checked_seat(
    running: list[Seat], cards_ok: list[Card], present: set[tuple[str, int]]
) -> tuple[Seat | None, int | None]:
    """A vLLM seat with a declared util on the fullest card, smallest first, and that card.

    The seed's vllm-voices: its own redeploy check at a higher util.
    """
    for card in sorted(cards_ok, key=lambda c: c.free_bytes or 0):
        on_card = [
            s
            for s in running
            if requests_util(s.engine)
            and s.engine.gpu_memory_utilization is not None
            and (s.name, card.index) in present
        ]
        if on_card:
            return min(on_card, key=lambda s: s.resident_bytes), card.index
    return None, None


def _first_present_card(seat: Seat | None, present: set[tuple[str, int]]) -> int | None:
    if seat is None:
        return None
    for card in seat.pinned_cards or ():
        if (seat.name, card) in present:
            return card
    return None


# One generated card reading: (base card, used, free, utilization, processes); a process is
# (pid, used_bytes, cmdline, seat). Plain tuples, because a week is ~40,000 of them.
_Proc = tuple[int, int, str | None, str | None]
_CardRow = tuple[Card, int, int, int, list[_Proc]]


def _minutes(
    catalogue: Catalogue, base: Snapshot, story: DemoStory, *, seed: int
) -> Iterator[tuple[datetime, list[_CardRow]]]:
    """One reading a minute from `story.start` to `story.end`, seeded, oldest first.

    Noise is what the cards really do: a vLLM seat's memory is preallocated, so it moves by
    a few MiB; other servers follow their load through the day by about 1% of their size.
    """
    rng = random.Random(seed)
    attributed = attribute(base, catalogue)
    grows = {s.name: requests_util(s.engine) for s in catalogue.seats}
    readable = [c for c in attributed.cards if c.ok and c.total_bytes is not None]
    shapes = []
    for card in readable:
        capacity = (card.total_bytes or 0) - (card.reserved_bytes or 0)
        overhead = (card.used_bytes or 0) - sum(p.used_bytes or 0 for p in card.processes)
        procs = [
            (
                p.pid,
                p.used_bytes or 0,
                p.cmdline,
                p.seat,
                grows.get(p.seat or "", False),
                p.seat is not None
                and p.seat == story.drift_seat
                and card.index == story.drift_card,
            )
            for p in card.processes
        ]
        shapes.append((card, capacity, overhead, procs))
    last = max(1, story.minutes - 1)
    for minute in range(story.minutes):
        moment = story.start + timedelta(minutes=minute)
        # Load follows office hours: 0 at night, up to 1 mid-afternoon UTC.
        hour = moment.hour + moment.minute / 60
        load = math.sin(math.pi * (hour - 7) / 12) if 7 <= hour <= 19 else 0.0
        foreign = story.foreign_start <= moment < story.foreign_end
        rows: list[_CardRow] = []
        for card, capacity, overhead, procs in shapes:
            out: list[_Proc] = []
            for pid, size, cmdline, seat, vllm, drifting in procs:
                if vllm:
                    size += int(rng.gauss(0, 3)) * MiB
                elif size:
                    size += int(size * (0.01 * load + rng.gauss(0, 0.0015)))
                if drifting:
                    size += DEMO_DRIFT_BYTES * minute // last
                out.append((pid, max(0, size), cmdline, seat))
            if foreign and card.index == story.foreign_card:
                ramp = min(1.0, (moment - story.foreign_start).total_seconds() / 600)
                size = int(DEMO_FOREIGN_BYTES * ramp) + rng.randrange(0, 64) * MiB
                out.append((DEMO_FOREIGN_PID, size, DEMO_FOREIGN_CMDLINE, None))
            # A card never reports more than it has.
            used = min(capacity, overhead + sum(p[1] for p in out))
            util = min(100, int(15 + 70 * load) + rng.randrange(0, 10)) if out else 0
            rows.append((card, used, capacity - used, util, out))
        yield moment, rows


def _snapshot(base: Snapshot, moment: datetime, rows: list[_CardRow]) -> Snapshot:
    cards = {
        card.index: Card.model_construct(
            index=card.index,
            uuid=card.uuid,
            name=card.name,
            total_bytes=card.total_bytes,
            reserved_bytes=card.reserved_bytes,
            used_bytes=used,
            free_bytes=free,
            utilization_percent=util,
            processes=tuple(
                Process.model_construct(pid=pid, used_bytes=size, cmdline=cmdline, seat=seat)
                for pid, size, cmdline, seat in procs
            ),
            error=None,
        )
        for card, used, free, util, procs in rows
    }
    return Snapshot.model_construct(
        host=base.host,
        taken_at=moment,
        driver=base.driver,
        nvml_version=base.nvml_version,
        cards=tuple(cards.get(c.index, c) for c in base.cards),
    )


def demo_snapshots(
    catalogue: Catalogue, base: Snapshot, story: DemoStory, *, seed: int
) -> Iterator[Snapshot]:
    """The demo week as frozen snapshots, oldest first (slower than `write_demo`'s bulk rows)."""
    for moment, rows in _minutes(catalogue, base, story, seed=seed):
        yield _snapshot(base, moment, rows)


def write_demo(
    ledger: Ledger,
    catalogue: Catalogue,
    base: Snapshot,
    story: DemoStory,
    *,
    seed: int,
) -> dict[datetime, Snapshot]:
    """Insert the demo week into an empty ledger in one transaction; return the snapshot at each check.

    Rows go in as plain values (`Ledger.append_rows`): building a pydantic snapshot per minute
    would cost more than the whole insert.
    """
    wanted = {story.check_at, story.check_at + timedelta(minutes=7)}
    kept: dict[datetime, Snapshot] = {}
    errored = [
        CardValues(c.index, c.uuid, c.name, None, None, None, None, None, c.error)
        for c in base.cards
        if not c.ok
    ]

    def readings() -> Iterator[SnapshotValues]:
        for moment, rows in _minutes(catalogue, base, story, seed=seed):
            if moment in wanted:
                kept[moment] = _snapshot(base, moment, rows)
            yield _values(base, moment, rows, errored)

    ledger.append_rows(readings())
    return kept


def _values(
    base: Snapshot, moment: datetime, rows: list[_CardRow], errored: list[CardValues]
) -> SnapshotValues:
    """One generated minute as the ledger's rows; cards that failed to read stay in error."""
    cards = [
        CardValues(
            card.index,
            card.uuid,
            card.name,
            card.total_bytes,
            card.reserved_bytes,
            used,
            free,
            util,
            None,
        )
        for card, used, free, util, _ in rows
    ]
    processes = [
        ProcessValues(card.index, pid, size, cmdline, seat)
        for card, _, _, _, procs in rows
        for pid, size, cmdline, seat in procs
    ]
    return SnapshotValues(
        base.host, moment, base.driver, base.nvml_version, [*cards, *errored], processes
    )


@dataclass(frozen=True)
class DemoCheck:
    """One `check` the demo records: who, at which util, and what the verifier said."""

    decided_at: datetime
    seat: str
    cards: tuple[int, ...]
    util: str
    verdict: str
    decision_id: int


def record_demo_checks(
    ledger: Ledger,
    catalogue: Catalogue,
    story: DemoStory,
    kept: dict[datetime, Snapshot],
    worded: Callable[[Verdict], Verdict] | None = None,
) -> list[DemoCheck]:
    """Record a refused and a passed redeploy check of the story's seat, judged by the real verifier.

    The refused one asks for the smallest util above the declared one (in steps of 0.01) that
    the card's free memory cannot honour — the seed's 0.12 for vllm-voices; the passed one
    uses the declared util, seven minutes later.
    """
    from placement.check.seat import check_seat, inputs_digest
    from placement.decisions import record_decision
    from placement.fit.engines import util_decimal

    if story.check_seat is None or story.check_card is None:
        return []
    seat = catalogue.seat(story.check_seat)
    declared = seat.engine.gpu_memory_utilization
    if declared is None:
        return []
    base_util = util_decimal(declared)
    first = kept.get(story.check_at)
    second = kept.get(story.check_at + timedelta(minutes=7))
    if first is None or second is None:
        return []
    out: list[DemoCheck] = []
    plan: list[tuple[datetime, CheckResult, Decimal]] = []
    refused = _refused_check(catalogue, first, seat.name, story.check_card, base_util)
    if refused is not None:
        plan.append((story.check_at, *refused))
    passed = check_seat(catalogue, [second], seat.name, [story.check_card])
    plan.append((story.check_at + timedelta(minutes=7), passed, base_util))
    for moment, result, util in plan:
        decision_id = record_decision(
            ledger,
            "check",
            worded(result.verdict) if worded is not None else result.verdict,
            inputs_digest=inputs_digest(result),
            snapshot_id=ledger.snapshot_id(result.snapshot.host, moment),
            decided_at=moment,
            host=result.snapshot.host,
        )
        out.append(
            DemoCheck(
                moment,
                result.verdict.seat,
                tuple(result.verdict.cards),
                str(util),
                result.verdict.verdict,
                decision_id,
            )
        )
    return out


def _refused_check(
    catalogue: Catalogue, snapshot: Snapshot, seat: str, card: int, declared: Decimal
) -> tuple[CheckResult, Decimal] | None:
    """The check at the smallest util above `declared` (steps of 0.01, up to 1) that is refused."""
    from placement.check.seat import check_seat

    for step in range(1, 101):
        asked = declared + Decimal("0.01") * step
        if asked > 1:
            return None
        result = check_seat(catalogue, [snapshot], seat, [card], util=asked)
        if result.verdict.verdict == "refuse":
            return result, asked
    return None


def mark_demo(ledger: Ledger, text: str) -> None:
    """Say in the ledger itself that it holds demo data; the report prints it as a banner."""
    ledger.set_meta(DEMO_META_KEY, text)


def demo_note(connection: Connection) -> str | None:
    """The ledger's demo label, None for a real ledger."""
    return meta_value(connection, DEMO_META_KEY)
