"""`gpuplan check` end to end: golden outputs, every exit code, --json shapes, the ledger's decisions.

The clock is fixed (the snapshot's age decides staleness); paths are relative to the repository
so golden files are the same on every machine. GPUPLAN_UPDATE_GOLDEN=1 rewrites them.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from inventory.fake import FakeNvml
from inventory.ledger.store import open_ledger
from inventory.snapshot import load_snapshot
from placement.cli import check as check_command
from placement.cli import main as cli

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).parent.parent / "golden"
CATALOGUE = "seats/catalogue/fv-ml1.yaml"
BEFORE = "seats/catalogue/fv-ml1-before-voices.snapshot.json"
AFTER = "seats/catalogue/fv-ml1.snapshot.json"
COMPOSE = "tests/placement/data/voices-compose.yaml"
TAKEN = datetime(2026, 9, 16, 11, 40, 5, tzinfo=UTC)  # the before-voices snapshot


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    monkeypatch.delenv("VOICES_UTIL", raising=False)


def at(monkeypatch: pytest.MonkeyPatch, moment: datetime) -> None:
    monkeypatch.setattr(check_command, "utc_now", lambda: moment)


def gpuplan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def golden(name: str, argv: list[str], code: int, out: str, err: str, env: str = "") -> None:
    text = f"$ {env}gpuplan {' '.join(argv)}\n--- exit {code}\n--- stdout\n{out}--- stderr\n{err}"
    path = GOLDEN / name
    if os.environ.get("GPUPLAN_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


# --- golden outputs ----------------------------------------------------------------------------


def test_golden_pass(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    at(monkeypatch, TAKEN + timedelta(minutes=5))
    argv = [
        "check",
        "flash-next",
        "--gpu",
        "3",
        "--util",
        "0.98",
        "--catalogue",
        CATALOGUE,
        "--snapshot",
        BEFORE,
    ]
    code, out, err = gpuplan(capsys, *argv)
    assert code == 0
    assert out.startswith("PASS  flash-next")
    golden("check_pass.txt", argv, code, out, err)


def test_golden_refusal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN + timedelta(minutes=5))
    argv = [
        "check",
        "vllm-voices",
        "--gpu",
        "0",
        "--util",
        "0.12",
        "--catalogue",
        CATALOGUE,
        "--snapshot",
        BEFORE,
    ]
    code, out, err = gpuplan(capsys, *argv)
    assert code == 1
    assert "11.16 GiB" in out and "11.40 GiB" in out and "util ≤ 0.117" in out
    golden("check_refuse.txt", argv, code, out, err)


def test_golden_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A pass with warnings that do not refuse, on a snapshot two hours old (it warns, then decides).
    at(monkeypatch, TAKEN + timedelta(hours=2))
    monkeypatch.setenv("VOICES_UTIL", "0.11")
    argv = ["check", "--compose", COMPOSE, "--catalogue", CATALOGUE, "--snapshot", BEFORE]
    code, out, err = gpuplan(capsys, *argv)
    assert code == 0
    assert "warning: LoRA adapter lv-trial" in out
    assert "deciding on it anyway" in err
    golden("check_warning.txt", argv, code, out, err, env="VOICES_UTIL=0.11 ")


def test_golden_stale(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    at(monkeypatch, TAKEN + timedelta(hours=2))
    argv = [
        "check", "vllm-voices", "--gpu", "0", "--catalogue", CATALOGUE, "--snapshot", BEFORE, "--max-age", "15m",
    ]  # fmt: skip
    code, out, err = gpuplan(capsys, *argv)
    assert code == 3
    assert out == ""
    assert "2.0 h old" in err
    golden("check_stale.txt", argv, code, out, err)


def test_golden_refusal_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN + timedelta(minutes=5))
    argv = [
        "check", "vllm-voices", "--gpu", "0", "--util", "0.12", "--json", "--catalogue", CATALOGUE, "--snapshot", BEFORE,
    ]  # fmt: skip
    code, out, err = gpuplan(capsys, *argv)
    assert code == 1
    data = json.loads(out)
    assert data["schema"] == 1
    assert data["verdict"] == "refuse"
    assert data["seat"] == "vllm-voices" and data["host"] == "fv-ml1" and data["cards"] == [0]
    (reason,) = data["reasons"]
    assert reason["rule"] == "gate" and reason["card"] == 0
    assert reason["room_bytes"] == 11_983_126_528 and reason["need_bytes"] == 12_236_756_091
    assert data["flags"] == [
        "--gpu-memory-utilization",
        "0.12",
        "--kv-cache-memory-bytes",
        "1610612736",
    ]
    assert isinstance(data["warnings"], list)
    assert data["card_figures"][0]["gate_free_bytes"] == 11_983_126_528
    golden("check_refuse.json.txt", argv, code, out, err)


# --- the other replays through the CLI ---------------------------------------------------------


def test_compose_refusal_and_unbounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN + timedelta(minutes=5))
    code, out, _ = gpuplan(
        capsys, "check", "--compose", COMPOSE, "--catalogue", CATALOGUE, "--snapshot", BEFORE
    )
    assert code == 1
    assert "REFUSED  vllm-voices (compose service vllm-voices)" in out
    assert "no GPU, not checked: litellm" in out

    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  newbie:\n    image: vllm/vllm-openai:v0.34.0\n    command: [--model, m]\n"
        "    environment: [CUDA_VISIBLE_DEVICES=0]\n",
        encoding="utf-8",
    )
    argv = [
        "check",
        "--compose",
        str(compose),
        "--json",
        "--catalogue",
        CATALOGUE,
        "--snapshot",
        BEFORE,
    ]
    code, out, _ = gpuplan(capsys, *argv)
    assert code == 1
    data = json.loads(out)
    assert data["schema"] == 1 and data["verdict"] == "refuse"
    (verdict,) = data["verdicts"]
    assert verdict["service"] == "newbie" and verdict["resident_known"] is False
    assert "unbounded" in {reason["rule"] for reason in verdict["reasons"]}


def test_reserve_replays(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN + timedelta(minutes=5))
    code, _, _ = gpuplan(
        capsys, "check", "flash-next", "--gpu", "3", "--catalogue", CATALOGUE, "--snapshot", BEFORE
    )
    assert code == 0
    code, out, _ = gpuplan(
        capsys, "check", "gen-small", "--gpu", "3", "--catalogue", CATALOGUE, "--snapshot", BEFORE
    )
    assert code == 1
    assert "reserve" in out and "flash-next-hold" in out


def test_service_selection_and_catalogue_from_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN + timedelta(minutes=5))
    monkeypatch.setenv("GPUPLAN_CATALOGUE", CATALOGUE)
    monkeypatch.setenv("VOICES_UTIL", "0.11")
    code, out, _ = gpuplan(
        capsys, "check", "--compose", COMPOSE, "--service", "vllm-voices", "--snapshot", BEFORE
    )
    assert code == 0 and out.startswith("PASS")


# --- exit 2 and 3 ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "--snapshot", BEFORE], "name a seat"),
        (["check", "vllm-voices", "--gpu", "0", "--snapshot", BEFORE], "no catalogue"),
        (["check", "nope", "--gpu", "0", "--snapshot", BEFORE, "--catalogue", CATALOGUE], "no seat named"),
        (["check", "vllm-voices", "--gpu", "7", "--snapshot", BEFORE, "--catalogue", CATALOGUE], "no card 7"),
        (["check", "vllm-voices", "--gpu", "0", "--catalogue", CATALOGUE], "no cards to read"),
        (["check", "--compose", COMPOSE, "--util", "0.1", "--snapshot", BEFORE, "--catalogue", CATALOGUE], "apply to a catalogue seat"),
        (["check", "vllm-voices", "--service", "x", "--snapshot", BEFORE, "--catalogue", CATALOGUE], "needs --compose"),
        (["check", "--compose", "absent.yaml", "--snapshot", BEFORE, "--catalogue", CATALOGUE], "no such file"),
        (["check", "vllm-voices", "--util", "abc", "--snapshot", BEFORE, "--catalogue", CATALOGUE], "not a number"),
        (["check", "vllm-voices", "--util", "0", "--snapshot", BEFORE, "--catalogue", CATALOGUE], "not in (0, 1]"),
        (["check", "vllm-voices", "--kv-cache-memory", "2 GB", "--snapshot", BEFORE, "--catalogue", CATALOGUE], "ambiguous"),
    ],
)  # fmt: skip
def test_bad_input_exits_2(
    argv: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    at(monkeypatch, TAKEN + timedelta(minutes=5))
    code, out, err = gpuplan(capsys, *argv)
    assert code == 2
    assert message in err
    assert out == ""


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("services: [unclosed\n", "not valid YAML"),
        ("volumes: {}\n", "services"),
        ("services:\n  v:\n    image: vllm/vllm-openai\n    command: ['--gpu-memory-utilization', '${NOPE}']\n", "NOPE"),
        ("services:\n  v:\n    image: vllm/vllm-openai\n    environment: [CUDA_VISIBLE_DEVICES=5]\n", "no card 5"),
        ("services:\n  v:\n    image: vllm/vllm-openai\n    command: --gpu-memory-utilization 0\n", "--gpu-memory-utilization"),
        ("services:\n  v:\n    image: vllm/vllm-openai\n    command: --gpu-memory-utilization abc\n", "'abc'"),
        ("services:\n  v:\n    image: vllm/vllm-openai\n    command: --kv-cache-memory 12 GB\n", "ambiguous"),
        ("services:\n  db:\n    image: postgres\n", "no service asks for a GPU"),
    ],
)  # fmt: skip
def test_bad_compose_exits_2(
    body: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    at(monkeypatch, TAKEN + timedelta(minutes=5))
    compose = tmp_path / "compose.yaml"
    compose.write_text(body, encoding="utf-8")
    code, _, err = gpuplan(
        capsys, "check", "--compose", str(compose), "--catalogue", CATALOGUE, "--snapshot", BEFORE
    )
    assert code == 2
    assert err.startswith("error: ") and str(compose) in err and message in err


def test_snapshot_with_other_card_count_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN + timedelta(minutes=5))
    data = json.loads((ROOT / BEFORE).read_text())
    data["cards"] = data["cards"][:3]
    short = tmp_path / "three.json"
    short.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = gpuplan(
        capsys, "check", "vllm-voices", "--catalogue", CATALOGUE, "--snapshot", str(short)
    )
    assert code == 2
    assert "3 cards in the snapshot, 4 in the catalogue" in err


def test_card_in_error_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN + timedelta(minutes=5))
    data = json.loads((ROOT / BEFORE).read_text())
    data["cards"][0] = {"index": 0, "error": "GpuIsLost", "processes": []}
    lost = tmp_path / "lost.json"
    lost.write_text(json.dumps(data), encoding="utf-8")
    code, out, _ = gpuplan(
        capsys, "check", "vllm-voices", "--catalogue", CATALOGUE, "--snapshot", str(lost)
    )
    assert code == 3
    assert out.startswith("UNKNOWN") and "GpuIsLost" in out


class _NoNvml:
    """Stands in for PynvmlSource on a machine whose driver library is missing."""

    def __enter__(self) -> FakeNvml:
        return FakeNvml([], absent="NVML Shared Library Not Found")

    def __exit__(self, *exc: object) -> None:
        return None


def test_live_without_nvml_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN)
    monkeypatch.setattr("inventory.poller.PynvmlSource", _NoNvml)
    code, out, err = gpuplan(capsys, "check", "vllm-voices", "--catalogue", CATALOGUE, "--live")
    assert code == 3
    assert out == "" and "no NVML" in err


# --- the ledger --------------------------------------------------------------------------------


def _ledger(tmp_path: Path, snapshot_path: str = BEFORE) -> tuple[Path, int]:
    path = tmp_path / "ledger.sqlite"
    with open_ledger(path) as ledger:
        snapshot_id = ledger.append(load_snapshot(ROOT / snapshot_path))
    return path, snapshot_id


def test_every_verdict_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path, snapshot_id = _ledger(tmp_path)
    now = TAKEN + timedelta(minutes=5)
    at(monkeypatch, now)
    base = ["--catalogue", CATALOGUE, "--ledger", str(path)]
    assert gpuplan(capsys, "check", "vllm-voices", "--gpu", "0", "--util", "0.12", *base)[0] == 1
    assert gpuplan(capsys, "check", "vllm-voices", "--gpu", "0", "--util", "0.11", *base)[0] == 0
    monkeypatch.setenv("VOICES_UTIL", "0.11")
    assert gpuplan(capsys, "check", "--compose", COMPOSE, *base)[0] == 0
    with open_ledger(path, readonly=True) as ledger:
        decisions = ledger.decisions()
        assert ledger.count() == 1  # the snapshot is not stored twice
    assert [d["verdict"] for d in decisions] == ["refuse", "pass", "pass"]
    refused = decisions[0]
    assert (
        refused["kind"] == "check"
        and refused["seat"] == "vllm-voices"
        and refused["host"] == "fv-ml1"
    )
    assert refused["cards"] == [0]
    assert refused["snapshot_id"] == snapshot_id
    assert refused["decided_at"] == "2026-09-16T11:45:05Z"
    assert refused["reasons"][0]["rule"] == "gate"
    assert refused["reasons"][0]["short_bytes"] == 12_236_756_091 - 11_983_126_528
    assert decisions[0]["inputs_digest"] != decisions[1]["inputs_digest"]


def test_stale_ledger_exits_3_and_records_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = _ledger(tmp_path)
    at(monkeypatch, TAKEN + timedelta(minutes=16))  # the default max age is 15 min
    code, out, err = gpuplan(
        capsys,
        "check",
        "vllm-voices",
        "--gpu",
        "0",
        "--catalogue",
        CATALOGUE,
        "--ledger",
        str(path),
    )
    assert code == 3
    assert out == ""
    assert "16 min old" in err
    with open_ledger(path, readonly=True) as ledger:
        (decision,) = ledger.decisions()
    assert decision["verdict"] == "unknown"
    assert "16 min old" in decision["reasons"][0]["text"]
    # --max-age widens it.
    code, _, _ = gpuplan(
        capsys,
        "check",
        "vllm-voices",
        "--gpu",
        "0",
        "--catalogue",
        CATALOGUE,
        "--ledger",
        str(path),
        "--max-age",
        "1h",
    )
    assert code == 0


def test_missing_ledger_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN)
    code, _, err = gpuplan(
        capsys,
        "check",
        "vllm-voices",
        "--catalogue",
        CATALOGUE,
        "--ledger",
        str(tmp_path / "none.sqlite"),
    )
    assert code == 3
    assert "none.sqlite" in err
    assert not (tmp_path / "none.sqlite").exists()


@pytest.mark.parametrize(("util", "expected"), [("0.271", 0), ("0.272", 1)])
def test_h200_proof_snapshot_replays(
    util: str, expected: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/check-gpu-proof.md: the real card flipped between 0.271 and 0.272; so does the replay."""
    at(monkeypatch, datetime(2026, 12, 4, 3, 45, tzinfo=UTC))
    code, out, _ = gpuplan(
        capsys, "check", "probe", "--gpu", "0", "--util", util,
        "--catalogue", "docs/check-gpu-proof.catalogue.yaml", "--snapshot", "docs/check-gpu-proof.snapshot.json",
    )  # fmt: skip
    assert code == expected
    assert ("card 0  gate" in out) == (expected == 1)


