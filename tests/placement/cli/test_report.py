"""`gpuplan report` on the command line: outputs, files and every exit code."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from placement.cli.main import main
from tests.placement.report.test_figures import (
    SMALL_CATALOGUE,
    TOTAL,
    small_snapshots,
    write_ledger,
)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    catalogue = tmp_path / "small.yaml"
    catalogue.write_text(yaml.safe_dump(SMALL_CATALOGUE), encoding="utf-8")
    return catalogue, write_ledger(tmp_path / "l.sqlite", small_snapshots())


def test_markdown_to_stdout(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    catalogue, ledger = files
    assert main(["report", "--ledger", str(ledger), "--catalogue", str(catalogue)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Capacity report · 7 d to 2026-09-14T08:19:00Z")
    assert "## Headline" in out and "## Reserves" in out and "## LoRA carriers" in out
    assert "Charts are written as SVG files with --out DIR." in out


def test_markdown_with_out_writes_charts(files: tuple[Path, Path], tmp_path: Path) -> None:
    catalogue, ledger = files
    out = tmp_path / "rep"
    assert (
        main(["report", "--ledger", str(ledger), "--catalogue", str(catalogue), "--out", str(out)])
        == 0
    )
    text = (out / "report.md").read_text()
    for index in (0, 1):
        svg = out / f"chart-h1-gpu{index}.svg"
        markup = svg.read_text(encoding="utf-8")
        assert markup.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
        assert f"h1 card {index}: headroom" in markup
        assert f"]({svg.name})" in text
    assert sorted(p.name for p in out.iterdir()) == [
        "chart-h1-gpu0.svg",
        "chart-h1-gpu1.svg",
        "report.md",
    ]


def test_html_embeds_the_charts_the_markdown_links(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    catalogue, ledger = files
    argv = ["report", "--ledger", str(ledger), "--catalogue", str(catalogue)]
    assert main([*argv, "--format", "html", "--out", str(tmp_path / "h")]) == 0
    page = (tmp_path / "h" / "report.html").read_text()
    # Inline SVG, one per card: no image inside or beside the page, and nothing to fetch.
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg"') == 2
    assert page.count("</svg>") == 2
    assert "data:image" not in page and "<script" not in page and "<img" not in page
    assert [p.name for p in (tmp_path / "h").iterdir()] == ["report.html"]  # self-contained
    # One renderer: the Markdown's files are the very charts the page shows.
    assert main([*argv, "--out", str(tmp_path / "m")]) == 0
    for index in (0, 1):
        assert (tmp_path / "m" / f"chart-h1-gpu{index}.svg").read_text(encoding="utf-8") in page


def test_json_has_schema_and_raw_bytes(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue, ledger = files
    argv = [
        "report",
        "--ledger",
        str(ledger),
        "--catalogue",
        str(catalogue),
        "--format",
        "json",
        "--week",
        "2026-W38",
    ]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == 1 and data["window"]["label"] == "2026-W38"
    assert data["cards"][0]["total_bytes"] == TOTAL and isinstance(
        data["cards"][0]["used_p95_bytes"], int
    )
    assert data["reserves"][0]["violations"] == 3


@pytest.mark.parametrize(
    "extra",
    [
        ["--week", "2026-W99"],
        ["--week", "last week"],
        ["--since", "soon"],
        ["--drift-threshold", "5 GB"],
        ["--until", "yesterday"],
        ["--week", "2026-W38", "--until", "2026-09-16T00:00:00Z"],
        ["--week", "2026-W38", "--since", "7d"],
        ["--format", "pdf"],
    ],
)
def test_bad_arguments_exit_2(
    files: tuple[Path, Path], extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue, ledger = files
    assert main(["report", "--ledger", str(ledger), "--catalogue", str(catalogue), *extra]) == 2
    assert capsys.readouterr().err


def test_no_catalogue_exits_2(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, ledger = files
    assert main(["report", "--ledger", str(ledger)]) == 2
    assert "no catalogue" in capsys.readouterr().err


def test_missing_ledger_exits_3(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue, _ = files
    assert (
        main(["report", "--ledger", str(tmp_path / "none.sqlite"), "--catalogue", str(catalogue)])
        == 3
    )
    assert "no such file" in capsys.readouterr().err


def test_foreign_sqlite_file_exits_3_and_is_left_alone(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue, _ = files
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE photos(id INTEGER)")
    before = other.read_bytes()
    assert main(["report", "--ledger", str(other), "--catalogue", str(catalogue)]) == 3
    assert "another application" in capsys.readouterr().err
    assert other.read_bytes() == before


def test_empty_ledger_and_empty_week_exit_3(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue, ledger = files
    empty = write_ledger(tmp_path / "empty.sqlite", [], decisions=False)
    assert main(["report", "--ledger", str(empty), "--catalogue", str(catalogue)]) == 3
    assert "holds no snapshot yet" in capsys.readouterr().err
    assert (
        main(
            ["report", "--ledger", str(ledger), "--catalogue", str(catalogue), "--week", "2020-W01"]
        )
        == 3
    )
    assert "no snapshot in 2020-W01" in capsys.readouterr().err


def test_report_does_not_write_to_the_ledger(files: tuple[Path, Path], tmp_path: Path) -> None:
    catalogue, ledger = files
    before = ledger.read_bytes()
    assert (
        main(
            [
                "report",
                "--ledger",
                str(ledger),
                "--catalogue",
                str(catalogue),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    assert ledger.read_bytes() == before
