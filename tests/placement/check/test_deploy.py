"""`check --compose` as one deploy (issue 12): services judged together, replicas, error/unknown verdicts.

End to end through `gpuplan check`, on the seed's before-voices snapshot of fv-ml1 (card 1 has
5.32 GiB of room); compose files written under tmp_path.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from placement.cli import check as check_command
from placement.cli import main as cli

ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = "seats/catalogue/fv-ml1.yaml"
BEFORE = "seats/catalogue/fv-ml1-before-voices.snapshot.json"
TAKEN = datetime(2026, 9, 16, 11, 40, 5, tzinfo=UTC)
CARD1 = "    deploy: {resources: {reservations: {devices: [{driver: nvidia, device_ids: ['1'], capabilities: [gpu]}]}}}\n"


@pytest.fixture(autouse=True)
def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    for name in ("TTS_TAG", "HF_TOKEN", "UTIL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(check_command, "utc_now", lambda: TAKEN + timedelta(minutes=5))


def check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, *extra: str
) -> tuple[int, str, str]:
    path = tmp_path / "compose.yaml"
    path.write_text(text, encoding="utf-8")
    code = cli.main(
        ["check", "--compose", str(path), "--catalogue", CATALOGUE, "--snapshot", BEFORE, *extra]
    )
    out, err = capsys.readouterr()
    return code, out, err


def as_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, *extra: str
) -> tuple[int, Any]:
    code, out, _ = check(capsys, tmp_path, text, "--json", *extra)
    return code, json.loads(out)


def vllm(name: str, util: str = "0.03", extra: str = CARD1) -> str:
    return (
        f"  {name}:\n    image: vllm/vllm-openai:v0.11.0\n"
        f"    command: [--model, m, --gpu-memory-utilization, '{util}']\n{extra}"
    )


TWO = "services:\n" + vllm("a") + vllm("b")


def test_two_services_that_fit_alone_are_refused_together(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, data = as_json(capsys, tmp_path, TWO, "--service", "a")
    assert code == 0 and [v["service"] for v in data["verdicts"]] == ["a"]
    code, data = as_json(capsys, tmp_path, TWO)
    assert code == 1 and data["verdict"] == "refuse"
    a, b = data["verdicts"]
    assert (a["service"], b["service"]) == ("a", "b")
    assert a["verdict"] == b["verdict"] == "refuse"
    room = a["reasons"][0]
    assert room["rule"] == "room" and room["card"] == 1
    # Each is judged as if it started last: the other's need is taken from its room.
    assert a["card_figures"][0]["others_bytes"] == b["card_figures"][0]["need_bytes"]


def test_the_table_shows_the_shared_room_and_the_tightest_gate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = check(capsys, tmp_path, TWO)
    assert code == 1
    assert "one deploy, every GPU service judged together" in out
    assert "tightest gate: " in out
    assert "2 GPU service(s), worst verdict refuse" in out


def test_a_service_that_cannot_be_read_is_not_counted_as_a_gpu_service(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # `b` may not ask for a GPU at all: its reading failed before that could be told.
    broken = "  b:\n    image: vllm/vllm-openai\n    command: --gpu-memory-utilization abc\n"
    code, out, _ = check(capsys, tmp_path, "services:\n" + vllm("a") + broken)
    assert code == 2
    assert "1 GPU service(s), 1 not readable, worst verdict error" in out


def test_replicas_are_seats_on_the_same_cards(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = "services:\n" + vllm("a", extra=CARD1 + "    scale: 1\n").replace(
        "    scale: 1\n", ""
    ).replace("deploy: {", "deploy: {replicas: 2, ")
    code, data = as_json(capsys, tmp_path, text)
    assert code == 1
    assert [(v["service"], v["replica"]) for v in data["verdicts"]] == [("a", 0), ("a", 1)]
    assert all(v["cards"] == [1] for v in data["verdicts"])
    code, data = as_json(capsys, tmp_path, text.replace("replicas: 2", "replicas: 1"))
    assert code == 0 and "replica" not in data["verdicts"][0]


def test_unset_image_variable_is_exit_2_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = "services:\n" + vllm("tts").replace("v0.11.0", "${TTS_TAG}") + vllm("b", "0.01")
    code, out, err = check(capsys, tmp_path, text)
    assert code == 2
    assert "service 'tts'" in err and "image" in err and "TTS_TAG" in err
    # The other service still gets its verdict.
    assert "PASS  b (compose service b)" in out
    code, data = as_json(capsys, tmp_path, text)
    assert code == 2 and data["verdict"] == "error"
    assert data["verdicts"][0]["verdict"] == "error" and "TTS_TAG" in data["verdicts"][0]["message"]


def test_unset_variable_where_gpuplan_does_not_read_is_empty(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = "services:\n" + vllm(
        "a",
        "0.01",
        CARD1 + "    environment:\n      - HF_TOKEN=${HF_TOKEN}\n      - P=$PYTHONPATH\n",
    )
    code, _ = as_json(capsys, tmp_path, text)
    assert code == 0


def test_required_variable_refuses_anywhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = "services:\n" + vllm(
        "a", "0.01", CARD1 + "    environment: {HF_TOKEN: '${HF_TOKEN:?log in first}'}\n"
    )
    code, _, err = check(capsys, tmp_path, text)
    assert (
        code == 2 and "HF_TOKEN" in err and "log in first" in err and "environment.HF_TOKEN" in err
    )


CUSTOM = (
    "services:\n  tts:\n    image: acme/tts-server:1.2\n"
    "    command: [--model, m, --gpu-memory-utilization, '0.01']\n" + CARD1
)


def test_custom_image_is_unknown_and_says_how_to_declare_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = check(capsys, tmp_path, CUSTOM)
    assert code == 3
    assert "UNKNOWN  compose service tts" in out
    assert "x-gpuplan-engine: vllm" in out and "x-gpuplan-seat: NAME" in out
    code, data = as_json(capsys, tmp_path, CUSTOM)
    assert code == 3
    assert data["verdict"] == "unknown" and data["verdicts"][0]["verdict"] == "unknown"


def test_custom_image_declared_vllm_gets_its_real_verdict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, data = as_json(capsys, tmp_path, CUSTOM + "    x-gpuplan-engine: vllm\n")
    assert code == 0
    assert data["verdicts"][0]["util"] == "0.01" and data["verdicts"][0]["cards"] == [1]


def test_unknown_service_need_is_not_counted_and_the_deploy_is_unknown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, data = as_json(capsys, tmp_path, CUSTOM + vllm("a"))
    assert code == 3
    unknown, judged = data["verdicts"]
    assert unknown["verdict"] == "unknown" and judged["verdict"] == "pass"
    assert judged["card_figures"][0]["others_bytes"] == 0


def test_service_with_its_depends_on(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = TWO.replace("  b:\n", "  b:\n    depends_on: [a]\n") + "  c:\n    image: redis\n"
    code, data = as_json(capsys, tmp_path, text, "--service", "b")
    assert code == 1 and [v["service"] for v in data["verdicts"]] == ["a", "b"]


def test_profiles_are_left_out_unless_asked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = TWO.replace("  b:\n", "  b:\n    profiles: [debug]\n")
    code, data = as_json(capsys, tmp_path, text)
    assert code == 0 and [v["service"] for v in data["verdicts"]] == ["a"]
    code, data = as_json(capsys, tmp_path, text, "--profile", "debug")
    assert code == 1 and len(data["verdicts"]) == 2


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("services:\n  db: {image: postgres}\n", ["no service asks for a GPU", "db"]),
        ("include: [other.yaml]\nservices:\n" + vllm("a"), ["include", "other.yaml does not exist"]),
        ("services:\n  a:\n    extends: {file: base.yaml, service: v}\n" + CARD1, ["service 'a'", "extends.file", "base.yaml does not exist"]),
        ("services: [a]\n", ["services"]),
        ("x: &a [1, 2]\nservices: !!python/object/apply:os.system ['true']\n", ["tag"]),
    ],
)  # fmt: skip
def test_bad_files_exit_2(
    text: str, words: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = check(capsys, tmp_path, text)
    assert code == 2 and "compose.yaml" in err
    for word in words:
        assert word in err


def test_alias_bomb_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    code, _, err = check(capsys, tmp_path, "\n".join(lines) + "\nservices: {}\n")
    assert code == 2 and "alias" in err


def test_exit_is_the_worst_unknown_over_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = CUSTOM + vllm("bad", "1.5")
    code, data = as_json(capsys, tmp_path, text)
    assert code == 3
    assert [v["verdict"] for v in data["verdicts"]] == ["unknown", "error"]


def test_a_redeployed_stack_frees_every_running_seat_of_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # chat-large (catalogue, port 8031) already runs on card 1 with 60 GiB; redeployed beside a
    # small new service, its running bytes are freed for both judgements, its need counted once.
    text = (
        "services:\n  chat:\n    image: vllm/vllm-openai:v0.11.0\n"
        "    command: [--model, m, --port, '8031', --gpu-memory-utilization, '0.62']\n"
        + CARD1
        + vllm("small", "0.01")
    )
    code, data = as_json(capsys, tmp_path, text)
    assert code == 0
    chat, small = data["verdicts"]
    assert small["verdict"] == "pass", small["reasons"]
    assert small["card_figures"][0]["others_bytes"] == chat["card_figures"][0]["need_bytes"]
