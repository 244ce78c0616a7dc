"""Reading docker compose files into vLLM services: every form `check --compose` accepts and refuses.

Real files under tmp_path; nothing is run. Byte values follow vLLM's own reading (docs/facts.md §2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inventory.snapshot import Snapshot
from placement.check.compose import (
    ComposeError,
    ComposeService,
    interpolate,
    load_compose,
    parse_env_file,
    resolve_cards,
)
from placement.cli.notes_text import note_texts
from placement.fit.engines.vllm_command import image_version
from placement.fit.engines.vllm_flags import vllm_bytes

DATA = Path(__file__).parent.parent / "data"
GiB = 2**30


def write(tmp_path: Path, text: str, env: str | None = None) -> Path:
    path = tmp_path / "compose.yaml"
    path.write_text(text, encoding="utf-8")
    if env is not None:
        (tmp_path / ".env").write_text(env, encoding="utf-8")
    return path


def one(
    tmp_path: Path, text: str, environ: dict[str, str] | None = None, env: str | None = None
) -> ComposeService:
    loaded = load_compose(write(tmp_path, text, env), environ or {})
    assert len(loaded.services) == 1
    return loaded.services[0]


def error(
    tmp_path: Path, text: str, environ: dict[str, str] | None = None, env: str | None = None
) -> ComposeError:
    """The error of the file, or of its first bad service (kept beside the others)."""
    try:
        loaded = load_compose(write(tmp_path, text, env), environ or {})
    except ComposeError as exc:
        return exc
    assert loaded.errors, "expected a bad service"
    return loaded.errors[0]


# --- the example file ---------------------------------------------------------------------


def test_voices_compose_reads_every_flag() -> None:
    loaded = load_compose(DATA / "voices-compose.yaml", {})
    assert loaded.skipped == ("litellm",)  # its unset ${LITELLM_KEY} is not ours to refuse
    (voices,) = loaded.services
    assert voices.name == "vllm-voices"
    assert voices.seat == "vllm-voices"
    assert voices.version == "0.11.0"
    assert voices.model == "voices-base"
    assert voices.port == 8027
    assert voices.util_text == "0.12"
    assert voices.kv_cache_bytes == 1536 * 2**20
    assert (voices.max_loras, voices.max_lora_rank) == (4, 16)
    assert voices.lora_modules == ("lv-yarros", "lv-hemingway")
    assert voices.lora_enabled and voices.runtime_lora
    assert voices.devices == ("0",)
    assert "--port 8027" in voices.cmdline


def test_voices_compose_util_from_environment() -> None:
    (voices,) = load_compose(DATA / "voices-compose.yaml", {"VOICES_UTIL": "0.11"}).services
    assert voices.util_text == "0.11"


# --- command forms ----------------------------------------------------------------------------


def test_vllm_serve_string_with_equals_and_positional_model(tmp_path: Path) -> None:
    service = one(
        tmp_path,
        """
services:
  chat:
    image: ghcr.io/acme/vllm-custom:1
    command: "vllm serve Qwen/Qwen3-4B --gpu-memory-utilization=0.25 --port=8031 --tensor-parallel-size 2"
    environment: ["CUDA_VISIBLE_DEVICES=1,2"]
""",
    )
    assert service.model == "Qwen/Qwen3-4B"
    assert service.util_text == "0.25"
    assert service.port == 8031
    assert service.tensor_parallel_size == 2
    assert service.visible == ("1", "2")
    assert service.version is None  # not the vLLM image: version unknown


def test_api_server_module_in_entrypoint_list_and_underscored_flags(tmp_path: Path) -> None:
    service = one(
        tmp_path,
        """
services:
  voices:
    image: python:3.12
    entrypoint: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    command: ["--model", "m", "--gpu_memory_utilization", "0.3", "--kv_cache_memory_bytes", "1073741824", "-tp", "1"]
    environment: {NVIDIA_VISIBLE_DEVICES: "3"}
""",
    )
    assert service.model == "m"
    assert service.util_text == "0.3"
    assert service.kv_cache_bytes == GiB
    assert service.devices == ("3",)


def test_vllm_image_with_args_only_and_registry_prefix(tmp_path: Path) -> None:
    service = one(
        tmp_path,
        """
services:
  s:
    image: docker.io/vllm/vllm-openai:v0.34.0
    command: --model m --port 8000
    gpus: all
