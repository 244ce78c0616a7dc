"""Issue 26's seven reproductions: deploys `check --compose … && docker compose up -d` let through.

End to end through `gpuplan check`, on the seed's before-voices snapshot of fv-ml1 (card 0 has
12.32 GiB free, card 1 5.32 GiB of room); compose files written under tmp_path.
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


def card(*cards: int) -> str:
    ids = ", ".join(f"'{c}'" for c in cards)
    return f"    deploy: {{resources: {{reservations: {{devices: [{{driver: nvidia, device_ids: [{ids}], capabilities: [gpu]}}]}}}}}}\n"


@pytest.fixture(autouse=True)
def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for name in ("GPUPLAN_CATALOGUE", "COMPOSE_PROFILES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(check_command, "utc_now", lambda: TAKEN + timedelta(minutes=5))


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["check", *args, "--catalogue", CATALOGUE, "--snapshot", BEFORE])
    out, err = capsys.readouterr()
    return code, out, err


def compose(
    capsys: pytest.CaptureFixture[str], path: Path, *extra: str
) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(capsys, "--compose", str(path), "--json", *extra)
    return code, json.loads(out)


def vllm(name: str, util: str, where: str, extra: str = "") -> str:
    return (
        f"  {name}:\n    image: vllm/vllm-openai:v0.11.0\n"
        f"    command: [--model, m, --gpu-memory-utilization, '{util}'{extra}]\n{where}"
    )


def test_profiles_from_compose_profiles_are_started(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """COMPOSE_PROFILES=debug starts the profiled service: it shares card 1 and is judged."""
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n"
        + vllm("a", "0.03", card(1))
        + vllm("debug", "0.03", "    profiles: [debug]\n" + card(1)),
        encoding="utf-8",
    )
    code, data = compose(capsys, path)
    assert code == 0 and [v["service"] for v in data["verdicts"]] == ["a"]
    monkeypatch.setenv("COMPOSE_PROFILES", "debug")
    code, data = compose(capsys, path)
    assert code == 1 and [v["service"] for v in data["verdicts"]] == ["a", "debug"]
    monkeypatch.delenv("COMPOSE_PROFILES")
    (tmp_path / ".env").write_text("COMPOSE_PROFILES=debug\n", encoding="utf-8")
    code, data = compose(capsys, path)
    assert code == 1 and data["verdict"] == "refuse"


def test_the_override_file_docker_merges_is_judged_and_said(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A compose.override.yaml that raises util to 0.2 on card 1 (5.32 GiB room): refused."""
    path = tmp_path / "compose.yaml"
    path.write_text("services:\n" + vllm("a", "0.03", card(1)), encoding="utf-8")
    assert compose(capsys, path)[0] == 0
    override = tmp_path / "compose.override.yaml"
    override.write_text(
        "services:\n  a:\n    command: [--model, m, --gpu-memory-utilization, '0.2']\n",
        encoding="utf-8",
    )
    code, data = compose(capsys, path)
    assert code == 1 and data["files"] == [str(path), str(override)]
    assert data["verdicts"][0]["util"] == "0.2"
    code, out, _ = run(capsys, "--compose", str(path))
    assert code == 1
    assert f"merged {override} over {path}, as `docker compose up -d` does" in out
    # Explicit files, as `docker compose -f compose.yaml`: the override is not read.
    code, data = compose(capsys, path, "--compose", str(path))
    assert data["files"] == [str(path)] and data["verdicts"][0]["util"] == "0.03"


def test_include_and_extends_are_merged_not_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Both were "not merged yet" (exit 2); now the files are read as compose reads them."""
    (tmp_path / "gpu").mkdir()
    (tmp_path / "gpu" / "base.yaml").write_text(
        "services:\n  vllm-base:\n    image: vllm/vllm-openai:v0.11.0\n"
        "    command: [--model, m, --gpu-memory-utilization, '0.03']\n",
        encoding="utf-8",
    )
    (tmp_path / "gpu" / "models.yaml").write_text(
        "services:\n  b:\n    extends: {file: base.yaml, service: vllm-base}\n" + card(1),
        encoding="utf-8",
    )
    path = tmp_path / "compose.yaml"
    path.write_text(
        "include: [gpu/models.yaml]\nservices:\n  a:\n    extends: {file: gpu/base.yaml, service: vllm-base}\n"
        + card(1),
        encoding="utf-8",
    )
    code, data = compose(capsys, path)
    # Each fits card 1 alone; together they do not.
    assert code == 1 and sorted(v["service"] for v in data["verdicts"]) == ["a", "b"]
    assert str(tmp_path / "gpu" / "models.yaml") in data["files"]
    (tmp_path / "gpu" / "models.yaml").unlink()
    code, _, err = run(capsys, "--compose", str(path))
    assert code == 2 and "gpu/models.yaml does not exist" in err
