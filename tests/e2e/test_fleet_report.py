"""End to end: three days of one-minute series for 6 hosts × 8 cards, backfilled into a real
Prometheus with promtool, reported by `report --prometheus` and compared with the SQLite report
of the same readings (same flags, drifts within the percentile difference, the same broken reserve).

The story (tests/e2e/fleetweek.py) in three days: fl-00 leaks and breaks a reserve one
afternoon, fl-01 gains unexplained memory, fl-03 runs a foreign notebook, fl-05 stops on day 3.
fl-02's series carry `exported_host` (a scrape job set `host`); fl-04 is not in the catalogue
(ignored on both paths); the catalogue's fl-99 has no series at all (unusable on both paths).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from inventory.ledger.store import open_ledger
from placement.cli.main import main
from tests.e2e.fleetweek import DAY, GIB, MIB, FleetWeek, backfill
from tests.e2e.harness import Processes, prometheus_and_promtool, start_prometheus_on

pytestmark = pytest.mark.slow

SPILL = (DAY + 13 * 60, DAY + 17 * 60)  # day 2, 13:00 to 17:00
WEEK = FleetWeek(
    hosts=6,
    minutes=3 * DAY,
    exported=frozenset({2}),
    spill=SPILL,
    stop_at=2 * DAY + 12 * 60,
    unexplained_from=2 * DAY + 6 * 60,
)
WINDOW = ("--since", "3d", "--until", "2026-09-10T00:00:00Z")
# The report's clock: the end of the window.
NOW = datetime(2026, 9, 10, tzinfo=UTC)


def write_catalogue(work: Path) -> Path:
    """The week's catalogue without fl-04 (ignored) and with fl-99 (no series), in `work`."""
    data = WEEK.catalogue()
    data["hosts"].pop("fl-04")
    data["seats"] = [s for s in data["seats"] if s["host"] != "fl-04"]
    data["hosts"]["fl-99"] = {"cards": 8, "margin": "1 GiB"}
    catalogue = work / "fleet.yaml"
    catalogue.write_text(yaml.safe_dump(data))
    return catalogue


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """(Prometheus URL, catalogue, SQLite ledger) of the same week."""
    binary, promtool = prometheus_and_promtool()
    work = tmp_path_factory.mktemp("fleetweek")
    week = WEEK
    catalogue = write_catalogue(work)
    data = backfill(week, work, promtool)
    ledger = work / "ledger.sqlite"
    with open_ledger(ledger) as store:
        store.append_rows(week.readings())
    processes = Processes()
    try:
        url = start_prometheus_on(processes, binary, data, work / "prometheus")
        yield url, catalogue, ledger
    finally:
        processes.stop_all()


def report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["report", *WINDOW, "--json", *args])
    out = capsys.readouterr().out
    assert code == 0
    data: dict[str, Any] = json.loads(out)
    return data


