"""The report bench's one-core row: measured, or saying why not, never failing the bench."""

from __future__ import annotations

import sys

import pytest

from bench.bench_report import TARGET_ONE_CORE_S, _one_core_row, _Runs


def test_a_run_that_fails_is_said_not_timed() -> None:
    runs = _Runs()
    runs.time([sys.executable, "-c", "import sys; sys.exit('taskset: failed to set pid 0')"])
    assert runs.walls == []
    row = _one_core_row(runs.summary())
    assert "not measured: `taskset -c 0` failed: taskset: failed to set pid 0" in row


def test_a_required_run_that_fails_stops_the_bench() -> None:
    import subprocess

    with pytest.raises(subprocess.CalledProcessError):
        _Runs().time([sys.executable, "-c", "raise SystemExit(3)"], required=True)


def test_missing_taskset_is_said() -> None:
    assert "not measured: taskset is not installed" in _one_core_row("taskset is not installed")


def test_the_row_gives_wall_cpu_target_and_ratio() -> None:
    met = _one_core_row({"median_s": 1.5, "cpu_s": 1.4})
    assert "1.50 s (CPU 1.40 s; 0.75 × the target)" in met and met.endswith("| yes |")
    missed = _one_core_row({"median_s": 2 * TARGET_ONE_CORE_S, "cpu_s": 3.9})
    assert "2.00 × the target" in missed and missed.endswith("| **no** |")


def test_the_markdown_row_says_what_it_timed() -> None:
    row = _one_core_row({"median_s": 1.0, "cpu_s": 0.9}, "`--format md` with its SVG files")
    assert row.startswith("| report `--format md` with its SVG files on one core (`taskset -c 0`)")
    assert "1.00 s (CPU 0.90 s; 0.50 × the target)" in row