# --- where the cards came from ------------------------------------------------------------------


class _Replay:
    """Stands in for PynvmlSource: NVML answers with the before-voices snapshot's cards."""

    def __enter__(self) -> FakeNvml:
        return FakeNvml.from_snapshot(load_snapshot(ROOT / BEFORE))

    def __exit__(self, *exc: object) -> None:
        return None


def test_live_cards_are_labelled_nvml_as_plan_and_ledger_label_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN)
    monkeypatch.setattr("inventory.poller.PynvmlSource", _Replay)
    argv = ["check", "vllm-voices", "--gpu", "0", "--util", "0.11", "--catalogue", CATALOGUE]
    code, out, _ = gpuplan(capsys, *argv, "--live")
    assert code == 0
    assert "  fv-ml1 snapshot 2026-09-16T11:40:05Z (NVML)\n" in out


def _fleet_with_stale(monkeypatch: pytest.MonkeyPatch, stale_host: str) -> None:
    """Prometheus answers with fv-ml1's cards and a stale `stale_host`."""
    from inventory.prometheus.reader import Fleet, HostProblem

    snapshot = load_snapshot(ROOT / BEFORE)
    problem = HostProblem(stale_host, "stale", f"{stale_host}: stale (last reading 1.0 h ago)")
    fresh = () if stale_host == "fv-ml1" else (snapshot,)
    fleet = Fleet("http://prometheus:9090", fresh, (), (problem,))
    monkeypatch.setattr("inventory.prometheus.reader.read_fleet", lambda *a, **k: fleet)