def test_prometheus_report_matches_the_ledger_report(
    fleet: tuple[str, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    url, catalogue, ledger = fleet
    prom = report(capsys, "--prometheus", url, "--catalogue", str(catalogue))
    sql = report(capsys, "--ledger", str(ledger), "--catalogue", str(catalogue))
    assert prom["source"] == "prometheus"
    assert "nearest-rank" in prom["percentile"] and "nearest-rank" in sql["percentile"]

    # Only the catalogue's hosts, named alike on both paths (fl-02 through exported_host).
    for data in (prom, sql):
        assert data["ignored_hosts"] == ["fl-04"]
        assert [(u["host"], u["kind"]) for u in data["unusable_hosts"]] == [("fl-99", "absent")]
        assert {c["host"] for c in data["cards"]} == {"fl-00", "fl-01", "fl-02", "fl-03", "fl-05"}
    assert any(s["host"] == "fl-02" for s in prom["seats"])

    # Seats: the same rows, the same percentiles (nearest rank on both paths), drifts and flags.
    prom_seats = {(s["seat"], s["card"]): s for s in prom["seats"]}
    sql_seats = {(s["seat"], s["card"]): s for s in sql["seats"]}
    assert set(prom_seats) == set(sql_seats)
    for key, row in sql_seats.items():
        other = prom_seats[key]
        for name in ("samples", "p50_bytes", "p95_bytes", "max_bytes", "drift_bytes"):
            assert other[name] == row[name], (key, name)
        for name in ("first_p50_bytes", "last_p50_bytes", "growth_bytes", "flagged", "grew"):
            assert other[name] == row[name], (key, name)
    leak = prom_seats[("fl-00-g1-a", 1)]
    assert leak["grew"] and leak["growth_bytes"] > 2 * GIB

    # The reserve broken one afternoon, by the seat that spilled onto its card.
    (prom_reserve,) = prom["reserves"]
    (sql_reserve,) = sql["reserves"]
    assert prom_reserve["violations"] == sql_reserve["violations"] == SPILL[1] - SPILL[0]
    for key in ("first_at", "last_at", "worst_bytes"):
        assert prom_reserve[key] == sql_reserve[key], key
    assert prom_reserve["holders"][0].startswith("`fl-00-g6-b`")

    # Cards: the same used percentiles and maximum, and lowest free, when first reached too.
    sql_cards = {(c["host"], c["card"]): c for c in sql["cards"]}
    for card in prom["cards"]:
        twin = sql_cards[(card["host"], card["card"])]
        same = ("samples", "used_p50_bytes", "used_p95_bytes", "used_max_bytes", "min_free_bytes")
        for key in (*same, "min_free_at"):
            assert card[key] == twin[key], (card["host"], card["card"], key)

    # The foreign notebook, and the host whose series stop mid-week.
    assert [(f["host"], f["card"]) for f in prom["foreign"]] == [("fl-03", 2)]
    assert any(
        "fl-05: its gpuplan_snapshot_timestamp_seconds series stop at 2026-09-09T11:59:00Z" in n
        for n in prom["notes"]
    )


def test_prometheus_percentiles_are_nearest_rank(
    fleet: tuple[str, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """One golden figure the change to nearest rank moved, stated by hand: fl-00-g0-a's median
    over the window's first part."""
    url, catalogue, _ = fleet
    prom = report(capsys, "--prometheus", url, "--catalogue", str(catalogue))
    row = next(s for s in prom["seats"] if s["seat"] == "fl-00-g0-a")
    # The first part is a quarter of the window from its first sample, (3 days − 1 min) // 4 =
    # 64,785 s: minutes 0 … 1,079, 1,080 samples. Its median is the sample at rank
    # ceil(0.5 × 1,080) = 540.
    (seat,) = [p for p in WEEK.processes(0) if p.seat == "fl-00-g0-a"]
    samples = sorted(WEEK.value(0, seat, t) or 0 for t in range(1080))
    assert row["first_p50_bytes"] == samples[540 - 1] == 30 * GIB - 512 * MIB + 31 * 8 * MIB
    # quantile_over_time(0.5) took the mean of ranks 540 and 541, 4 MiB more: a value the seat
    # never held, and what the golden said before.
    interpolated = (samples[540 - 1] + samples[540]) // 2
    assert interpolated == 31_939_624_960 == row["first_p50_bytes"] + 4 * MIB
    assert interpolated not in samples


def test_both_paths_chart_the_same_headroom(fleet: tuple[str, Path, Path]) -> None:
    """The charts' data model is one: the lowest free per bucket and the margin agree."""
    from datetime import UTC, datetime, timedelta

    from inventory.history.ledger import LedgerHistory
    from inventory.history.prometheus import PromClient, PrometheusHistory
    from placement.report.charts import headroom, worst_first
    from placement.report.figures import build_report
    from placement.report.from_prometheus import build_prometheus_report
    from placement.report.rows import parse_threshold, window_since
    from seats.loader import load_catalogue

    url, catalogue_path, ledger = fleet
    catalogue = load_catalogue(catalogue_path)
    end = int(datetime(2026, 9, 10, tzinfo=UTC).timestamp())
    window = window_since(timedelta(days=3), end)
    now, threshold = datetime(2026, 9, 10, tzinfo=UTC), parse_threshold("5%,1GiB")
    prom, _ = build_prometheus_report(
        PrometheusHistory(PromClient(url), step_s=60),
        catalogue,
        window,
        now=now,
        threshold=threshold,
    )
    with open_ledger(ledger, readonly=True) as store:
        latest = [
            s for h in catalogue.hosts for s in store.snapshots(h, now - timedelta(minutes=1), now)
        ]
        sql = build_report(
            LedgerHistory(store.connection),
            catalogue,
            window,
            latest,
            ledger_name="l",
            now=now,
            threshold=threshold,
        )
    prom_charts = {(c.host, c.card): c for c in prom.charts}
    sql_charts = {(c.host, c.card): c for c in sql.charts}
    assert set(prom_charts) == set(sql_charts)
    for key, chart in sql_charts.items():
        twin = prom_charts[key]
        assert twin.times_s == chart.times_s and twin.margin_bytes == chart.margin_bytes == GIB
        assert headroom(twin).lowest_free_bytes == headroom(chart).lowest_free_bytes, key
    # fl-00 card 7, where the spill took 6 GiB one afternoon: its lowest free is then.
    spill = headroom(prom_charts[("fl-00", 7)])
    assert spill.lowest_free_at_s is not None
    assert SPILL[0] * 60 <= spill.lowest_free_at_s - WEEK.start_s < SPILL[1] * 60
    # The fleet's panels come in the same order, worst first, on both paths.
    assert [h for h, _ in worst_first(prom.charts)] == [h for h, _ in worst_first(sql.charts)]


# The goldens of both paths over this fleet. The Prometheus ones changed once since they were
# first written, where a percentile moved from quantile_over_time's interpolation to nearest rank
# (test_prometheus_percentiles_are_nearest_rank states one by hand). The Prometheus URL (a free
# port) reads as PROMETHEUS in them; the HTML (its 40 charts inline) is kept as its SHA-256.
# GPUPLAN_UPDATE_GOLDEN=1 rewrites them.
GOLDEN = Path(__file__).parent / "golden" / "fleet"
URL_MARK = "PROMETHEUS"


def render_fleet(url: str, catalogue: Path, ledger: Path, out: Path) -> dict[str, bytes]:
    """The Prometheus report (JSON, Markdown, HTML digest) and the ledger's JSON, by file name."""
    import hashlib

    from placement.cli import report as report_command

    made: dict[str, bytes] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report_command, "utc_now", lambda: NOW)
        for name, fmt, source in (
            ("prometheus.json", "json", ["--prometheus", url]),
            ("prometheus.md", "md", ["--prometheus", url]),
            ("prometheus.html", "html", ["--prometheus", url]),
            ("ledger.json", "json", ["--ledger", str(ledger)]),
        ):
            target = out / name
            args = ["report", *WINDOW, "--catalogue", str(catalogue), *source]
            assert main([*args, "--format", fmt, "--out", str(target)]) == 0
            text = target.read_bytes().replace(url.rstrip("/").encode(), URL_MARK.encode())
            text = text.replace(str(ledger).encode(), b"LEDGER")
            if fmt == "html":
                name, text = f"{name}.sha256", f"{hashlib.sha256(text).hexdigest()}\n".encode()
            made[name] = text
    return made


def test_both_reports_of_the_fleet_are_byte_identical(
    fleet: tuple[str, Path, Path], tmp_path: Path
) -> None:
    url, catalogue, ledger = fleet
    made = render_fleet(url, catalogue, ledger, tmp_path)
    if os.environ.get("GPUPLAN_UPDATE_GOLDEN"):
        for name, text in made.items():
            (GOLDEN / name).write_bytes(text)
    assert sorted(made) == sorted(p.name for p in GOLDEN.iterdir())
    for name, text in made.items():
        assert text == (GOLDEN / name).read_bytes(), name


def test_one_history_from_the_ledger_and_from_prometheus(fleet: tuple[str, Path, Path]) -> None:
    """fl-00's afternoon of the spill, as moments and rollups: the same from both sources, but
    for the command lines, which Prometheus does not keep."""
    from dataclasses import replace
    from datetime import timedelta

    from inventory.history.ledger import LedgerHistory
    from inventory.history.prometheus import PromClient, PrometheusHistory

    url, _, ledger = fleet
    start = datetime.fromtimestamp(WEEK.start_s, UTC) + timedelta(minutes=SPILL[0] - 30)
    end = start + timedelta(hours=2)
    prom = PrometheusHistory(PromClient(url))
    with open_ledger(ledger, readonly=True) as store:
        sql = LedgerHistory(store.connection)
        moments = list(sql.moments("fl-00", start, end))
        rollups = sql.rollups("fl-00", start, end)
    assert len(moments) == 120 and moments[0].taken_at == start
    # Prometheus keeps no command lines; a moment arrived when it was first scraped, at its
    # snapshot's time in this fleet (the ledger, filled by append_rows, records no arrival).
    without_lines = [
        replace(
            moment,
            arrived_at=moment.taken_at,
            cards=tuple(
                replace(c, processes=tuple(replace(p, cmdline=None) for p in c.processes))
                for c in moment.cards
            ),
        )
        for moment in moments
    ]
    assert list(prom.moments("fl-00", start, end)) == without_lines
    seen = prom.rollups("fl-00", start, end)
    assert seen.cards == rollups.cards and len(seen.cards) == 3 * 8  # 3 hours touched, 8 cards
    assert seen.commands == tuple(replace(c, cmdline=None) for c in rollups.commands)
    # Card 7, held whole for flash-next, while fl-00-g6-b spilled 6 GiB onto it from 13:00.
    spill = [c for c in seen.commands if c.card == 7 and c.seat == "fl-00-g6-b"]
    assert [c.max_bytes for c in spill] == [6 * GIB, 6 * GIB]


def test_a_report_without_charts_asks_none_and_reads_the_same_figures(
    fleet: tuple[str, Path, Path],
) -> None:
    """JSON prints no chart: its report asks no chart bucket, and every figure it prints is the
    one the charted report reads (the cards read for their most unexplained are chosen alike)."""
    from dataclasses import replace
    from datetime import timedelta

    from inventory.history.prometheus import PromClient, PrometheusHistory
    from placement.report.from_prometheus import build_prometheus_report
    from placement.report.rows import parse_threshold, window_since
    from seats.loader import load_catalogue

    url, catalogue_path, _ = fleet
    catalogue = load_catalogue(catalogue_path)
    window = window_since(timedelta(days=3), int(NOW.timestamp()))
    queries: dict[bool, int] = {}
    reports = {}
    for charts in (True, False):
        client = PromClient(url)
        reports[charts], _ = build_prometheus_report(
            PrometheusHistory(client, step_s=60),
            catalogue,
            window,
            now=NOW,
            threshold=parse_threshold("5%,1GiB"),
            charts=charts,
        )
        queries[charts] = client.stats.queries
    plain, charted = reports[False], reports[True]
    # The charts' three range queries (used, seats, free), once per label naming hosts: `host`,
    # and `exported_host` for fl-02.
    assert queries[True] - queries[False] == 3 * 2
    assert plain.charts == () and len(charted.charts) == 5 * 8
    assert replace(charted, charts=()) == plain
    # fl-01 card 3 gained 1 GiB no seat explains on the last day: found without the charts too.
    card = next(c for c in plain.cards if (c.host, c.card) == ("fl-01", 3))
    assert card.unexplained_max_bytes == GIB
