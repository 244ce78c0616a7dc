"""Issue 12's reading cases: cards as docker reads them, commands as the shell reads them.

Real files under tmp_path; nothing is run.
"""

from __future__ import annotations

from pathlib import Path

from inventory.snapshot import Snapshot
from placement.check.compose import ComposeService, load_compose, resolve_cards

GPU = "    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all, capabilities: [gpu]}]}}}\n"


def one(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> ComposeService:
    path = tmp_path / "compose.yaml"
    path.write_text(text, encoding="utf-8")
    loaded = load_compose(path, environ or {})
    assert loaded.errors == ()
    (service,) = loaded.services
    return service


def test_comma_joined_device_ids(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    service = one(
        tmp_path,
        "services:\n  v:\n    image: vllm/vllm-openai:v0.11.0\n    command: [--tensor-parallel-size, '2']\n"
        "    deploy: {resources: {reservations: {devices: [{driver: nvidia, device_ids: ['0,1'], capabilities: [gpu]}]}}}\n",
    )
    assert service.devices == ("0", "1")
    assert resolve_cards(service, "fv-ml1", fv_ml1_snapshot.cards) == (0, 1)


def test_cdi_names(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    base = "services:\n  v:\n    image: vllm/vllm-openai:v0.11.0\n    devices: ['{}']\n"
    assert one(tmp_path, base.replace("{}", "nvidia.com/gpu=2")).devices == ("2",)
    uuid = fv_ml1_snapshot.cards[3].uuid
    service = one(tmp_path, base.replace("{}", f"nvidia.com/gpu={uuid}"))
    assert resolve_cards(service, "fv-ml1", fv_ml1_snapshot.cards) == (3,)
    every = one(tmp_path, base.replace("{}", "nvidia.com/gpu=all"))
    assert every.device_count == -1 and every.devices is None


def test_count_all_and_gpus_all(tmp_path: Path) -> None:
    counted = one(tmp_path, "services:\n  v:\n    image: vllm/vllm-openai\n" + GPU)
    assert counted.device_count == -1
    gpus = one(tmp_path, "services:\n  v:\n    image: vllm/vllm-openai\n    gpus: all\n")
    assert gpus.device_count == -1


def test_folded_command_with_continuations(tmp_path: Path) -> None:
    service = one(
        tmp_path,
        "services:\n  v:\n    image: vllm/vllm-openai:v0.11.0\n    command: >\n"
        "      --model m \\\n      --port 8001 \\\n      --gpu-memory-utilization 0.41\n" + GPU,
    )
    assert service.util_text == "0.41" and service.port == 8001 and service.model == "m"


def test_literal_command_with_continuations(tmp_path: Path) -> None:
    service = one(
        tmp_path,
        "services:\n  v:\n    image: ubuntu\n    entrypoint: /bin/bash\n    command:\n      - -c\n"
        "      - |\n        pip install x\n        exec vllm serve m \\\n          --gpu-memory-utilization=0.33 \\\n"
        "          --tensor-parallel-size 1\n" + GPU,
    )
    assert service.util_text == "0.33" and service.model == "m"


def test_shell_script_reads_the_containers_environment(tmp_path: Path) -> None:
    service = one(
        tmp_path,
        "services:\n  v:\n    image: ubuntu\n"
        '    command: ["bash", "-c", "exec python3 -m vllm.entrypoints.openai.api_server --gpu-memory-utilization $$UTIL --port ${PORT}"]\n'
        "    environment: {UTIL: '0.27'}\n" + GPU,
        {"PORT": "9001"},
    )
    assert service.util_text == "0.27" and service.port == 9001


def test_string_entrypoint(tmp_path: Path) -> None:
    service = one(
        tmp_path,
        "services:\n  v:\n    image: ubuntu\n    entrypoint: vllm serve m --max-loras 2\n"
        "    command: --gpu-memory-utilization 0.5\n" + GPU,
    )
    assert service.util_text == "0.5" and service.max_loras == 2


def test_vllm_config_mounted_from_beside_the_file(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "vllm.yaml").write_text(
        "gpu-memory-utilization: 0.6\ntensor_parallel_size: 2\nport: 8100\nenable-lora: true\n",
        encoding="utf-8",
    )
    text = (
        "services:\n  v:\n    image: vllm/vllm-openai:v0.11.0\n"
        "    command: [m, --config, /etc/vllm/vllm.yaml, --port, '8200']\n"
        "    volumes: ['./conf:/etc/vllm:ro']\n" + GPU
    )
    service = one(tmp_path, text)
    assert service.util_text == "0.6" and service.tensor_parallel_size == 2
    assert service.port == 8200  # the command line wins over the file
    assert service.model == "m" and service.lora_enabled and service.unknown is None
    elsewhere = one(tmp_path, text.replace("./conf:/etc/vllm:ro", "models:/models"))
    assert elsewhere.unknown is not None and "/etc/vllm/vllm.yaml" in elsewhere.unknown


def test_gpu_service_that_is_not_vllm_is_kept_without_an_engine(tmp_path: Path) -> None:
    service = one(
        tmp_path,
        "services:\n  stt:\n    image: acme/parakeet\n    command: python3 serve.py\n" + GPU,
    )
    assert service.engine is None and service.argv == ("python3", "serve.py")


def test_unset_variable_in_a_service_without_gpu_is_not_refused(tmp_path: Path) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n  ui:\n    image: 'acme/ui:${TAG}'\n  v:\n    image: vllm/vllm-openai\n" + GPU,
        encoding="utf-8",
    )
    loaded = load_compose(path, {})
    assert loaded.errors == () and loaded.skipped == ("ui",)