def test_a_stale_host_under_the_seat_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN)
    _fleet_with_stale(monkeypatch, "fv-ml1")
    code, out, err = gpuplan(
        capsys, "check", "vllm-voices", "--gpu", "0", "--catalogue", CATALOGUE,
        "--prometheus", "http://prometheus:9090",
    )  # fmt: skip
    assert code == 3 and out == ""
    assert "fv-ml1: stale (last reading 1.0 h ago); cannot check on that host" in err


def _catalogue_with_fv_ml2(folder: Path) -> str:
    import yaml

    data = yaml.safe_load((ROOT / CATALOGUE).read_text())
    data["hosts"]["fv-ml2"] = dict(data["hosts"]["fv-ml1"])
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_stale_host_elsewhere_only_warns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    at(monkeypatch, TAKEN)
    _fleet_with_stale(monkeypatch, "fv-ml2")
    catalogue = _catalogue_with_fv_ml2(tmp_path)
    prometheus = ["--prometheus", "http://prometheus:9090"]
    base = ["--gpu", "0", "--util", "0.11", "--catalogue", catalogue, *prometheus]
    code, out, err = gpuplan(capsys, "check", "vllm-voices", *base)
    assert code == 0
    assert "(Prometheus http://prometheus:9090)" in out
    assert "warning: fv-ml2: stale (last reading 1.0 h ago); nothing is planned on fv-ml2" in err
    # A compose file does not say its host: every host must be readable.
    monkeypatch.setenv("VOICES_UTIL", "0.11")
    code, _, err = gpuplan(
        capsys, "check", "--compose", COMPOSE, "--catalogue", catalogue, *prometheus
    )
    assert code == 3
    assert "fv-ml2: stale (last reading 1.0 h ago); cannot check on that host" in err


def test_a_stale_host_outside_the_catalogue_is_ignored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at(monkeypatch, TAKEN)
    _fleet_with_stale(monkeypatch, "fv-ml2")
    prometheus = ["--prometheus", "http://prometheus:9090"]
    monkeypatch.setenv("VOICES_UTIL", "0.11")
    code, _, err = gpuplan(
        capsys, "check", "--compose", COMPOSE, "--catalogue", CATALOGUE, *prometheus
    )
    assert code == 0, err
    assert "warning: fv-ml2 is not in the catalogue: its cards are ignored" in err
    assert "cannot check" not in err
