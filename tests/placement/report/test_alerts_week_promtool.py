"""The week's two alerts as Prometheus runs them: `promtool test rules` on input series that move.

`GpuplanCardFillingUp`: eight days of hourly card figures of fv-ml1, one card per case (falling
and short, flat and short, falling with room, full and steady). `GpuplanSeatCannotRestart`: three
hours of minute samples of card 0 as recorded, while cyberprev grows by 1 GiB for the middle
hour and vllm-voices' gate on a restart goes short, then back.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from placement.fit.engines import gate_rule, requested_bytes
from placement.report.alerts import CANNOT_RESTART, FILLING_UP, build_alerts, render_rules
from seats.loader import load_catalogue
from seats.units import GiB, MiB
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed (Debian: apt-get install prometheus); "
    "the week's alerts are not checked by Prometheus here",
)
Json = dict[str, Any]

CATALOGUE = load_catalogue(FV_ML1_CATALOGUE)
RECORDED = json.loads(FV_ML1_SNAPSHOT.read_text())
TOTAL = RECORDED["cards"][0]["total_bytes"]  # 102,625,181,696 B on every card
RESERVED = RECORDED["cards"][0]["reserved_bytes"]  # 652,214,272 B
CUDA_TOTAL = TOTAL - RESERVED  # 101,972,967,424 B = 94.97 GiB
MARGIN = CATALOGUE.hosts["fv-ml1"].margin_bytes  # 256 MiB
CONTEXT = CATALOGUE.hosts["fv-ml1"].cuda_context_bytes  # 1,183 MiB


def _labels(name: str, **labels: str) -> str:
    every = {"host": "fv-ml1", "job": "gpuplan", "instance": "fv-ml1:9835", **labels}
    inner = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(every.items()))
    return f"{name}{{{inner}}}"


def _card_series(gpu: int, free: str, steps: int) -> list[Json]:
    """One card's total, driver reserve and free (`free` in promtool's expanding notation, over
    `steps` + 1 samples)."""
    uuid = RECORDED["cards"][gpu]["uuid"]
    return [
        {
            "series": _labels("gpuplan_card_total_bytes", gpu=str(gpu), uuid=uuid),
            "values": f"{TOTAL}x{steps}",
        },
        {
            "series": _labels("gpuplan_card_reserved_bytes", gpu=str(gpu), uuid=uuid),
            "values": f"{RESERVED}x{steps}",
        },
        {"series": _labels("gpuplan_card_free_bytes", gpu=str(gpu), uuid=uuid), "values": free},
    ]


def _promtool_test(
    tmp_path: Path, series: list[Json], interval: str, cases: list[Json]
) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    rules = tmp_path / "gpuplan-alerts.yml"
    rules.write_text(render_rules(build_alerts(CATALOGUE), source="test"))
    test = {
        "rule_files": [rules.name],
        "evaluation_interval": interval,
        "tests": [{"interval": interval, "input_series": series, "alert_rule_test": cases}],
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 20))
    return subprocess.run(
        [PROMTOOL, "test", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# --- GpuplanCardFillingUp ---------------------------------------------------------------

HOURS = 8 * 24  # samples at 0h … 192h
PER_HOUR_4GIB_A_DAY = 4 * GiB // 24
PER_HOUR_6GIB_A_DAY = 6 * GiB // 24


def _falling(start_bytes: int, per_hour: int) -> str:
    return f"{start_bytes}-{per_hour}x{HOURS}"


def _filling_summary(room_text: str) -> str:
    return (
        f"fv-ml1 card 0 has {room_text} of room (free less its margin of 256.00 MiB), under 15% "
        "of its CUDA total, and its daily lowest room over 7 days falls below zero within 4 days"
    )


@pytest.mark.slow
def test_a_card_falling_4_gib_a_day_into_its_last_15_percent_fires(tmp_path: Path) -> None:
    series = [
        # card 0: 40 GiB free, 4 GiB less every day: 12 GiB at 7d, below zero 3 days later.
        *_card_series(0, _falling(40 * GiB, PER_HOUR_4GIB_A_DAY), HOURS),
        # card 1: 10 GiB free all week: short of 15 % (14.25 GiB), but not falling.
        *_card_series(1, f"{10 * GiB}x{HOURS}", HOURS),
        # card 2: 62 GiB, 6 GiB less a day: its forecast crosses zero, yet 20 GiB are left at 7d.
        *_card_series(2, _falling(62 * GiB, PER_HOUR_6GIB_A_DAY), HOURS),
        # card 3: full and steady (0.5 GiB): short, and no trend.
        *_card_series(3, f"{GiB // 2}x{HOURS}", HOURS),
    ]
    room_at_7d = 40 * GiB - 7 * 24 * PER_HOUR_4GIB_A_DAY - MARGIN
    assert room_at_7d == 12616466544  # 11.75 GiB, under 15 % of 94.97 GiB (15,295,945,113.6 B)
    assert room_at_7d < 0.15 * CUDA_TOTAL
    # Card 2 at 7d: 20 GiB free, 19.75 GiB of room: above 15 %, so nothing, whatever the trend.
    assert 62 * GiB - 7 * 24 * PER_HOUR_6GIB_A_DAY - MARGIN > 0.15 * CUDA_TOTAL
    fired = {
        "exp_labels": {"severity": "warning", "host": "fv-ml1", "gpu": "0"},
        "exp_annotations": {
            "summary": _filling_summary("11.75GiB"),
            "description": "Find whose bytes grow day after day on the card (gpuplan report: "
            "co-tenant patterns; gpuplan ledger --window 7d) and move or cap it before the card "
            "runs out.",
        },
    }
    cases = [
        # Day 1: one daily minimum so far, no forecast; card 0 has room anyway.
        {"eval_time": "1d", "alertname": FILLING_UP, "exp_alerts": []},
        {"eval_time": "7d", "alertname": FILLING_UP, "exp_alerts": [fired]},
    ]
    result = _promtool_test(tmp_path, series, "1h", cases)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_a_card_freed_after_its_fall_stops_filling_up(tmp_path: Path) -> None:
    # Card 0 falls 4 GiB a day for 7 days (40 → 12 GiB), then a seat moves off it: 40 GiB again.
    series = _card_series(0, f"{40 * GiB}-{PER_HOUR_4GIB_A_DAY}x168 {40 * GiB}x24", 193)
    fired = {
        "exp_labels": {"severity": "warning", "host": "fv-ml1", "gpu": "0"},
        "exp_annotations": {
            "summary": _filling_summary("11.75GiB"),
            "description": "Find whose bytes grow day after day on the card (gpuplan report: "
            "co-tenant patterns; gpuplan ledger --window 7d) and move or cap it before the card "
            "runs out.",
        },
    }
    cases = [
        {"eval_time": "7d", "alertname": FILLING_UP, "exp_alerts": [fired]},
        # The daily minima still fall (the forecast still crosses zero), but the room is back.
        {"eval_time": "170h", "alertname": FILLING_UP, "exp_alerts": []},
    ]
    result = _promtool_test(tmp_path, series, "1h", cases)
    assert result.returncode == 0, result.stdout + result.stderr


# --- GpuplanSeatCannotRestart -----------------------------------------------------------


def _process(gpu: int, seat: str, pid: int, values: str) -> Json:
    uuid = RECORDED["cards"][gpu]["uuid"]
    return {
        "series": _labels(
            "gpuplan_process_used_bytes", gpu=str(gpu), uuid=uuid, pid=str(pid), seat=seat
        ),
        "values": values,
    }


def _restart_alert(seat: str, short_text: str) -> Json:
    return {
        "exp_labels": {"severity": "warning", "host": "fv-ml1", "gpu": "0", "seat": seat},
        "exp_annotations": {
            "summary": f"{seat} on fv-ml1 card 0 could not restart now: its gate would be short by "
            f"{short_text} (free + its own bytes - 1.16 GiB CUDA context < its util request)",
            "description": f"Do not restart {seat} (a redeploy or a crash leaves it down) until its "
            "neighbours shrink, or lower its util to what it holds (gpuplan check --window 7d "
            "names who grew into the difference and when).",
        },
    }


@pytest.mark.slow
def test_a_neighbour_growing_for_an_hour_leaves_vllm_voices_unable_to_restart(
    tmp_path: Path,
) -> None:
    card = RECORDED["cards"][0]
    own = {p["pid"]: p["used_bytes"] for p in card["processes"]}
    free = card["free_bytes"]
    # cyberprev (pid 4101) takes 1 GiB more from 60m to 119m.
    grown = f"{free}x59 {free - GiB}x59 {free}x59"
    series = [
        *_card_series(0, grown, 179),
        _process(0, "cyberprev", 4101, f"{own[4101]}x59 {own[4101] + GiB}x59 {own[4101]}x59"),
        _process(0, "gen-small", 4117, f"{own[4117]}x179"),
        _process(0, "parakeet-stt", 4130, f"{own[4130]}x179"),
        _process(0, "vllm-voices", 4121, f"{own[4121]}x179"),
    ]
    voices = next(s for s in CATALOGUE.seats if s.name == "vllm-voices")
    util = gate_rule(voices.engine, propose=False).util
    assert util is not None
    request = requested_bytes(util, CUDA_TOTAL)
    short = request - (free - GiB + own[4121] - CONTEXT)
    assert (request, short) == (11217026417, 307641713)  # 0.11 × 94.97 GiB; 293.4 MiB short
    assert f"{short / MiB:.4g}MiB" == "293.4MiB"
    gen_small = _restart_alert("gen-small", "8.878GiB")
    squeezed = _restart_alert("gen-small", "9.878GiB")  # cyberprev's GiB comes off its gate too
    cases = [
        {"eval_time": "50m", "alertname": CANNOT_RESTART, "exp_alerts": [gen_small]},
        # vllm-voices' alert is pending (for 5m) at 63m; firing at 110m.
        {"eval_time": "63m", "alertname": CANNOT_RESTART, "exp_alerts": [squeezed]},
        {
            "eval_time": "110m",
            "alertname": CANNOT_RESTART,
            "exp_alerts": [squeezed, _restart_alert("vllm-voices", "293.4MiB")],
        },
        # cyberprev gives the GiB back at 120m: vllm-voices could restart again.
        {"eval_time": "150m", "alertname": CANNOT_RESTART, "exp_alerts": [gen_small]},
    ]
    result = _promtool_test(tmp_path, series, "1m", cases)
    assert result.returncode == 0, result.stdout + result.stderr


def test_only_request_gated_seats_with_a_match_get_a_restart_rule() -> None:
    built = build_alerts(CATALOGUE)
    rule = next(r for r in built.rules if r.alert == CANNOT_RESTART)
    named = [s.matchers[-1][2] for s in rule.selectors if s.metric == "gpuplan_process_used_bytes"]
    # The five vLLM seats (utils 0.40, 0.48, 0.11, 0.62, 0.81); parakeet, embed and rerank have
    # no gate, flash-next is planned.
    assert named == ["cyberprev", "gen-small", "vllm-voices", "chat-large", "code-assist"]
    assert "ceil(0.48 * " in rule.expr and f" - {CONTEXT})" in rule.expr
