"""The weekly report's numbers, checked against small ledgers built by hand with known values."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from inventory.history.ledger import LedgerHistory
from inventory.ledger.store import open_ledger
from inventory.snapshot import Card, Process, Snapshot
from placement.report.figures import build_report, largest_fit, verifier_probe
from placement.report.render import blocks, to_html, to_markdown
from placement.report.rows import (
    DriftThreshold,
    Report,
    Window,
    parse_threshold,
    parse_week,
    window_since,
)
from seats.errors import BadInputError, CannotDecideError
from seats.loader import parse_catalogue
from seats.model import Catalogue
from seats.units import GiB, MiB

T0 = datetime(2026, 9, 14, 8, 0, tzinfo=UTC)  # a Monday, ISO week 2026-W38
TOTAL = 100 * GiB
RESERVED = GiB  # CUDA total 99 GiB
SMALL_CATALOGUE: dict[str, Any] = {
    "hosts": {"h1": {"cards": 2, "card_total": TOTAL}},
    "reserves": [{"name": "hold", "host": "h1", "gpu": 1, "bytes": "card", "for": ["big"]}],
    "seats": [
        {
            "name": "a",
            "host": "h1",
            "gpus": [0],
            "resident": 10 * GiB,
            "weights": 4 * GiB,
            "state": "running",
            "match": "serve-a",
            "lora": {
                "max_loras": 2,
                "adapters": [{"name": "x", "persisted": True}, {"name": "y", "persisted": False}],
            },
        },
        {
            "name": "gone",
            "host": "h1",
            "gpus": [0],
            "resident": 1000 * MiB,
            "state": "running",
            "match": "serve-gone",
        },
        {"name": "big", "host": "h1", "state": "planned", "resident": 50 * GiB},
    ],
}
# Seat a's extra MiB per minute, in a shuffled order: minute i holds 10 GiB + EXTRA[i] MiB.
EXTRA = list(range(1, 21))
random.Random(7).shuffle(EXTRA)
FOREIGN_MINUTES = (5, 6, 7)
DEFAULT = DriftThreshold()
FOREIGN_BYTES = (2 * GiB, 3 * GiB, 2 * GiB)


@pytest.fixture
def small() -> Catalogue:
    return parse_catalogue(SMALL_CATALOGUE, "small.yaml")


def card(
    index: int, used: int, processes: tuple[Process, ...] = (), reserved: int | None = RESERVED
) -> Card:
    free = TOTAL - (reserved or 0) - used
    return Card(
        index=index,
        uuid=f"GPU-{index}",
        total_bytes=TOTAL,
        reserved_bytes=reserved,
        used_bytes=used,
        free_bytes=free,
        processes=processes,
    )


def small_snapshots(*, seat_recorded: bool = True) -> list[Snapshot]:
    """20 minutes of h1: seat a on card 0 (known bytes), a foreign process on card 1 for 3 minutes."""
    out = []
    for i, extra in enumerate(EXTRA):
        a_bytes = 10 * GiB + extra * MiB
        a = Process(
            pid=100,
            used_bytes=a_bytes,
            cmdline="serve-a --port 1",
            seat="a" if seat_recorded else None,
        )
        foreign: tuple[Process, ...] = ()
        if i in FOREIGN_MINUTES:
            size = FOREIGN_BYTES[FOREIGN_MINUTES.index(i)]
            foreign = (Process(pid=900 + i, used_bytes=size, cmdline="python notebook.py"),)
        cards = (card(0, a_bytes, (a,)), card(1, sum(p.used_bytes or 0 for p in foreign), foreign))
        out.append(Snapshot(host="h1", taken_at=T0 + timedelta(minutes=i), cards=cards))
    return out


def write_ledger(path: Path, snapshots: list[Snapshot], decisions: bool = True) -> Path:
    with open_ledger(path) as ledger:
        for snapshot in snapshots:
            ledger.append(snapshot)
        if decisions:
            reason = {
                "rule": "room",
                "host": "h1",
                "card": 0,
                "need_bytes": 95 * GiB,
                "room_bytes": 88 * GiB,
                "short_bytes": 7 * GiB,
                "text": "card 0 room: need 95 GiB, room 88 GiB",
            }
            ledger.record_decision(
                kind="check",
                host="h1",
                seat="big",
                cards=[0],
                verdict="refuse",
                reasons=[reason],
                inputs_digest="d1",
                snapshot_id=1,
                decided_at=T0 + timedelta(minutes=3),
            )
            ledger.record_decision(
                kind="plan",
                host="h1",
                seat="big",
                cards=[1],
                verdict="pass",
                reasons=[],
                inputs_digest="d2",
                snapshot_id=2,
                decided_at=T0 + timedelta(minutes=4),
            )
            ledger.record_decision(  # a week earlier: outside the window
                kind="check",
                host="h1",
                seat="a",
                cards=[0],
                verdict="refuse",
                reasons=[],
                inputs_digest="d3",
                snapshot_id=None,
                decided_at=T0 - timedelta(days=7),
            )
    return path


def report_of(
    path: Path,
    catalogue: Catalogue,
    window: Window | None = None,
    threshold: DriftThreshold = DEFAULT,
) -> Report:
    with open_ledger(path, readonly=True) as ledger:
        latest = ledger.latest_per_host()
        last = int(latest[0].taken_at.timestamp())
        return build_report(
            LedgerHistory(ledger.connection),
            catalogue,
            window or window_since(timedelta(days=7), last),
            latest,
            ledger_name=str(path),
            now=latest[0].taken_at,
            threshold=threshold,
            probe=verifier_probe,
        )


def nearest_rank(values: list[int], p: int) -> int:
    """Independent nearest-rank percentile for the checks below."""
    ordered = sorted(values)
    rank = -(-p * len(ordered) // 100)
    return ordered[rank - 1]


# --- windows and thresholds -------------------------------------------------------------


def test_iso_week_is_monday_to_monday_utc() -> None:
    week = parse_week("2026-W38")
    assert week.start == datetime(2026, 9, 14, tzinfo=UTC)
    assert week.end == datetime(2026, 9, 21, tzinfo=UTC)
    assert parse_week("2026w1").label == "2026-W01"


@pytest.mark.parametrize("text", ["2026-W99", "2026-W54", "2026-38", "W38", ""])
def test_bad_week_is_bad_input(text: str) -> None:
    with pytest.raises(BadInputError, match="--week"):
        parse_week(text)


def test_since_window_includes_the_newest_snapshot() -> None:
    window = window_since(timedelta(days=7), 1_000_000)
    assert window.end_s == 1_000_001 and window.start_s == 1_000_001 - 7 * 86400
    assert window.label.startswith("7 d to ")


def test_threshold_parsing_and_either_bound() -> None:
    both = parse_threshold("5%,1GiB")
    assert both == DriftThreshold(5.0, GiB)
    assert both.flags(GiB, 100 * GiB)  # 1 GiB reached
    assert both.flags(-GiB, 100 * GiB)  # either direction
    assert not both.flags(GiB - 1, 100 * GiB)  # under 1 GiB and 1%
    assert both.flags(50 * MiB, 1000 * MiB)  # 5% of a small seat
    assert not both.flags(49 * MiB, 1000 * MiB)
    assert parse_threshold("2 GiB") == DriftThreshold(None, 2 * GiB)
    assert parse_threshold("10%") == DriftThreshold(10.0, None)
    for bad in ("", "five%", "1 GB", "0%"):
        with pytest.raises(BadInputError):
            parse_threshold(bad)


# --- the numbers ------------------------------------------------------------------------


def test_card_percentiles_minimum_free_and_unexplained(tmp_path: Path, small: Catalogue) -> None:
    report = report_of(write_ledger(tmp_path / "l.sqlite", small_snapshots()), small)
    card0, card1 = report.cards
    used = [10 * GiB + e * MiB for e in EXTRA]
    assert card0.samples == 20
    assert card0.used_p50_bytes == nearest_rank(used, 50) == 10 * GiB + 10 * MiB
    assert card0.used_p95_bytes == nearest_rank(used, 95) == 10 * GiB + 19 * MiB
    assert card0.used_max_bytes == 10 * GiB + 20 * MiB
    # Minimum free is at the minute seat a held the most (20 MiB extra).
    assert card0.min_free_bytes == TOTAL - RESERVED - (10 * GiB + 20 * MiB)
    minute = EXTRA.index(20)
    assert card0.min_free_at == (T0 + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert card0.unexplained_max_bytes == 0
    assert card0.declared_bytes == 10 * GiB + 1000 * MiB  # a and gone
    # Card 1: the foreign process is unexplained; its largest reading is 3 GiB at minute 6.
    assert card1.unexplained_max_bytes == 3 * GiB
    assert card1.unexplained_max_at == (T0 + timedelta(minutes=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert card1.min_free_bytes == TOTAL - RESERVED - 3 * GiB
    assert card1.used_max_bytes == 3 * GiB
    assert card1.used_p95_bytes == nearest_rank([0] * 17 + list(FOREIGN_BYTES), 95) == 2 * GiB
    assert card1.held_bytes == TOTAL - RESERVED  # held whole for big
    assert card1.plannable_now_bytes == 0
    # Seat "gone" is down and keeps its place: its 1000 MiB are held on card 0 (no margin).
    assert card0.held_bytes == 1000 * MiB
    assert card0.plannable_now_bytes == (card0.free_now_bytes or 0) - 1000 * MiB


def test_minimum_free_ties_report_the_earliest_time(tmp_path: Path, small: Catalogue) -> None:
    snapshots = [
        Snapshot(host="h1", taken_at=T0 + timedelta(minutes=i), cards=(card(0, used), card(1, 0)))
        for i, used in enumerate([GiB, 5 * GiB, 2 * GiB, 5 * GiB])
    ]
    report = report_of(write_ledger(tmp_path / "l.sqlite", snapshots, decisions=False), small)
    assert report.cards[0].min_free_at == "2026-09-14T08:01:00Z"


def test_seat_drift_against_declared_and_flag(tmp_path: Path, small: Catalogue) -> None:
    path = write_ledger(tmp_path / "l.sqlite", small_snapshots())
    (a,) = [s for s in report_of(path, small).seats if s.seat == "a"]
    assert (a.declared_bytes, a.p95_bytes, a.max_bytes) == (
        10 * GiB,
        10 * GiB + 19 * MiB,
        10 * GiB + 20 * MiB,
    )
    assert a.drift_bytes == 19 * MiB
    assert a.drift_percent == round(100 * 19 / 10240, 2)
    assert not a.flagged  # 0.19% and 19 MiB: under 5% and 1 GiB
    (tight,) = [
        s for s in report_of(path, small, threshold=parse_threshold("0.1%")).seats if s.seat == "a"
    ]
    assert tight.flagged
    # Declared 9 GiB: the same seat now drifts by over 1 GiB and is flagged at the default.
    lower = SMALL_CATALOGUE | {
        "seats": [
            {**SMALL_CATALOGUE["seats"][0], "resident": 9 * GiB},
            *SMALL_CATALOGUE["seats"][1:],
        ]
    }
    (flagged,) = [s for s in report_of(path, parse_catalogue(lower, "x")).seats if s.seat == "a"]
    assert flagged.drift_bytes == GiB + 19 * MiB and flagged.flagged


def test_seats_attributed_at_read_time_when_not_recorded(tmp_path: Path, small: Catalogue) -> None:
    path = write_ledger(tmp_path / "l.sqlite", small_snapshots(seat_recorded=False))
    (a,) = [s for s in report_of(path, small).seats if s.seat == "a"]
    assert a.samples == 20 and a.p95_bytes == 10 * GiB + 19 * MiB


def test_seat_seen_nowhere_and_foreign_processes(tmp_path: Path, small: Catalogue) -> None:
    report = report_of(write_ledger(tmp_path / "l.sqlite", small_snapshots()), small)
    assert [m.seat for m in report.missing] == ["gone"]
    assert report.missing[0].last_seen is None
    assert [(s, c) for s, _, c in report.absent_now] == [("gone", 0)]
    (foreign,) = report.foreign
    assert (foreign.card, foreign.cmdline, foreign.pids, foreign.samples, foreign.max_bytes) == (
        1,
        "python notebook.py",
        3,
        3,
        3 * GiB,
    )
    assert foreign.first_at == "2026-09-14T08:05:00Z" and foreign.last_at == "2026-09-14T08:07:00Z"


def test_reserve_violations(tmp_path: Path, small: Catalogue) -> None:
    report = report_of(write_ledger(tmp_path / "l.sqlite", small_snapshots()), small)
    (hold,) = report.reserves
    assert hold.card == 1 and hold.reserve_bytes == TOTAL - RESERVED
    assert hold.violations == 3
    assert (hold.first_at, hold.last_at) == ("2026-09-14T08:05:00Z", "2026-09-14T08:07:00Z")
    assert (hold.worst_bytes, hold.worst_at) == (3 * GiB, "2026-09-14T08:06:00Z")
    assert hold.holders and "python notebook.py" in hold.holders[0]
    assert not hold.violated_now
    assert not report.headlines[0].reserves_honoured


def test_partial_reserve_allows_what_it_leaves(tmp_path: Path) -> None:
    # A 97 GiB reserve on a 99 GiB card leaves others 2 GiB: only the 3 GiB minute breaks it.
    data = SMALL_CATALOGUE | {
        "reserves": [{"name": "hold", "host": "h1", "gpu": 1, "bytes": 97 * GiB, "for": ["big"]}]
    }
    report = report_of(
        write_ledger(tmp_path / "l.sqlite", small_snapshots()), parse_catalogue(data, "x")
    )
    (hold,) = report.reserves
    assert hold.violations == 1 and hold.worst_bytes == 3 * GiB


def test_reserve_honoured_without_foreign_process(tmp_path: Path, small: Catalogue) -> None:
    quiet = [s.model_copy(update={"cards": (s.cards[0], card(1, 0))}) for s in small_snapshots()]
    report = report_of(write_ledger(tmp_path / "l.sqlite", quiet), small)
    assert report.reserves[0].violations == 0 and report.headlines[0].reserves_honoured
    assert report.foreign == ()


def test_decisions_in_the_window_only(tmp_path: Path, small: Catalogue) -> None:
    report = report_of(write_ledger(tmp_path / "l.sqlite", small_snapshots()), small)
    assert [(d.kind, d.verdict, d.cards) for d in report.decisions] == [
        ("check", "refuse", (0,)),
        ("plan", "pass", (1,)),
    ]
    assert report.decisions[0].reasons[0]["short_bytes"] == 7 * GiB


def test_growth_compares_first_and_last_part(tmp_path: Path) -> None:
    catalogue = parse_catalogue(
        {
            "hosts": {"h1": {"cards": 1}},
            "seats": [
                {
                    "name": "a",
                    "host": "h1",
                    "gpus": [0],
                    "resident": 10 * GiB,
                    "state": "running",
                    "match": "serve-a",
                }
            ],
        },
        "x",
    )
    snapshots = []
    for i in range(40):
        size = 10 * GiB + i * 40 * MiB  # +1.52 GiB over the 40 minutes
        a = Process(pid=1, used_bytes=size, cmdline="serve-a", seat="a")
        snapshots.append(
            Snapshot(host="h1", taken_at=T0 + timedelta(minutes=i), cards=(card(0, size, (a,)),))
        )
    report = report_of(write_ledger(tmp_path / "l.sqlite", snapshots, decisions=False), catalogue)
    (grown,) = report.seats
    # span 39 min, part = 585 s: minutes 0–9 first, 30–39 last; their medians are minutes 4 and 34.
    assert grown.first_p50_bytes == 10 * GiB + 4 * 40 * MiB
    assert grown.last_p50_bytes == 10 * GiB + 34 * 40 * MiB
    assert grown.growth_bytes == 30 * 40 * MiB and grown.grew


def test_week_window_and_empty_window(tmp_path: Path, small: Catalogue) -> None:
    path = write_ledger(tmp_path / "l.sqlite", small_snapshots())
    report = report_of(path, small, window=parse_week("2026-W38"))
    assert report.snapshots == 20 and report.window.label == "2026-W38"
    with pytest.raises(CannotDecideError, match="no snapshot in 2026-W37"):
        report_of(path, small, window=parse_week("2026-W37"))


def test_lora_carrier_savings(tmp_path: Path, small: Catalogue) -> None:
    report = report_of(write_ledger(tmp_path / "l.sqlite", small_snapshots()), small)
    (lora,) = report.loras
    assert (lora.persisted, lora.runtime_only) == (("x",), ("y",))
    assert lora.merged_bytes == 2 * 4 * GiB and lora.saved_bytes == 8 * GiB - 10 * GiB


# --- the headline -----------------------------------------------------------------------


def test_headline_largest_fit_is_the_verifiers_boundary(tmp_path: Path, small: Catalogue) -> None:
    report = report_of(write_ledger(tmp_path / "l.sqlite", small_snapshots()), small)
    head = report.headlines[0]
    fit0, fit1 = head.fits
    card0 = report.cards[0]
    assert fit0.largest_bytes == card0.plannable_now_bytes // MiB * MiB
    assert (fit1.largest_bytes, fit1.largest_vllm_bytes, fit1.binding) == (0, 0, "reserve")
    # The vLLM figure is exactly where the verifier turns: it passes, one MiB more does not.
    with open_ledger(tmp_path / "l.sqlite", readonly=True) as ledger:
        latest = ledger.latest_per_host()[0]
    ok, _, util = verifier_probe(small, latest, 0, fit0.largest_vllm_bytes, True)
    assert ok and util == fit0.vllm_util
    assert not verifier_probe(small, latest, 0, fit0.largest_vllm_bytes + MiB, True)[0]
    assert 0 < fit0.largest_vllm_bytes <= fit0.largest_bytes


def test_largest_fit_with_a_stub_probe_finds_the_boundary() -> None:
    snapshot = Snapshot(host="h1", taken_at=T0, cards=(card(0, 10 * GiB),))
    limit = 1234 * MiB

    def probe(
        _c: Catalogue, _s: Snapshot, _card: int, resident: int, _v: bool
    ) -> tuple[bool, str, str | None]:
        return resident <= limit, "" if resident <= limit else "room", None

    catalogue = parse_catalogue({"hosts": {"h1": {"cards": 1}}}, "x")
    assert largest_fit(probe, catalogue, snapshot, 0, False) == (limit, "room", None)


def test_headline_action_names_the_drifting_seat(tmp_path: Path) -> None:
    data = SMALL_CATALOGUE | {
        "seats": [
            {**SMALL_CATALOGUE["seats"][0], "resident": 8 * GiB},
            *SMALL_CATALOGUE["seats"][1:],
        ]
    }
    report = report_of(
        write_ledger(tmp_path / "l.sqlite", small_snapshots()), parse_catalogue(data, "x")
    )
    assert report.headlines[0].action.startswith("a (card 0) holds more than declared")


def test_probe_finds_the_room_left_by_hand(small: Catalogue) -> None:
    # Card 0: CUDA total 99 GiB, 10 GiB used by a process of no seat. Seats a (10 GiB) and gone
    # (1,000 MiB) are declared running there with a match and no process: they keep their place.
    snapshot = Snapshot(host="h1", taken_at=T0, cards=(card(0, 10 * GiB), card(1, 0)))
    room = (99 * GiB - 10 * GiB) - (10 * GiB + 1000 * MiB)
    assert verifier_probe(small, snapshot, 0, room, False)[:2] == (True, "")
    assert verifier_probe(small, snapshot, 0, room + 1, False)[:2] == (False, "room")
    # Card 1 is held whole for big: even 1 GiB is refused there, by the reserve.
    assert verifier_probe(small, snapshot, 1, GiB, False)[:2] == (False, "reserve")


# --- rendering --------------------------------------------------------------------------


def test_markdown_and_html_carry_the_numbers(tmp_path: Path, small: Catalogue) -> None:
    report = report_of(write_ledger(tmp_path / "l.sqlite", small_snapshots()), small)
    md = to_markdown(blocks(report, [], demo=None))
    assert "# Capacity report" in md and "nearest-rank" in md
    assert "| hold " in md and "3 snapshots" in md
    assert "10.02 GiB" in md  # seat a's p95 (10 GiB + 19 MiB)
    assert "card 0 room: need 95 GiB, room 88 GiB" in md
    assert "DEMO" not in md
    page = to_html(blocks(report, [], demo="made up"), "t")
    assert page.startswith("<!DOCTYPE html>") and "DEMO DATA" in page and "<table>" in page
    assert "<script" not in page


def test_cards_in_error_and_v1_cards_are_counted_not_zeroed(
    tmp_path: Path, small: Catalogue
) -> None:
    snapshots = []
    for i in range(6):
        first = card(0, 10 * GiB, reserved=None if i % 2 else RESERVED)  # v1 every other minute
        second = Card(index=1, error="GpuIsLost") if i < 2 else card(1, 0)
        snapshots.append(
            Snapshot(host="h1", taken_at=T0 + timedelta(minutes=i), cards=(first, second))
        )
    report = report_of(write_ledger(tmp_path / "l.sqlite", snapshots, decisions=False), small)
    card0, card1 = report.cards
    assert card0.nvml_v1 and not card1.nvml_v1
    assert (card1.samples, card1.error_samples) == (4, 2)
    assert any("NVML v1" in note for note in report.notes)
    md = to_markdown(blocks(report, []))
    assert "(+2 in error)" in md and "h1:0 (v1)" in md


def test_a_host_the_catalogue_does_not_know_is_ignored(tmp_path: Path, small: Catalogue) -> None:
    stray = [s.model_copy(update={"host": "h9"}) for s in small_snapshots()]
    both = write_ledger(tmp_path / "l.sqlite", [*small_snapshots(), *stray], decisions=False)
    report = report_of(both, small)
    assert report.ignored_hosts == ("h9",) and report.unusable_hosts == ()
    assert {c.host for c in report.cards} == {"h1"}
    assert {h.host for h in report.headlines} == {"h1"}
    assert {s.host for s in report.charts} == {"h1"} and {f.host for f in report.foreign} == {"h1"}
    assert list(report.to_json()["ignored_hosts"]) == ["h9"]
    assert "**Ignored hosts:** h9 — not in the catalogue" in to_markdown(blocks(report, []))


def test_only_hosts_outside_the_catalogue_is_exit_3(tmp_path: Path, small: Catalogue) -> None:
    stray = [s.model_copy(update={"host": "h9"}) for s in small_snapshots()]
    with pytest.raises(CannotDecideError, match=r"no sample of the catalogue's hosts \(h1\)"):
        report_of(write_ledger(tmp_path / "l.sqlite", stray, decisions=False), small)


def test_a_catalogue_host_without_snapshots_is_unusable(tmp_path: Path, small: Catalogue) -> None:
    data = small.model_dump(by_alias=True, exclude_none=True)
    data["hosts"]["h2"] = data["hosts"]["h1"]
    two = parse_catalogue(data, "two.yaml")
    report = report_of(write_ledger(tmp_path / "l.sqlite", small_snapshots()), two)
    assert [(u.host, u.kind) for u in report.unusable_hosts] == [("h2", "absent")]
    assert "has no sample of it in the window" in report.unusable_hosts[0].reason
    assert report.to_json()["unusable_hosts"][0]["host"] == "h2"


def test_a_missing_seat_shows_when_it_was_last_seen(tmp_path: Path, small: Catalogue) -> None:
    earlier = T0 - timedelta(days=3)
    gone = Process(pid=5, used_bytes=1000 * MiB, cmdline="serve-gone", seat="gone")
    before = Snapshot(host="h1", taken_at=earlier, cards=(card(0, 1000 * MiB, (gone,)), card(1, 0)))
    path = write_ledger(tmp_path / "l.sqlite", [before, *small_snapshots()], decisions=False)
    report = report_of(path, small, window=parse_week("2026-W38"))
    assert [(m.seat, m.last_seen) for m in report.missing] == [("gone", "2026-09-11T08:00:00Z")]
    assert "last seen 2026-09-11 08:00Z" in to_markdown(blocks(report, []))


def test_the_headline_judges_on_the_host_s_catalogue_alike(small: Catalogue) -> None:
    """Cutting the catalogue to one host (a fleet's speed-up) changes no largest fit."""
    from inventory.attribution import attribute
    from placement.report.figures import host_catalogue

    data = small.model_dump(by_alias=True, exclude_none=True)
    data["hosts"]["h2"] = data["hosts"]["h1"]
    data["seats"], data["reserves"] = list(data["seats"]), list(data["reserves"])
    for seat in list(data["seats"]):
        if seat.get("host") == "h1":
            data["seats"].append({**seat, "name": seat["name"] + "-2", "host": "h2"})
    for reserve in list(data["reserves"]):
        own = [name + "-2" for name in reserve["for"]]
        data["reserves"].append(
            {**reserve, "name": reserve["name"] + "-2", "host": "h2", "for": own}
        )
    fleet = parse_catalogue(data, "fleet.yaml")
    snapshot = attribute(small_snapshots()[-1], fleet)
    cut = host_catalogue(fleet, "h1")
    assert {s.host for s in cut.seats} <= {"h1", None} and len(cut.seats) < len(fleet.seats)
    for index in (0, 1):
        for vllm in (False, True):
            whole = largest_fit(verifier_probe, fleet, snapshot, index, vllm)
            assert largest_fit(verifier_probe, cut, snapshot, index, vllm) == whole


def test_ledger_report_asks_span_and_hosts_once(tmp_path: Path, small: Catalogue) -> None:
    path = write_ledger(tmp_path / "l.sqlite", small_snapshots())
    asked: list[str] = []
    with open_ledger(path, readonly=True) as ledger:
        ledger.connection.set_trace_callback(asked.append)
        latest = ledger.latest_per_host()
        build_report(
            LedgerHistory(ledger.connection),
            small,
            window_since(timedelta(days=7), int(latest[0].taken_at.timestamp())),
            latest,
            ledger_name=str(path),
            now=latest[0].taken_at,
        )
    assert sum("SELECT DISTINCT host FROM gp_win" in s for s in asked) == 1
    assert sum("MIN(taken_at_s), MAX(taken_at_s), COUNT(*) FROM snapshots" in s for s in asked) == 1