""",
    )
    assert service.version == "0.34.0"
    assert service.util_text is None and service.kv_cache_bytes is None
    assert service.device_count == -1


def test_shell_wrapper_is_split_not_run(tmp_path: Path) -> None:
    service = one(
        tmp_path,
        """
services:
  s:
    image: ubuntu
    entrypoint: ["bash", "-c"]
    command: ["pip list && vllm serve m --gpu-memory-utilization 0.2 --port 9000; echo done"]
    environment: {CUDA_VISIBLE_DEVICES: "0"}
""",
    )
    assert service.util_text == "0.2"
    assert service.port == 9000


def test_non_vllm_services_are_skipped(tmp_path: Path) -> None:
    loaded = load_compose(
        write(
            tmp_path,
            """
services:
  db: {image: postgres:16}
  stt: {image: acme/parakeet, command: python3 /app/parakeet_server.py --port 8090}
""",
        ),
        {},
    )
    assert loaded.services == ()
    assert loaded.skipped == ("db", "stt")


def test_service_selection(tmp_path: Path) -> None:
    text = """
services:
  a: {image: vllm/vllm-openai:v0.11.0, command: [--model, a]}
  b: {image: vllm/vllm-openai:v0.11.0, command: [--model, b]}
  db: {image: postgres}
"""
    path = write(tmp_path, text)
    assert [s.name for s in load_compose(path, {}, service="b").services] == ["b"]
    with pytest.raises(ComposeError, match="no such service"):
        load_compose(path, {}, service="c")
    # `up -d db` starts no GPU service: nothing here to judge (the deploy check says so, exit 2).
    only_db = load_compose(path, {}, service="db")
    assert only_db.services == () and only_db.skipped == ("db",)


# --- LoRA, kv-cache, util ---------------------------------------------------------------------


def test_lora_modules_forms(tmp_path: Path) -> None:
    service = one(
        tmp_path,
        """
services:
  s:
    image: vllm/vllm-openai:v0.11.0
    command: >-
      --model m --lora-modules a=/x b=/y '{"name": "c", "path": "/z", "base_model_name": "m"}'
      --max-loras 3 --max-lora-rank 32
""",
    )
    assert service.lora_modules == ("a", "b", "c")
    assert (service.max_loras, service.max_lora_rank) == (3, 32)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8G", 8 * GiB),
        ("8g", 8 * 10**9),
        ("512M", 512 * 2**20),
        ("25.6k", 25_600),
        ("1T", 2**40),
        ("2147483648", 2 * GiB),
    ],
)
def test_vllm_bytes_reads_as_vllm_does(text: str, expected: int) -> None:
    assert vllm_bytes(text) == expected


@pytest.mark.parametrize("text", ["12 GB", "12GB", "12GiB", "1.5G", "abc", "-1"])
def test_vllm_bytes_refuses_what_vllm_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        vllm_bytes(text)


def test_kv_cache_with_space_and_unit_is_ambiguous(tmp_path: Path) -> None:
    caught = error(
        tmp_path,
        """
services:
  voices:
    image: vllm/vllm-openai:v0.11.0
    command: --model m --kv-cache-memory 12 GB
""",
    )
    assert caught.exit_code == 2
    assert caught.service == "voices"
    assert caught.argument == "--kv-cache-memory"
    assert "ambiguous" in str(caught) and "12G" in str(caught)


def test_kv_cache_quoted_with_space_names_argument(tmp_path: Path) -> None:
    caught = error(
        tmp_path,
        """
services:
  voices:
    image: vllm/vllm-openai:v0.11.0
    command: ["--model", "m", "--kv-cache-memory-bytes=12 GB"]
""",
    )
    assert caught.argument == "--kv-cache-memory-bytes"
    assert "12G" in str(caught)


@pytest.mark.parametrize("util", ["0", "abc", "1.5", "-0.1", "nan"])
def test_bad_util_is_refused(tmp_path: Path, util: str) -> None:
    caught = error(
        tmp_path,
        f"""
services:
  voices:
    image: vllm/vllm-openai:v0.11.0
    command: ["--model", "m", "--gpu-memory-utilization", "{util}"]
