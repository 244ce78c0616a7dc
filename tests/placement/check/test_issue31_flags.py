"""Issue 31's silent PASSes: a flag vLLM reads by its unique prefix, read as vLLM reads it.

End to end through `gpuplan check --compose`, on the seed's compose file (vLLM 0.11.0) edited
under tmp_path and the before-voices snapshot of fv-ml1 (card 0: 12.07 GiB of room, 11.16 GiB
free after vLLM's context; card 1: 5.32 GiB of room; card 3 empty).
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
CATALOGUE = ROOT / "seats/catalogue/fv-ml1.yaml"
BEFORE = "seats/catalogue/fv-ml1-before-voices.snapshot.json"
VOICES = ROOT / "tests/placement/data/voices-compose.yaml"
TAKEN = datetime(2026, 9, 16, 11, 40, 5, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for name in ("GPUPLAN_CATALOGUE", "COMPOSE_PROFILES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VOICES_UTIL", "0.11")
    monkeypatch.setattr(check_command, "utc_now", lambda: TAKEN + timedelta(minutes=5))


def voices(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    """The seed's compose file with each (old, new) text replaced once."""
    text = VOICES.read_text(encoding="utf-8")
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "compose.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def check(
    capsys: pytest.CaptureFixture[str], path: Path, catalogue: Path = CATALOGUE
) -> tuple[int, dict[str, Any], str]:
    args = ["--compose", str(path), "--catalogue", str(catalogue), "--snapshot", BEFORE]
    code = cli.main(["check", *args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


def reasons(verdict: dict[str, Any]) -> list[tuple[str, int, int, int, int]]:
    return [
        (r["rule"], r["card"], r["need_bytes"], r["room_bytes"], r["short_bytes"])
        for r in verdict["reasons"]
    ]


def test_kv_cache_mem_is_kv_cache_memory_bytes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--kv-cache-mem 20G` passed (exit 0) on the declared 1.5 GiB; vLLM reads it as
    --kv-cache-memory-bytes: need 10,740 − 1,536 + 20,480 MiB = 28.99 GiB, room 12.07 GiB."""
    path = voices(tmp_path, ("- --kv-cache-memory\n", "- --kv-cache-mem\n"), ("1536M", "20G"))
    code, data, _ = check(capsys, path)
    (verdict,) = data["verdicts"]
    assert code == 1 and verdict["need_bytes"] == 31_125_929_984
    assert reasons(verdict) == [("room", 0, 31_125_929_984, 12_955_156_480, 18_170_773_504)]


def test_tensor_parallel_prefix_starts_a_worker_on_the_second_card(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--tensor-parallel 2` over cards 0 and 1 was judged on card 0 alone (pass); vLLM starts
    its second worker on card 1, where util 0.11 asks 10.45 GiB and 4.42 GiB is free."""
    path = voices(
        tmp_path,
        ('device_ids: ["0"]', 'device_ids: ["0", "1"]'),
        (
            "      - --enable-lora\n",
            '      - --tensor-parallel\n      - "2"\n      - --enable-lora\n',
        ),
    )
    code, data, _ = check(capsys, path)
    (verdict,) = data["verdicts"]
    assert code == 1 and verdict["cards"] == [0, 1]
    assert reasons(verdict) == [
        ("room", 1, 11_261_706_240, 5_712_642_048, 5_549_064_192),
        ("gate", 1, 11_217_026_417, 4_740_612_096, 6_476_414_321),
    ]


def test_gpu_memory_util_prefix_is_the_util(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--gpu-memory-util 0.99` on the empty card 3 (no hold) was judged at vLLM 0.11's default
    0.9 (85.47 GiB asked of 93.81 GiB free: pass); vLLM asks ceil(0.99 × 97,249 MiB)."""
    catalogue = tmp_path / "fv-ml1.yaml"
    text = CATALOGUE.read_text(encoding="utf-8")
    start, end = text.index("reserves:\n"), text.index("seats:\n")
    catalogue.write_text(text[:start] + text[end:], encoding="utf-8")
    path = voices(
        tmp_path,
        ("- --gpu-memory-utilization\n", "- --gpu-memory-util\n"),
        ("${VOICES_UTIL:-0.12}", '"0.99"'),
        ('device_ids: ["0"]', 'device_ids: ["3"]'),
    )
    code, data, _ = check(capsys, path, catalogue)
    (verdict,) = data["verdicts"]
    assert code == 1 and verdict["util"] == "0.99"
    assert reasons(verdict) == [("gate", 3, 100_953_237_750, 100_732_502_016, 220_735_734)]
    # On card 0 at 0.95: ceil(0.95 × 97,249 MiB) asked of 11.16 GiB free.
    path = voices(
        tmp_path,
        ("- --gpu-memory-utilization\n", "- --gpu-memory-util=0.95\n"),
        ("      - ${VOICES_UTIL:-0.12}\n", ""),
    )
    code, data, _ = check(capsys, path)
    (verdict,) = data["verdicts"]
    assert code == 1 and verdict["util"] == "0.95"
    assert reasons(verdict) == [("gate", 0, 96_874_319_053, 11_983_126_528, 84_891_192_525)]


@pytest.mark.parametrize(
    ("written", "says"),
    [
        (
            "--kv-cache",
            '--kv-cache: ambiguous: vLLM 0.11.0 stops at start with "ambiguous option: '
            '--kv-cache could match --kv-cache-memory-bytes, --kv-cache-dtype"',
        ),
        (
            "--gpu-mem-util",
            '--gpu-mem-util: no flag of vLLM 0.11.0: it stops at start with "unrecognized '
            'arguments: --gpu-mem-util"',
        ),
    ],
)
def test_an_ambiguous_or_unknown_flag_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, written: str, says: str
) -> None:
    """vLLM stops at start on either: exit 2 naming the flag and what it could match."""
    path = voices(tmp_path, ("- --kv-cache-memory\n", f"- {written}\n"))
    code, _, err = check(capsys, path)
    assert code == 2
    assert f"service 'vllm-voices': {says}" in err


def test_the_last_of_a_repeated_flag_wins_whatever_its_spelling(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--gpu_memory_utilization=0.95` then `--gpu-memory-util 0.11`: vLLM keeps 0.11."""
    path = voices(
        tmp_path,
        ("      - --gpu-memory-utilization\n", "      - --gpu_memory_utilization=0.95\n"),
        ("      - ${VOICES_UTIL:-0.12}\n", "      - --gpu-memory-util\n      - '0.11'\n"),
    )
    code, data, _ = check(capsys, path)
    (verdict,) = data["verdicts"]
    assert code == 0 and verdict["util"] == "0.11"
    assert (
        "--gpu-memory-utilization is given more than once; vLLM uses the last" in data["warnings"]
    )


SGLANG = "lmsysorg/sglang:v0.5.8-cu126"
TGI = "ghcr.io/huggingface/text-generation-inference:3.3.4"


def service(tmp_path: Path, image: str, command: str, cards: str, env: str = "") -> Path:
    """One GPU service of `image` running `command` on host cards `cards` (`"0", "1"`)."""
    path = tmp_path / "compose.yaml"
    path.write_text(
        f"services:\n  s:\n    image: {image}\n    command: {command}\n{env}"
        "    deploy: {resources: {reservations: {devices: "
        f"[{{driver: nvidia, device_ids: [{cards}], capabilities: [gpu]}}]}}}}}}\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("image", "command", "env", "says"),
    [
        (
            SGLANG,
            "python3 -m sglang.launch_server --model-path m --mem-fraction-static 1.5",
            "",
            "--mem-fraction-static: 1.5 is not a fraction in (0, 1]: SGLang cannot take that "
            "share of a card",
        ),
        (
            SGLANG,
            "python3 -m sglang.launch_server --model-path m --mem_fraction_static 0.3",
            "",
            "--mem_fraction_static: no flag of SGLang 0.5.8: it stops at start with "
            '"unrecognized arguments: --mem_fraction_static"',
        ),
        (
            TGI,
            "--model-id m --cuda-memory-fraction abc",
            "",
            "--cuda-memory-fraction: 'abc' is not a number: TGI's launcher (clap) stops at start",
        ),
        (
            TGI,
            "--model-id m",
            "    environment: {CUDA_MEMORY_FRACTION: abc}\n",
            "environment CUDA_MEMORY_FRACTION: 'abc' is not a number: TGI's launcher (clap) "
            "stops at start",
        ),
        (
            TGI,
            "--model-id m --cuda-memory-fraction 0",
            "",
            "--cuda-memory-fraction: 0 is not a fraction in (0, 1]: TGI's launcher (clap) "
            "cannot take that share of a card",
        ),
    ],
)
def test_a_value_the_engine_would_refuse_is_bad_input(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    image: str,
    command: str,
    env: str,
    says: str,
) -> None:
    """Refused as bad input (exit 2) naming the flag, never as "no pin" (exit 1)."""
    code, _, err = check(capsys, service(tmp_path, image, f"{command}", '"0"', env))
    assert code == 2 and f"service 's': {says}" in err


@pytest.mark.parametrize(
    ("image", "command", "env", "written"),
    [
        (SGLANG, "python3 -m sglang.launch_server --model-path m --dp 4", "", "--dp 4"),
        (TGI, "--model-id m --num-shard 4", "", "--num-shard 4"),
        (TGI, "--model-id m", "    environment: [NUM_SHARD=4]\n", "environment NUM_SHARD 4"),
    ],
)
def test_a_card_count_is_named_by_its_own_flag(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    image: str,
    command: str,
    env: str,
    written: str,
) -> None:
    """Four cards asked where the container sees two: the message names the flag that asked."""
    code, data, _ = check(capsys, service(tmp_path, image, command, '"0", "1"', env))
    (verdict,) = data["verdicts"]
    assert code == 3 and verdict["verdict"] == "unknown"
    assert verdict["message"].endswith(
        f"its cards cannot be told either: {written} starts it on 4 cards and the container sees 2"
    )


def test_sglang_with_no_parallel_flag_takes_one_card_of_four(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """SGLang with no --tp, --pp or --dp runs one engine on one card, whatever its container
    sees: unpinned, it is refused as unbounded on card 0 alone, not on 0–3; with --tp 2 --dp 2 it
    takes all four."""
    command = "python3 -m sglang.launch_server --model-path m"
    code, data, _ = check(capsys, service(tmp_path, SGLANG, command, '"0", "1", "2", "3"'))
    (verdict,) = data["verdicts"]
    assert code == 1 and verdict["cards"] == [0] and verdict["reasons"][0]["rule"] == "unbounded"
    path = service(tmp_path, SGLANG, f"{command} --tp 2 --dp-size=2", '"0", "1", "2", "3"')
    code, data, _ = check(capsys, path)
    (verdict,) = data["verdicts"]
    assert code == 1 and verdict["cards"] == [0, 1, 2, 3]


def test_a_kv_cache_of_one_byte_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--kv-cache-memory 1` passed on 8.99 GiB; 1 B holds no token of any model (its K and V
    take a byte each at least): vLLM stops at start, so it is exit 2."""
    code, _, err = check(capsys, voices(tmp_path, ("- 1536M\n", '- "1"\n')))
    assert code == 2
    assert (
        "service 'vllm-voices': --kv-cache-memory: '1' is 1 B, less than the K and V of one "
        "token of any model: vLLM holds no block of it and stops at start"
    ) in err


def test_a_util_below_the_weights_is_vllms_own_refusal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--util 1e-9` asks ceil(1e-9 × 97,249 MiB) = 102 B: with 8,044,936,192 B of weights and
    no KV pin, vLLM finds no memory for its KV cache and stops (it passed with a warning)."""
    seat = tmp_path / "tiny.yaml"
    seat.write_text(
        "name: tiny\nhost: fv-ml1\nresident: 10 GiB\nweights: 8044936192\n"
        'engine: {kind: vllm, version: "0.11.0"}\n',
        encoding="utf-8",
    )
    args = ["--catalogue", str(CATALOGUE), "--snapshot", BEFORE, "--json", "--gpu", "0"]
    code = cli.main(["check", "--add", str(seat), "--util", "1e-9", *args])
    verdict = json.loads(capsys.readouterr().out)
    assert code == 1
    assert ("kv_capacity", 0, 8_044_936_192, 102, 8_044_936_090) in reasons(verdict)
    code = cli.main(["check", "--add", str(seat), "--util", "0.11", *args])
    verdict = json.loads(capsys.readouterr().out)
    assert code == 1 and "kv_capacity" not in [r["rule"] for r in verdict["reasons"]]
