"""The demo ledger generator: seeded and repeatable, and it holds the story it promises."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from inventory.ledger.queries import ledger_digest
from inventory.ledger.store import open_ledger
from inventory.snapshot import Snapshot
from placement.cli.main import main
from placement.report.demo import (
    DEMO_DRIFT_BYTES,
    DEMO_FOREIGN_CMDLINE,
    demo_note,
    demo_snapshots,
    plan_story,
    record_demo_checks,
    write_demo,
)
from seats.errors import BadInputError
from seats.model import Catalogue
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT


def build(path: Path, catalogue: Catalogue, base: Snapshot, *, seed: int, days: int = 1) -> str:
    story = plan_story(catalogue, base, end=base.taken_at, days=days)
    with open_ledger(path) as ledger:
        kept = write_demo(ledger, catalogue, base, story, seed=seed)
        record_demo_checks(ledger, catalogue, story, kept)
        return ledger_digest(ledger.connection)


@pytest.mark.slow
def test_same_seed_same_digest_other_seed_differs(
    tmp_path: Path, fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    one = build(tmp_path / "a.sqlite", fv_ml1, fv_ml1_snapshot, seed=5)
    two = build(tmp_path / "b.sqlite", fv_ml1, fv_ml1_snapshot, seed=5)
    three = build(tmp_path / "c.sqlite", fv_ml1, fv_ml1_snapshot, seed=6)
    assert one == two != three


@pytest.mark.slow
def test_bulk_rows_equal_the_snapshot_objects(
    tmp_path: Path, fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    # The fast executemany path and Ledger.append_many of the same seeded week store the same rows.
    story = plan_story(fv_ml1, fv_ml1_snapshot, end=fv_ml1_snapshot.taken_at, days=1)
    with open_ledger(tmp_path / "bulk.sqlite") as ledger:
        write_demo(ledger, fv_ml1, fv_ml1_snapshot, story, seed=3)
        bulk = ledger_digest(ledger.connection)
    with open_ledger(tmp_path / "objects.sqlite") as ledger:
        assert ledger.append_many(demo_snapshots(fv_ml1, fv_ml1_snapshot, story, seed=3)) == 1440
        assert ledger_digest(ledger.connection) == bulk


@pytest.mark.slow
def test_the_story_is_in_the_rows(
    tmp_path: Path, fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    story = plan_story(fv_ml1, fv_ml1_snapshot, end=fv_ml1_snapshot.taken_at, days=3)
    assert (story.drift_seat, story.drift_card, story.foreign_card, story.check_seat) == (
        "embed",
        1,
        3,
        "vllm-voices",
    )
    assert story.minutes == 3 * 1440 and story.end == fv_ml1_snapshot.taken_at.replace(second=0)
    path = tmp_path / "week.sqlite"
    with open_ledger(path) as ledger:
        kept = write_demo(ledger, fv_ml1, fv_ml1_snapshot, story, seed=1)
        checks = record_demo_checks(ledger, fv_ml1, story, kept)
        conn = ledger.connection
        assert conn.execute("SELECT COUNT(*) FROM snapshots").fetchone()[0] == 3 * 1440
        assert conn.execute("SELECT COUNT(*) FROM cards").fetchone()[0] == 4 * 3 * 1440
        # Every process of a seat was attributed at generation, as a poller with a catalogue does.
        assert (
            conn.execute(
                "SELECT COUNT(*) FROM processes WHERE seat IS NULL AND cmdline != ?",
                (DEMO_FOREIGN_CMDLINE,),
            ).fetchone()[0]
            == 0
        )
        # Drift: embed's first and last readings differ by about DEMO_DRIFT_BYTES (± daily load).
        first, last = (
            conn.execute(
                "SELECT p.used_bytes FROM processes p JOIN snapshots s ON s.id = p.snapshot_id "
                f"WHERE p.seat = 'embed' ORDER BY s.taken_at_s {order} LIMIT 1"
            ).fetchone()[0]
            for order in ("ASC", "DESC")
        )
        assert abs((last - first) - DEMO_DRIFT_BYTES) < DEMO_DRIFT_BYTES // 5
        # The foreign process: on card 3 only, only that afternoon, every minute of it.
        start, end, n, cards = conn.execute(
            "SELECT MIN(s.taken_at_s), MAX(s.taken_at_s), COUNT(*), COUNT(DISTINCT p.card_idx) FROM processes p "
            "JOIN snapshots s ON s.id = p.snapshot_id WHERE p.cmdline = ?",
            (DEMO_FOREIGN_CMDLINE,),
        ).fetchone()
        assert (start, end + 60, n, cards) == (
            int(story.foreign_start.timestamp()),
            int(story.foreign_end.timestamp()),
            300,
            1,
        )
        # A card never reports more than it has, and v2 free = total − reserve − used.
        assert (
            conn.execute(
                "SELECT COUNT(*) FROM cards WHERE free_bytes < 0 OR free_bytes != total_bytes - reserved_bytes - used_bytes"
            ).fetchone()[0]
            == 0
        )
        decisions = conn.execute(
            "SELECT verdict, reasons FROM decisions ORDER BY decided_at_s"
        ).fetchall()
    # The refused check is the seed's: vllm-voices at util 0.12 fails vLLM's gate on card 0.
    assert [(c.seat, c.util, c.verdict) for c in checks] == [
        ("vllm-voices", "0.12", "refuse"),
        ("vllm-voices", "0.11", "pass"),
    ]
    assert [d[0] for d in decisions] == ["refuse", "pass"]
    assert [r["rule"] for r in json.loads(decisions[0][1])] == ["gate"]


def test_days_out_of_range_is_bad_input(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    with pytest.raises(BadInputError, match="--days 0"):
        plan_story(fv_ml1, fv_ml1_snapshot, end=fv_ml1_snapshot.taken_at, days=0)


def test_short_window_still_has_a_foreign_afternoon(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    story = plan_story(fv_ml1, fv_ml1_snapshot, end=fv_ml1_snapshot.taken_at, days=1)
    assert (
        story.start <= story.foreign_start < story.foreign_end <= story.end + timedelta(minutes=1)
    )
    assert story.start <= story.check_at <= story.end


def demo_args(out: Path, *extra: str) -> list[str]:
    return [
        "demo-ledger",
        "--catalogue",
        str(FV_ML1_CATALOGUE),
        "--snapshot",
        str(FV_ML1_SNAPSHOT),
        "--out",
        str(out),
        "--days",
        "1",
        *extra,
    ]


@pytest.mark.slow
def test_cli_writes_a_marked_demo_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo.sqlite"
    assert main(demo_args(out, "--seed", "9")) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("DEMO ledger") and "refuse" in printed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.sqlite"]  # no WAL or temp file left
    with open_ledger(out, readonly=True) as ledger:
        assert ledger.count() == 1440
        note = demo_note(ledger.connection)
    assert note is not None and "seed 9" in note
    # Exists: refused without --force (2), replaced with it (0), same seed → same rows.
    assert main(demo_args(out, "--seed", "9")) == 2
    assert "--force" in capsys.readouterr().err
    assert main(demo_args(out, "--seed", "9", "--force")) == 0
    assert printed.splitlines()[-1] == capsys.readouterr().out.splitlines()[-1]  # the digest line


def test_cli_force_never_replaces_a_foreign_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "photos.sqlite"
    with sqlite3.connect(out) as connection:
        connection.execute("CREATE TABLE photos(id INTEGER)")
    before = out.read_bytes()
    assert main(demo_args(out, "--force")) == 3
    assert "another application" in capsys.readouterr().err
    assert out.read_bytes() == before


@pytest.mark.parametrize("extra", [["--days", "0"], ["--end", "Tuesday"], ["--seed", "x"]])
def test_cli_bad_input_exits_2(
    tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*demo_args(tmp_path / "d.sqlite"), *extra]) == 2
    assert capsys.readouterr().err
    assert not (tmp_path / "d.sqlite").exists()


@pytest.mark.slow
def test_report_on_the_demo_says_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo.sqlite"
    assert main(demo_args(out)) == 0
    capsys.readouterr()
    assert main(["report", "--ledger", str(out), "--catalogue", str(FV_ML1_CATALOGUE)]) == 0
    text = capsys.readouterr().out
    assert "**DEMO DATA — not measurements.**" in text
    assert "python3 /home/ops/notebooks/probe_embeddings.py" in text
    assert "| flash-next-hold" in text and "300 snapshots" in text
    # Four cards: the Markdown links four SVG files.
    args = ["report", "--ledger", str(out), "--catalogue", str(FV_ML1_CATALOGUE)]
    assert main([*args, "--out", str(tmp_path / "m")]) == 0
    files = sorted((tmp_path / "m").glob("chart-fv-ml1-gpu*.svg"))
    assert len(files) == 4
    markdown = (tmp_path / "m" / "report.md").read_text(encoding="utf-8")
    assert all(f"]({svg.name})" in markdown for svg in files)
    # The page draws the same four inline, each with its three panels' titles.
    assert main([*args, "--format", "html", "--out", str(tmp_path / "r")]) == 0
    page = (tmp_path / "r" / "report.html").read_text()
    charts = re.findall(r"<svg .*?</svg>", page, re.DOTALL)
    assert len(charts) == 4
    for card, chart in enumerate(charts):
        assert f"fv-ml1 · card {card} · headroom" in chart
        assert "drift per seat" in chart and "used memory stacked by seat" in chart


def test_the_default_week_story(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    story = plan_story(fv_ml1, fv_ml1_snapshot, end=fv_ml1_snapshot.taken_at, days=7)
    assert story.minutes == 10080
    assert story.end.isoformat() == "2026-09-16T14:02:00+00:00"
    assert (story.foreign_start.isoformat(), story.foreign_end.isoformat()) == (
        "2026-09-12T13:00:00+00:00",
        "2026-09-12T18:00:00+00:00",
    )
    assert story.check_at.isoformat() == "2026-09-14T10:14:00+00:00"