""",
    )
    assert caught.exit_code == 2
    assert (caught.service, caught.argument) == ("voices", "--gpu-memory-utilization")
    assert repr(util) in str(caught)


def test_flag_without_value_and_bad_ints(tmp_path: Path) -> None:
    assert (
        error(
            tmp_path, "services: {s: {image: vllm/vllm-openai, command: [--model, m, --port]}}"
        ).argument
        == "--port"
    )
    caught = error(
        tmp_path, "services: {s: {image: vllm/vllm-openai, command: [--max-loras, many]}}"
    )
    assert caught.argument == "--max-loras" and "'many'" in str(caught)
    caught = error(
        tmp_path, "services: {s: {image: vllm/vllm-openai, command: [--lora-modules, justaname]}}"
    )
    assert caught.argument == "--lora-modules"


def test_repeated_flag_takes_the_last_and_notes_it(tmp_path: Path) -> None:
    service = one(
        tmp_path,
        "services: {s: {image: vllm/vllm-openai, command: [--gpu-memory-utilization, '0.5', --gpu-memory-utilization, '0.2']}}",
    )
    assert service.util_text == "0.2"
    assert note_texts(service.notes) == [
        "--gpu-memory-utilization is given more than once; vLLM uses the last"
    ]


# --- interpolation ----------------------------------------------------------------------------


def test_interpolation_forms() -> None:
    env = {"A": "1", "EMPTY": ""}
    look = env.get
    assert interpolate("${A}", look) == "1"
    assert interpolate("$A-x", look) == "1-x"
    assert interpolate("${B:-0.11}", look) == "0.11"
    assert interpolate("${EMPTY:-d}", look) == "d"
    assert interpolate("${EMPTY-d}", look) == ""
    assert interpolate("${B-d}", look) == "d"
    assert interpolate("${B:-${A}}", look) == "1"
    assert interpolate("$$HOME costs $$5", look) == "$HOME costs $5"
    assert interpolate("${A:+set}", look) == "set"


def test_env_file_beside_compose_and_environment_wins(tmp_path: Path) -> None:
    text = """
services:
  s:
    image: vllm/vllm-openai:v0.11.0
    command: ["--gpu-memory-utilization", "${UTIL}", "--port", "${PORT}"]
    environment: ["CUDA_VISIBLE_DEVICES=${CARD}"]
"""
    env = "# the deploy's values\nexport UTIL=0.2\nPORT='8040'\nCARD=1 # comment\n"
    service = one(tmp_path, text, {"UTIL": "0.3"}, env)
    assert service.util_text == "0.3"
    assert service.port == 8040
    assert service.visible == ("1",)


def test_unknown_variable_without_default_names_service_and_variable(tmp_path: Path) -> None:
    caught = error(
        tmp_path,
        """
services:
  voices:
    image: vllm/vllm-openai:v0.11.0
    command: ["--gpu-memory-utilization", "${VOICES_UTIL}"]
""",
    )
    assert caught.exit_code == 2
    assert caught.service == "voices"
    assert "VOICES_UTIL" in str(caught) and "command[1]" in str(caught)


def test_required_variable_message(tmp_path: Path) -> None:
    caught = error(
        tmp_path, "services: {s: {image: vllm/vllm-openai, command: '--port ${P:?set the port}'}}"
    )
    assert "set the port" in str(caught)


def test_bad_env_file_line(tmp_path: Path) -> None:
    with pytest.raises(ComposeError, match=r"\.env: line 2"):
        load_compose(
            write(tmp_path, "services: {s: {image: vllm/vllm-openai}}", "A=1\nnot a pair\n"), {}
        )
    assert parse_env_file('A="x y"\nB=z', ".env") == {"A": "x y", "B": "z"}


# --- bad files --------------------------------------------------------------------------------


def test_not_yaml(tmp_path: Path) -> None:
    caught = error(tmp_path, "services: [unclosed\n  : :\n")
    assert (
        caught.exit_code == 2 and "not valid YAML" in str(caught) and "compose.yaml" in str(caught)
    )


def test_no_services(tmp_path: Path) -> None:
    assert "services" in str(error(tmp_path, "version: '3'\nvolumes: {}\n"))
    assert "services" in str(error(tmp_path, "- just\n- a list\n"))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ComposeError, match="no such file"):
        load_compose(tmp_path / "absent.yaml", {})


def test_python_tags_are_not_constructed(tmp_path: Path) -> None:
    caught = error(tmp_path, "services: !!python/object/apply:os.system ['true']\n")
    assert caught.exit_code == 2


# --- cards ------------------------------------------------------------------------------------


def _service(tmp_path: Path, extra: str) -> ComposeService:
    return one(
        tmp_path,
        f"services:\n  s:\n    image: vllm/vllm-openai:v0.11.0\n    command: [--model, m]\n{extra}",
    )


def test_cards_from_device_ids(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    service = _service(
        tmp_path,
        """    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, device_ids: ["2"], capabilities: [gpu]}]
