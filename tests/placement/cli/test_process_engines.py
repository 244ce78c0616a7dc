"""Engines named in `snapshot` and `ledger` from real process command lines (DESIGN.md, Engines:
"Recognised … in process command lines").

Each command line below is copied from the public page named beside it, as the process table
shows it (shell quotes and line continuations are not part of /proc/PID/cmdline). The process
that holds an engine's GPU memory is often not the one the user started: vLLM's engine core and
workers, SGLang's schedulers, TGI's shards and Ollama's runners carry titles or commands of their
own, and NVML lists those.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from inventory.fake import FakeNvml, h200_idle_card
from inventory.nvml import RawProcess
from inventory.poller import FAKE_ENV, take_snapshot
from inventory.snapshot import save_snapshot
from placement.cli.main import main
from placement.fit.engines.registry import process_engine, recognise
from seats.model import Engine as EngineSpec

GIB = 2**30

REAL_CMDLINES: list[tuple[str, str | None, str]] = [
    (
        # `ps` of a V1 engine that outlived its API server.
        "VLLM::EngineCore",
        "vllm",
        "https://github.com/vllm-project/vllm/issues/25127",
    ),
    (
        # `ps -ef` under vllm-omni: its stage engine cores carry vLLM's `VLLM::` title too.
        "VLLM::StageEngineCoreProc_DP0",
        "vllm",
        "https://github.com/vllm-project/vllm/issues/43060",
    ),
    (
        "python -m vllm.entrypoints.openai.api_server --served-model-name Yi-1.5-34B-Chat "
        "--model /workspace/sdb/models/Yi/Yi-1.5-34B-Chat/ --port 8001 "
        "--gpu-memory-utilization 0.9 --swap-space 0 --tensor-parallel-size 4",
        "vllm",
        "https://github.com/vllm-project/vllm/issues/7553",
    ),
    (
        # nvidia-smi's process name of a data-parallel SGLang scheduler holding 100,998 MiB.
        "sglang::scheduler_DP0_TP0_EP0",
        "sglang",
        "https://github.com/sgl-project/sglang/issues/23627",
    ),
    (
        "python -m sglang.launch_server --model Qwen/Qwen2.5-1.5B-Instruct "
        "--attention-backend triton --mem-fraction-static 0.85 --schedule-policy lpm",
        "sglang",
        "github.com/shahidmuneer-skku/promptpeek-attack shahid/run_sglang.sh",
    ),
    (
        # A TGI shard as `ps -ax` lists it in a text-generation-inference 1.4 pod; the launcher
        # starts it as Command::new("text-generation-server") with `serve MODEL --uds-path …`
        # (launcher/src/main.rs, shard_manager; docs/source/architecture.md, "Command Line
        # Interface").
        "/opt/conda/bin/python3.10 /opt/conda/bin/text-generation-server serve "
        "google/flan-t5-small --uds-path /tmp/text-generation-server --logger-level INFO "
        "--json-output --quantize bitsandbytes",
        "tgi",
        "https://github.com/huggingface/text-generation-inference/blob/main/docs/source/architecture.md",
    ),
    (
        "text-generation-launcher --model-id meta-llama/Llama-2-13b-chat-hf",
        "tgi",
        "https://github.com/huggingface/text-generation-inference/issues/926",
    ),
    (
        # Ollama 0.6.8's runner ("starting llama server" cmd=…).
        "/usr/local/bin/ollama runner --model /usr/share/ollama/.ollama/models/blobs/"
        "sha256-c4c7c3cb6da260df1fe1d3cfd090a32dc7cc348f1278158be18e301f390d6f6e --ctx-size 32768 "
        "--batch-size 512 --n-gpu-layers 65 --verbose --threads 32 --flash-attn --parallel 1 "
        "--tensor-split 22,22,21 --port 43719",
        "ollama",
        "https://github.com/ollama/ollama/issues/10740",
    ),
    (
        # The same runner from an install outside ~/.ollama (OLLAMA_MODELS=/mnt/data/ollama).
        "/mnt/data/ollama/bin/ollama runner --ollama-engine --model /mnt/data/ollama/blobs/"
        "sha256-e8ad13eff07a78d89926e9e8b882317d082ef5bf9768ad7b50fcdbbcd63748de --ctx-size 8192 "
        "--batch-size 512 --threads 42 --no-mmap --parallel 2 --port 35253",
        "ollama",
        "https://github.com/atineiatte/deep-research-at-home/issues/14",
    ),
    (
        # Ollama 0.1.40's runner, before `ollama runner`: a llama.cpp server of its own.
        "/tmp/ollama1711348412/runners/cpu_avx2/ollama_llama_server --model /root/.ollama/models/"
        "blobs/sha256-6a0746a1ec1aef3e7ec53868f220ff6e389f6f8ef87a01d77c96807de94ca2aa "
        "--ctx-size 2048 --batch-size 512 --embedding --log-disable --parallel 1 --port 38033",
        "ollama",
        "https://github.com/ollama/ollama/issues/2809",
    ),
    (
        # Ollama 0.5's runner: its own llama.cpp server binary, started with `runner`.
        "/usr/local/lib/ollama/runners/cuda_v12_avx/ollama_llama_server runner --model "
        "/home/khammitt/.ollama/models/blobs/"
        "sha256-5c56bb0256a2c402e95282a29bb5cb747bb805eda0e14a84b1f6c594a297ec1a --ctx-size 8192 "
        "--batch-size 512 --n-gpu-layers 41 --threads 8 --parallel 4 --port 41813",
        "ollama",
        "https://github.com/ollama/ollama/issues/8525",
    ),
    (
        # Its trailing --chat-template-kwargs (a quoted JSON object) left out.
        "./build/bin/llama-server -m ./muse-glimmer/muse-glimmer-30B-kquant-dynamic.gguf "
        "--mmproj ./muse-glimmer/mmproj-kquant.gguf -a muse-glimmer -ngl 99 -c 131072 -np 1 "
        "--host 127.0.0.1 --port 8080 --api-key muse-glimmer --jinja",
        "llamacpp",
        "https://github.com/meta-models/meta-oss-cookbook/pull/25",
    ),
    (
        "trtllm-serve TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "trtllm",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/main/docs/source/quick-start-guide.md",
    ),
    (
        # A GPU process no engine starts (an image generation API).
        "python main.py --port 5001",
        None,
        "https://github.com/mrhan1993/Fooocus-API/issues/17",
    ),
]


def _line(source: str) -> str:
    """The command line taken from the page whose address ends with `source`."""
    return next(line for line, _, page in REAL_CMDLINES if page.endswith(source))


@pytest.mark.parametrize("case", REAL_CMDLINES, ids=lambda c: c[0][:40])
def test_the_engine_of_a_real_process_command_line(case: tuple[str, str | None, str]) -> None:
    cmdline, kind, _source = case
    found = process_engine(cmdline)
    assert (found.kind if found is not None else None) == kind
    # The same answer as compose recognition gives the same words.
    again = recognise(cmdline.split())
    assert (again.kind if again is not None else None) == kind


def test_ollamas_llama_server_is_ollamas_wherever_its_store_is() -> None:
    # Not a captured line: the argv ollama/ollama llm/llama_server.go (startLlamaServer, at
    # 00f6d620) gives lib/ollama/llama-server (`--model PATH --port N --host 127.0.0.1
    # --no-webui --offline -c N -np N`), with the model path of the runner of
    # deep-research-at-home#14 above, a store outside ~/.ollama (OLLAMA_MODELS).
    store = _line("deep-research-at-home/issues/14").split("--model ")[1].split()[0]
    assert "/.ollama/" not in store
    argv = "/mnt/data/ollama/lib/ollama/llama-server --model {} --port 40155 --host 127.0.0.1 "
    argv += "--no-webui --offline -c 16384 -np 2"
    assert process_engine(argv.format(store)).kind == "ollama"  # type: ignore[union-attr]
    # The same server on a GGUF file of one's own is llama.cpp's.
    assert process_engine(argv.format("/models/q4.gguf")).kind == "llamacpp"  # type: ignore[union-attr]


def test_tensorrt_llms_mpi_workers_are_its_own() -> None:
    # Not a captured line: trtllm-serve's model runs in mpi4py pool workers
    # (tensorrt_llm/llmapi/mpi_session.py, MpiPoolSession), which mpi4py spawns as
    # `sys.executable -m mpi4py.futures.server` (mpi4py/futures/_lib.py, client_spawn).
    assert process_engine("/usr/bin/python3 -m mpi4py.futures.server").kind == "trtllm"  # type: ignore[union-attr]
    # mpi4py's own command-line runner is no pool worker.
    assert process_engine("/usr/bin/python3 -m mpi4py train.py") is None


def test_a_declared_engine_wins_and_other_defers_to_the_command_line() -> None:
    vllm_core = "VLLM::EngineCore"
    assert process_engine(vllm_core, EngineSpec(kind="sglang")).kind == "sglang"  # type: ignore[union-attr]
    assert process_engine(None, EngineSpec(kind="tgi")).kind == "tgi"  # type: ignore[union-attr]
    assert process_engine(vllm_core, EngineSpec()).kind == "vllm"  # type: ignore[union-attr]
    assert process_engine(None, EngineSpec()) is None
    assert process_engine("") is None


def test_a_title_is_read_only_as_the_first_word() -> None:
    # `VLLM::` names a process title; the words of another command line never do.
    assert process_engine("python3 bench.py --label VLLM::EngineCore") is None


# --- through a snapshot (fake NVML) and the ledger (SQLite) ----------------------------------

CATALOGUE = """\
hosts:
  gpu-a:
    cards: 2
    card_total: 150754820096
    cuda_context: 518 MiB
    margin: 256 MiB
