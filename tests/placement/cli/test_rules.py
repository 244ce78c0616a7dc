"""`gpuplan rules`: the recording rules that keep the hourly rollups, as Prometheus runs them
(`promtool check rules`, and `promtool test rules` on one recorded value)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from inventory.prometheus.hours import recording_rules
from placement.cli.main import main

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (Debian: apt-get install prometheus)"
)
GIB = 2**30


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def test_rules_prints_one_group_of_every_rollup(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    data = yaml.safe_load(capsys.readouterr().out)
    (group,) = data["groups"]
    assert (group["name"], group["interval"]) == ("gpuplan-rollups", "1h")
    records = {r["record"]: r["expr"] for r in group["rules"]}
    assert len(records) == len(recording_rules()) == 15
    # Each the hour that ended 5 minutes before, less a millisecond: evaluations tile time.
    assert records["gpuplan:card_free_bytes:min_1h"] == (
        "min_over_time(gpuplan_card_free_bytes[3599999ms] offset 5m)"
    )
    assert records["gpuplan:process_used_bytes:max_1h"] == (
        "max_over_time(gpuplan_process_used_bytes[3599999ms] offset 5m)"
    )
    assert records["gpuplan:snapshot_timestamp_seconds:changes_1h"] == (
        "changes(gpuplan_snapshot_timestamp_seconds[3599999ms] offset 5m)"
    )
    # The report's own: samples in error, and any reading of NVML v1.
    assert records["gpuplan:card_error:sum_1h"] == (
        "sum_over_time(gpuplan_card_error[3599999ms] offset 5m)"
    )
    assert records["gpuplan:card_nvml_memory_version:min_1h"] == (
        "min_over_time(gpuplan_card_nvml_memory_version[3599999ms] offset 5m)"
    )


def test_rules_out_writes_the_file_and_refuses_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "gpuplan-rollups.yml"
    assert main(["rules", "--out", str(target)]) == 0
    assert "wrote 15 rules to" in capsys.readouterr().err
    assert yaml.safe_load(target.read_text())["groups"][0]["name"] == "gpuplan-rollups"
    assert main(["rules", "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


@needs_promtool
@pytest.mark.slow
def test_promtool_checks_the_rules_and_records_an_afternoon_dip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "gpuplan-rollups.yml"
    assert main(["rules", "--out", str(rules)]) == 0
    capsys.readouterr()
    checked = promtool("check", "rules", rules)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 15 rules found" in checked.stdout
    # One card, 100 GiB free every minute but for minutes 70 … 74, when a 20 GiB model loads.
    free = f"{100 * GIB}x69 {80 * GIB}x4 {100 * GIB}x59"
    card = 'host="fv-ml1",gpu="1"'
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": f"gpuplan_card_free_bytes{{{card}}}", "values": free}],
                "promql_expr_test": [
                    # Evaluated every hour, each over the hour ending 5 min before: the one
                    # recorded at 120 min ([55 min, 115 min]) holds the dip, those at 60 and
                    # 180 min do not.
                    {
                        "expr": "gpuplan:card_free_bytes:min_1h",
                        "eval_time": at,
                        "exp_samples": [
                            {"labels": f"gpuplan:card_free_bytes:min_1h{{{card}}}", "value": v}
                        ],
                    }
                    for at, v in (("60m", 100 * GIB), ("120m", 80 * GIB), ("180m", 100 * GIB))
                ],
            }
        ],
    }
    test_file = tmp_path / "test.yml"
    test_file.write_text(yaml.safe_dump(test))
    result = promtool("test", "rules", test_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
