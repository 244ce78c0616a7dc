"""Real compose projects (tests/placement/check/data/real/, sources in its README) checked through
`gpuplan check --compose`: the services docker would start (profiles, COMPOSE_PROFILES in `.env`,
`include:`) and the cards each asks for, on a host of our own making (data/real/lab.yaml, four
24 GiB cards)."""

from __future__ import annotations

import json
import math
import shutil
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from placement.check.compose import ComposeError, parse_env_file
from placement.cli import check as check_command
from placement.cli import main as cli

REAL = Path(__file__).parent / "data" / "real"
CATALOGUE = REAL / "lab.yaml"
SNAPSHOT = REAL / "lab.snapshot.json"
RAGFLOW = REAL / "ragflow" / "docker-compose.yml"
MINERU = REAL / "mineru" / "compose.yaml"
MiB = 2**20


@pytest.fixture(autouse=True)
def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot is 5 minutes old; no variable of these projects comes from the test's shell."""
    for name in ("GPUPLAN_CATALOGUE", "COMPOSE_PROFILES", "DEVICE", "DOC_ENGINE", "VLM_MS_GPU_ID",
                 "VLM_CAPTIONING_MS_GPU_ID", "HARBOR_SGLANG_EXTRA_ARGS"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    taken = json.loads(SNAPSHOT.read_text(encoding="utf-8"))["taken_at"]
    moment = datetime.fromisoformat(taken.replace("Z", "+00:00")).astimezone(UTC)
    monkeypatch.setattr(check_command, "utc_now", lambda: moment + timedelta(minutes=5))


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["check", *args, "--catalogue", str(CATALOGUE), "--snapshot", str(SNAPSHOT)])
    out, err = capsys.readouterr()
    return code, out, err