""",
    )
    assert resolve_cards(service, "fv-ml1", fv_ml1_snapshot.cards) == (2,)


def test_cuda_visible_devices_indexes_the_containers_cards(
    tmp_path: Path, fv_ml1_snapshot: Snapshot
) -> None:
    service = _service(
        tmp_path,
        """    environment: {CUDA_VISIBLE_DEVICES: "1"}
    deploy:
      resources:
        reservations:
          devices: [{device_ids: ["2", "3"], capabilities: [gpu]}]
""",
    )
    assert resolve_cards(service, "fv-ml1", fv_ml1_snapshot.cards) == (3,)


def test_card_by_uuid(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    uuid = fv_ml1_snapshot.card(1).uuid
    assert uuid is not None
    service = _service(tmp_path, f"    environment: [NVIDIA_VISIBLE_DEVICES={uuid}]\n")
    assert resolve_cards(service, "fv-ml1", fv_ml1_snapshot.cards) == (1,)


def test_card_the_host_lacks(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    service = _service(tmp_path, "    environment: [CUDA_VISIBLE_DEVICES=7]\n")
    with pytest.raises(
        ComposeError, match="host fv-ml1 has cards 0–3; there is no card 7"
    ) as caught:
        resolve_cards(service, "fv-ml1", fv_ml1_snapshot.cards)
    assert caught.value.exit_code == 2
    assert caught.value.argument == "environment CUDA_VISIBLE_DEVICES"


def test_device_id_the_host_lacks(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    service = _service(
        tmp_path,
        "    deploy: {resources: {reservations: {devices: [{device_ids: ['5'], capabilities: [gpu]}]}}}\n",
    )
    with pytest.raises(ComposeError, match="no card 5"):
        resolve_cards(service, "fv-ml1", fv_ml1_snapshot.cards)


def test_tensor_parallel_needs_enough_cards(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    service = one(
        tmp_path,
        "services: {s: {image: vllm/vllm-openai, command: [-tp, '2'], environment: [CUDA_VISIBLE_DEVICES=0]}}",
    )
    with pytest.raises(ComposeError, match="needs 2 cards"):
        resolve_cards(service, "fv-ml1", fv_ml1_snapshot.cards)


def test_tensor_parallel_takes_the_first_visible(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    service = one(
        tmp_path,
        "services: {s: {image: vllm/vllm-openai, command: [--tensor-parallel-size=2], environment: ['CUDA_VISIBLE_DEVICES=2,0,1']}}",
    )
    assert resolve_cards(service, "fv-ml1", fv_ml1_snapshot.cards) == (2, 0)


def test_count_without_ids_is_noted(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    service = _service(
        tmp_path,
        "    deploy: {resources: {reservations: {devices: [{count: 1, capabilities: [gpu]}]}}}\n",
    )
    assert resolve_cards(service, "fv-ml1", fv_ml1_snapshot.cards) == (0,)
    assert any("by count" in note for note in service.notes)


def test_no_cards_named(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    service = _service(tmp_path, "")
    with pytest.raises(ComposeError, match="names no card"):
        resolve_cards(service, "fv-ml1", fv_ml1_snapshot.cards)


def test_image_version() -> None:
    assert image_version("vllm/vllm-openai:v0.11.0") == (True, "0.11.0")
    assert image_version("vllm/vllm-openai:0.10.2-cu128") == (True, "0.10.2")
    assert image_version("vllm/vllm-openai:latest") == (True, None)
    assert image_version("vllm/vllm-openai") == (True, None)
    assert image_version("registry.local:5000/vllm/vllm-openai:v0.34.0") == (True, "0.34.0")
    assert image_version("acme/not-vllm:v0.11.0") == (False, None)