seats:
  - name: chat
    host: gpu-a
    gpus: [0]
    resident: 30 GiB
    state: running
    match: 'start-chat'
    engine: {kind: tgi}
  - name: embed
    host: gpu-a
    gpus: [0]
    resident: 12 GiB
    state: running
    match: 'Yi-1.5-34B-Chat'
"""

SGLANG = _line("sglang/issues/23627")
VLLM_API = _line("vllm/issues/7553")
FOOOCUS = _line("Fooocus-API/issues/17")
PROCESSES = {
    # card 0: a seat that declares TGI behind a wrapper no engine recognises, a seat that
    # declares none running vLLM's server, and SGLang's scheduler that no seat matches.
    4101: (0, 30 * GIB, "/bin/sh /srv/start-chat.sh"),
    4117: (0, 12 * GIB, VLLM_API),
    4242: (0, 20 * GIB, SGLANG),
    # card 1: a foreign process of no engine.
    5230: (1, 9 * GIB, FOOOCUS),
}


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    cards = [
        h200_idle_card(
            index,
            tuple(
                RawProcess(pid, used) for pid, (card, used, _) in PROCESSES.items() if card == index
            ),
        )
        for index in (0, 1)
    ]
    fake = FakeNvml(cards, cmdlines={pid: line for pid, (_, _, line) in PROCESSES.items()})
    recorded = take_snapshot(fake, datetime.now(UTC), "gpu-a")
    replay = tmp_path / "replay.json"
    save_snapshot(recorded, replay)
    monkeypatch.setenv(FAKE_ENV, str(replay))
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    catalogue = tmp_path / "gpu-a.yaml"
    catalogue.write_text(CATALOGUE)
    return catalogue, tmp_path / "ledger.sqlite"


def test_snapshot_names_each_processs_engine(
    host: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue, db = host
    assert main(["snapshot", "--catalogue", str(catalogue), "--ledger", str(db)]) == 0
    out = capsys.readouterr().out
    card0 = next(line for line in out.splitlines() if line.lstrip().startswith("0 "))
    assert card0.endswith(
        "3 proc: chat (TGI) embed (vLLM) pid 4242 (SGLang, 20.00 GiB, no seat's match)"
    )
    card1 = next(line for line in out.splitlines() if line.lstrip().startswith("1 "))
    assert card1.endswith("1 proc: pid 5230 (9.00 GiB, no seat's match)")
    assert "stored in ledger" in out


def test_snapshot_without_a_catalogue_names_engines_by_command_line(
    host: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["snapshot"]) == 0
    out = capsys.readouterr().out
    # Nothing was matched, so nothing is said of a match; the wrapper shows no engine.
    assert (
        "3 proc: pid 4101 (30.00 GiB) pid 4117 (vLLM, 12.00 GiB) pid 4242 (SGLang, 20.00 GiB)"
        in out
    )
    assert "no seat's match" not in out


def test_the_ledger_names_seats_and_foreign_processes_engines(
    host: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue, db = host
    assert main(["snapshot", "--catalogue", str(catalogue), "--ledger", str(db), "--json"]) == 0
    capsys.readouterr()
    assert main(["ledger", "--catalogue", str(catalogue), "--ledger", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    seat_rows = {
        line.split()[0]: line.split()[1] for line in lines if line.startswith(("chat ", "embed "))
    }
    assert seat_rows == {"chat": "TGI", "embed": "vLLM"}
    foreign = [line.split() for line in lines if line.startswith(("0 ", "1 ")) and "GiB" in line]
    foreign = [row for row in foreign if row[1] in ("4242", "5230")]
    assert [row[:5] for row in foreign] == [
        ["0", "4242", "20.00", "GiB", "SGLang"],
        ["1", "5230", "9.00", "GiB", "-"],
    ]
    assert main(["ledger", "--catalogue", str(catalogue), "--ledger", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["hosts"][0]
    assert {s["seat"]: s["engine"] for s in data["seats"]} == {"chat": "tgi", "embed": "vllm"}
    assert [(p["pid"], p["engine"], p["used_bytes"]) for p in data["foreign"]] == [
        (4242, "sglang", 20 * GIB),
        (5230, None, 9 * GIB),
    ]


def test_a_seats_port_match_does_not_claim_its_engine_core(tmp_path: Path) -> None:
    # docs/engines.md: a process title carries no arguments, so the engine core of a seat
    # matched by its port is foreign; the ledger still says which engine squeezed the card.
    from placement.report.ledger_view import build_ledger, ledger_json
    from seats.loader import load_catalogue

    catalogue = tmp_path / "c.yaml"
    catalogue.write_text(
        CATALOGUE.replace("match: 'Yi-1.5-34B-Chat'", "match: 'vllm.*--port[ =]8001'")
    )
    core = h200_idle_card(0, (RawProcess(77637, 12 * GIB),))
    fake = FakeNvml([core, h200_idle_card(1)], cmdlines={77637: _line("vllm/issues/25127")})
    snapshot = take_snapshot(fake, datetime.now(UTC), "gpu-a")
    data = ledger_json(build_ledger(load_catalogue(catalogue), [snapshot], ["test"]))["hosts"][0]
    assert [(p["pid"], p["engine"]) for p in data["foreign"]] == [(77637, "vllm")]
    embed = next(s for s in data["seats"] if s["seat"] == "embed")
    assert embed["status"] == "absent" and embed["engine"] is None