def refused_input(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """`check` on these arguments is exit 2 (bad input, as docker refuses the file): its stderr."""
    code, _, err = check(capsys, *args)
    assert code == 2
    return err


def judged(
    capsys: pytest.CaptureFixture[str], path: Path, *args: str
) -> tuple[int, dict[str, Any]]:
    return judged_args(capsys, "--compose", str(path), *args)


def judged_args(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = check(capsys, *args, "--json")
    return code, json.loads(out)


def cards(data: dict[str, Any]) -> dict[str, tuple[str, str | None, list[int] | None]]:
    return {v["service"]: (v["verdict"], v.get("host"), v.get("cards")) for v in data["verdicts"]}


def test_ragflow_default_env_starts_its_cpu_server_and_no_gpu_service(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`.env`: DEVICE=${DEVICE:-cpu}, COMPOSE_PROFILES=${DOC_ENGINE},${DEVICE},metadata-… →
    elasticsearch,cpu,metadata-mysql: docker starts ragflow-cpu, es01, mysql and the two
    services without a profile; none asks for a card."""
    err = refused_input(capsys, "--compose", str(RAGFLOW))
    assert (
        "services: no service asks for a GPU or runs vLLM "
        "(services: ragflow-cpu, es01, mysql, minio, redis)" in err
    )


def test_ragflow_device_gpu_starts_ragflow_gpu_on_every_card(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """DEVICE=gpu in the shell reaches COMPOSE_PROFILES through `.env`'s own interpolation: the
    `gpu` profile's ragflow-gpu (`count: all`) is started instead of ragflow-cpu. Its image runs
    no engine gpuplan knows: unknown (exit 3), on all four cards it reserves."""
    monkeypatch.setenv("DEVICE", "gpu")
    code, data = judged(capsys, RAGFLOW)
    assert code == 3
    assert cards(data) == {"ragflow-gpu": ("unknown", "lab", [0, 1, 2, 3])}
    # The included base file is read, and its services are the ones left out for want of a GPU.
    assert data["files"] == [str(RAGFLOW), str(RAGFLOW.parent / "docker-compose-base.yml")]
    code, out, _ = check(capsys, "--compose", str(RAGFLOW))
    assert code == 3
    assert "  ragflow-gpu  UNKNOWN  lab:0,1,2,3" in out
    assert "it asks for card(s) 0, 1, 2, 3 of lab" in out
    assert out.rstrip().endswith("no GPU, not checked: es01, mysql, minio, redis")


def test_ragflow_compose_profiles_from_the_shell_wins_over_env_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `.env` comment's own recipe for the GPU embedding server (profile tei-gpu, defined in
    the included file): both GPU services are started, mysql (metadata-mysql) is not."""
    monkeypatch.setenv("COMPOSE_PROFILES", "elasticsearch,gpu,tei-gpu")
    code, data = judged(capsys, RAGFLOW)
    assert code == 3
    every = [0, 1, 2, 3]
    assert cards(data) == {
        "ragflow-gpu": ("unknown", "lab", every),
        "tei-gpu": ("unknown", "lab", every),
    }
    code, out, _ = check(capsys, "--compose", str(RAGFLOW))
    assert code == 3
    assert out.rstrip().endswith("no GPU, not checked: es01, minio, redis")
    # --profile replaces COMPOSE_PROFILES, as `docker compose --profile` does.
    code, data = judged(capsys, RAGFLOW, "--profile", "tei-gpu")
    assert code == 3
    assert list(cards(data)) == ["tei-gpu"]


def test_mineru_starts_nothing_without_a_profile(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every service is behind its own profile: `docker compose up -d` says "no service
    selected" (docker/compose cmd/compose/up.go); so does check, with the profiles to name."""
    err = refused_input(capsys, "--compose", str(MINERU))
    assert (
        f"{MINERU}: profiles: no service selected, as `docker compose up -d` says: every service "
        "is behind a profile not enabled (enabled: none; mineru-openai-server: openai-server; "
        "mineru-api: api; mineru-router: router; mineru-gradio: gradio)" in err
    )
    monkeypatch.setenv("COMPOSE_PROFILES", "pipeline")
    err = refused_input(capsys, "--compose", str(MINERU))
    assert "(enabled: pipeline; mineru-openai-server: openai-server;" in err


@pytest.mark.parametrize(
    ("profiles", "started"),
    [
        ("openai-server", ["mineru-openai-server"]),
        ("api,gradio", ["mineru-api", "mineru-gradio"]),
        ("*", ["mineru-openai-server", "mineru-api", "mineru-router", "mineru-gradio"]),
    ],
)
def test_mineru_starts_the_services_of_its_profiles_on_card_0(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    profiles: str,
    started: list[str],
) -> None:
    """Each service reserves device 0 and runs MinerU's own image: unknown, on card 0 of lab."""
    monkeypatch.setenv("COMPOSE_PROFILES", profiles)
    code, data = judged(capsys, MINERU)
    assert code == 3
    assert cards(data) == {name: ("unknown", "lab", [0]) for name in started}
    assert data["files"] == [str(MINERU)]


def test_env_file_values_are_interpolated_as_compose_go_dotenv_does() -> None:
    """What ragflow's `.env` needs: the environment first, then an earlier line (compose-go
    fad4af6 "fix os.Env precedence resolving variables in .env file", its test
    TestEnvVariablePrecedence: FOO=foo, BAR=${FOO} with FOO=zot in the shell is BAR=zot); '…'
    kept as is."""
    text = (
        "DEVICE=${DEVICE:-cpu}\nDOC_ENGINE=elasticsearch\n"
        "COMPOSE_PROFILES=${DOC_ENGINE},${DEVICE} # comment\n"
        "QUOTED=\"${DOC_ENGINE}-x\"\nLITERAL='${DOC_ENGINE}'\nUNSET=a${NOPE}b\n"
    )
    values = parse_env_file(text, ".env", {"DEVICE": "gpu"}.get)
    assert values["COMPOSE_PROFILES"] == "elasticsearch,gpu"
    assert (values["QUOTED"], values["LITERAL"], values["UNSET"]) == (
        "elasticsearch-x",
        "${DOC_ENGINE}",
        "ab",
    )
    environ = {"DEVICE": "gpu", "DOC_ENGINE": "infinity"}
    values = parse_env_file(text, ".env", environ.get)
    assert (values["COMPOSE_PROFILES"], values["QUOTED"]) == ("infinity,gpu", "infinity-x")
    assert parse_env_file("FOO=foo\nBAR=${FOO}\n", ".env", {"FOO": "zot"}.get)["BAR"] == "zot"
    assert parse_env_file(text, ".env")["DEVICE"] == "cpu"
    with pytest.raises(ComposeError, match=r"^\.env: line 2: variable MODEL is not set: pick one"):
        parse_env_file("A=1\nB=${MODEL:?pick one}\n", ".env", environ.get)


BUSIBOX = REAL / "busibox" / "docker-compose.yml"
# The secrets busibox's file requires with `${VAR:?…}` in services started without a profile.
BUSIBOX_SECRETS = (
    "POSTGRES_PASSWORD",
    "MINIO_ROOT_USER",
    "MINIO_ROOT_PASSWORD",
    "NEO4J_PASSWORD",
    "LITELLM_MASTER_KEY",
    "LITELLM_API_KEY",
    "AUTHZ_MASTER_KEY",
    "CONFIG_ENCRYPTION_KEY",
    "SSO_JWT_SECRET",
)


@pytest.fixture
def busibox_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*BUSIBOX_SECRETS, "VLLM_MODEL", "VLLM_CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for name in BUSIBOX_SECRETS:
        monkeypatch.setenv(name, "set-for-the-test")
    return monkeypatch


def test_busibox_profiled_vllm_with_unset_required_model_refuses_the_whole_file(
    capsys: pytest.CaptureFixture[str], busibox_env: pytest.MonkeyPatch
) -> None:
    """The repository's install issue 012: `${VLLM_MODEL:?…}` in the vllm service, which only
    `--profile vllm` starts, stops every `docker compose up` ("error while interpolating
    services.vllm.environment.VLLM_MODEL"). gpuplan read only the started services and said
    "no service asks for a GPU"; it now refuses as docker does, naming service and field."""
    err = refused_input(capsys, "--compose", str(BUSIBOX))
    assert (
        f"{BUSIBOX}: service 'vllm': environment.VLLM_MODEL: required variable VLLM_MODEL is "
        "not set: VLLM_MODEL must be set; run scripts/llm/generate-model-config.sh "
        "(the service is not started, but docker compose interpolates every service" in err
    )
    busibox_env.setenv("VLLM_MODEL", "qwen3.5-0.8b")
    assert "no service asks for a GPU" in refused_input(capsys, "--compose", str(BUSIBOX))


@pytest.mark.slow
def test_busibox_vllm_profile_starts_vllm_on_the_cards_nvidia_visible_devices_names(
    capsys: pytest.CaptureFixture[str], busibox_env: pytest.MonkeyPatch
) -> None:
    """The vllm/vllm-openai image, but vLLM is started by a mounted entrypoint script from
    environment variables gpuplan does not read: unknown, on the cards `runtime: nvidia` with
    NVIDIA_VISIBLE_DEVICES gives it (all by default, card 1 when VLLM_CUDA_VISIBLE_DEVICES=1)."""
    busibox_env.setenv("VLLM_MODEL", "qwen3.5-0.8b")
    busibox_env.setenv("COMPOSE_PROFILES", "vllm")
    code, data = judged(capsys, BUSIBOX)
    assert code == 3
    assert cards(data) == {"vllm": ("unknown", "lab", [0, 1, 2, 3])}
    busibox_env.setenv("VLLM_CUDA_VISIBLE_DEVICES", "1")
    code, data = judged(capsys, BUSIBOX)
    assert code == 3 and cards(data) == {"vllm": ("unknown", "lab", [1])}
    # Its neighbours (postgres, milvus, the APIs) ask for no card and are left out.
    code, out, _ = check(capsys, "--compose", str(BUSIBOX))
    assert code == 3
    assert "no GPU, not checked: postgres, redis, minio, minio-init, etcd, milvus" in out


NIMS = REAL / "nvidia-rag" / "nims.yaml"
# nims.yaml's services whose profiles include "": what a plain `docker compose up -d` starts.
NIMS_DEFAULT = {
    "nim-llm": [1, 2],
    "nemotron-vlm-embedding-ms": [0],
    "nemotron-ranking-ms": [0],
    "page-elements": [0],
    "graphic-elements": [0],
    "table-structure": [0],
    "nemotron-ocr": [0],
}


def test_nvidia_rag_default_profile_empty_string_is_started_without_any_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """compose-go (cli.WithDefaultProfiles) splits an unset COMPOSE_PROFILES into [""], so the
    blueprint's `profiles: ["", "rag"]` services start with a plain `up -d`; gpuplan dropped the
    empty name and said "no service asks for a GPU". Each is a NIM image: unknown, on its cards
    (nim-llm on 1 and 2, the rest on 0, from the files' own defaults)."""
    code, data = judged(capsys, NIMS)
    assert code == 3
    assert cards(data) == {name: ("unknown", "lab", c) for name, c in NIMS_DEFAULT.items()}


def test_nvidia_rag_named_profiles_replace_the_default(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, data = judged(capsys, NIMS, "--profile", "rag")
    assert code == 3
    assert {k: v[2] for k, v in cards(data).items()} == {
        "nim-llm": [1, 2],
        "nemotron-vlm-embedding-ms": [0],
        "nemotron-ranking-ms": [0],
    }
    monkeypatch.setenv("COMPOSE_PROFILES", "ingest")
    code, data = judged(capsys, NIMS)
    assert code == 3
    assert list(cards(data)) == [
        "nemotron-vlm-embedding-ms",
        "page-elements",
        "graphic-elements",
        "table-structure",
        "nemotron-ocr",
        "vlm-captioning-ms",
    ]


def test_nvidia_rag_vlm_services_ask_for_cards_a_four_card_host_lacks(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--profile vlm-generation` starts vlm-ms on card ${VLM_MS_GPU_ID:-5} and the captioning
    model on ${VLM_CAPTIONING_MS_GPU_ID:-6}: on four cards both say which card is missing."""
    code, data = judged(capsys, NIMS, "--profile", "vlm-generation")
    assert code == 3
    by_name = {v["service"]: v for v in data["verdicts"]}
    assert by_name["vlm-ms"]["message"].endswith("host lab has cards 0–3; there is no card 5")
    assert by_name["vlm-captioning-ms"]["message"].endswith("there is no card 6")
    monkeypatch.setenv("VLM_MS_GPU_ID", "3")
    monkeypatch.setenv("VLM_CAPTIONING_MS_GPU_ID", "2")
    code, data = judged(capsys, NIMS, "--profile", "vlm-generation")
    assert code == 3
    assert {k: v[2] for k, v in cards(data).items()} == {
        "nemotron-vlm-embedding-ms": [0],
        "nemotron-ranking-ms": [0],
        "vlm-ms": [3],
        "vlm-captioning-ms": [2],
    }


HARBOR = REAL / "harbor"


def harbor(tmp_path: Path) -> Path:
    """harbor's tree as installed: `.env` is its profiles/default.env (harbor.sh copies it)."""
    root = tmp_path / "harbor"
    shutil.copytree(HARBOR, root)
    shutil.copy(root / "profiles" / "default.env", root / ".env")
    return root


def harbor_files(root: Path, engine: str, *, nvidia: bool = True) -> list[str]:
    files = [root / "compose.yml", root / "services" / f"compose.{engine}.yml"]
    if nvidia:
        files.append(root / "services" / f"compose.x.{engine}.nvidia.yml")
    return [arg for f in files for arg in ("--compose", str(f))]


def test_harbor_vllm_gets_its_gpus_from_the_nvidia_file_merged_in_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`docker compose -f compose.yml -f services/compose.vllm.yml -f
    services/compose.x.vllm.nvidia.yml`: the third file adds `count: all`. Its vLLM is an image
    built from harbor's Dockerfile (no `image:`), so unknown, on every card."""
    root = harbor(tmp_path)
    err = refused_input(capsys, *harbor_files(root, "vllm", nvidia=False))
    assert "no service asks for a GPU or runs vLLM" in err
    code, data = judged_args(capsys, *harbor_files(root, "vllm"))
    assert code == 3 and cards(data) == {"vllm": ("unknown", "lab", [0, 1, 2, 3])}
    services = root / "services"
    assert data["files"] == [
        str(root / "compose.yml"),
        str(services / "compose.vllm.yml"),
        str(services / "compose.x.vllm.nvidia.yml"),
    ]
    code, out, _ = check(capsys, *harbor_files(root, "vllm"))
    assert code == 3
    assert (
        f"merged {services / 'compose.vllm.yml'}, {services / 'compose.x.vllm.nvidia.yml'} "
        f"over {root / 'compose.yml'} in order, as `docker compose -f {root / 'compose.yml'} "
        in out
    )


def test_harbor_sglang_is_judged_by_its_seat_with_args_from_env(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compose.sglang.yml runs `python3 -m sglang.launch_server --model-path
    ${HARBOR_SGLANG_MODEL} … ${HARBOR_SGLANG_EXTRA_ARGS}` from lmsysorg/sglang: SGLang, read by
    its own rule once a catalogue seat (ours) matches its command. `harbor sglang args
    --mem-fraction-static 0.6` sets the extra arguments: the need is 0.6 × (free − context) plus
    the context on card 0, the one card its single engine uses of the `count: all` it reserves."""
    root = harbor(tmp_path)
    code, data = judged_args(capsys, *harbor_files(root, "sglang"))
    (verdict,) = data["verdicts"]
    # One card, whatever its container sees: SGLang with no --tp, --pp or --dp takes one (it was
    # listed on all four, issue 31).
    assert code == 3 and verdict["verdict"] == "unknown" and verdict["cards"] == [0]
    assert "runs SGLang but matches no catalogue seat" in verdict["message"]
    catalogue = tmp_path / "lab.yaml"
    catalogue.write_text(
        CATALOGUE.read_text(encoding="utf-8").replace(
            "seats: []",
            "seats:\n  - name: qwen-sglang\n    host: lab\n    resident: 12 GiB\n"
            "    match: 'sglang\\.launch_server .*Qwen/Qwen3\\.5-4B'\n"
            '    engine: {kind: sglang, version: "0.5.8"}',
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv("HARBOR_SGLANG_EXTRA_ARGS", "--mem-fraction-static 0.6")
    files = harbor_files(root, "sglang")
    code = cli.main(
        ["check", *files, "--json", "--catalogue", str(catalogue), "--snapshot", str(SNAPSHOT)]
    )
    (verdict,) = json.loads(capsys.readouterr().out)["verdicts"]
    free = json.loads(SNAPSHOT.read_text(encoding="utf-8"))["cards"][0]["free_bytes"]
    context = 500 * MiB
    assert code == 0 and (verdict["seat"], verdict["cards"]) == ("qwen-sglang", [0])
    assert verdict["engine"]["kind"] == "sglang"
    assert verdict["need_bytes"] == int(Decimal("0.6") * (free - context)) + context


MINERU_DP = REAL / "mineru-1d96a77" / "compose.yaml"
# Ours: the changes MinerU's own comments ask for on two GPUs, as the override file docker merges
# beside compose.yaml. MinerU's image is built FROM vllm/vllm-openai and mineru-openai-server hands
# its arguments to vLLM, which gpuplan cannot see in `mineru:latest`: hence x-gpuplan-engine.
MINERU_TWO_GPUS = """\
services:
  mineru-openai-server:
    x-gpuplan-engine: vllm
    command:
      --host 0.0.0.0
      --port 30000
      --data-parallel-size 2
      --gpu-memory-utilization 0.5
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ["0", "1"]
              capabilities: [gpu]
"""


def test_mineru_data_parallel_override_judges_each_engine_on_its_own_card(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The override's device request is appended to the file's (compose-go merges the list), so
    the container is asked for card 0 twice and card 1: it holds each once. The two vLLM engines
    of `--data-parallel-size 2` go to cards 0 and 1, each judged there: util 0.5 of the CUDA total
    requested, gate free = free − the 500 MiB context; card 1's 6 GiB process counts for dp1 only.
    Before, both engines were put on card 0 and refused."""
    monkeypatch.setenv("COMPOSE_PROFILES", "openai-server")
    compose = tmp_path / "compose.yaml"
    shutil.copy(MINERU_DP, compose)
    code, data = judged(capsys, compose)
    assert code == 3 and cards(data) == {"mineru-openai-server": ("unknown", "lab", [0])}
    override = tmp_path / "compose.override.yaml"
    override.write_text(MINERU_TWO_GPUS, encoding="utf-8")
    code, data = judged(capsys, compose)
    assert code == 0 and data["files"] == [str(compose), str(override)]
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))["cards"]
    context = 500 * MiB
    assert len(data["verdicts"]) == 2  # one verdict per engine of --data-parallel-size 2
    for rank, verdict in enumerate(data["verdicts"]):
        card = snapshot[rank]
        (figures,) = verdict["card_figures"]
        requested = math.ceil(Decimal("0.5") * (card["total_bytes"] - card["reserved_bytes"]))
        assert (verdict["data_parallel_rank"], verdict["cards"]) == (rank, [rank])
        assert verdict["verdict"] == "pass" and figures["requested_bytes"] == requested
        assert figures["gate_free_bytes"] == card["free_bytes"] - context
        assert verdict["need_bytes"] == requested + context
    code, out, _ = check(capsys, "--compose", str(compose))
    assert code == 0
    assert f"merged {override} over {compose}, as `docker compose up -d` does" in out
    assert "  mineru-openai-server dp0  PASS     lab:0" in out
    assert "  mineru-openai-server dp1  PASS     lab:1" in out


def test_a_service_env_file_is_interpolated_with_the_project_environment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written here, not a real file: compose-go reads a service's `env_file:` values with the
    project's environment (the shell, then `.env`), as `.env` itself now is; before, such a value
    read as "" once `.env` values were interpolated, and was kept literally before that."""
    (tmp_path / "gpu.env").write_text("CUDA_VISIBLE_DEVICES=${TTS_GPU:-0}\n", encoding="utf-8")
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  tts:\n    image: myorg/tts:1\n    env_file: gpu.env\n"
        "    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all,"
        " capabilities: [gpu]}]}}}\n",
        encoding="utf-8",
    )
    code, data = judged(capsys, compose)
    assert code == 3 and cards(data) == {"tts": ("unknown", "lab", [0])}
    monkeypatch.setenv("TTS_GPU", "2")
    code, data = judged(capsys, compose)
    assert code == 3
    assert cards(data) == {"tts": ("unknown", "lab", [2])}
    monkeypatch.delenv("TTS_GPU")
    (tmp_path / ".env").write_text("TTS_GPU=3\n", encoding="utf-8")
    code, data = judged(capsys, compose)
    assert code == 3
    assert cards(data) == {"tts": ("unknown", "lab", [3])}
