"""`gpuplan init`'s seat names and `match` patterns that hold over a restart (issue 31): names from
the model (through an interpreter, from Ollama's manifest), no random port in a `match`, one
pattern per worker group, no `^$`, and a warning naming each name it could not make stable."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from inventory.attribution import attribute
from inventory.fake import FakeNvml, h200_idle_card
from inventory.nvml import RawProcess
from inventory.poller import take_snapshot
from inventory.snapshot import Snapshot
from placement.cli.starter import RootFiles, Starter, anchored_match, base_name, starter_catalogue
from seats.loader import parse_catalogue, read_yaml
from seats.model import Catalogue

NOW = datetime(2026, 12, 4, 0, 0, tzinfo=UTC)
GIB = 2**30
ROOT = Path(__file__).resolve().parents[3]
OLLAMA_LOG = ROOT / "tests/placement/fit/engines/data/ollama/securetag-0.5.4-llama-3.1-8b-4090.log"


def runner_line() -> str:
    """The runner Ollama 0.5.4 started in that real log (its `starting llama server` cmd=…):
    Llama 3.1 8B from blob sha256-667b0c19…, on a random `--port 46753`."""
    text = OLLAMA_LOG.read_text(encoding="utf-8")
    found = re.search(r'msg="starting llama server" cmd="([^"]+)"', text)
    assert found is not None
    return found.group(1)


BLOB = "667b0c1932bc6ffc593ed1d03f895bf2dc8dc6df21db3042284a6f4416b06a29"


def write_manifest(root: Path) -> None:
    """Ollama's store as that runner saw it (OLLAMA_MODELS=/runpod-volume): the manifest of the
    model it pulled, in Ollama's manifest format (server/internal/manifest/manifest.go at
    v0.12.0: `layers`, each with digest, mediaType and size), its model layer the runner's blob."""
    manifest = root / "runpod-volume/manifests/registry.ollama.ai/library/llama3.1/latest"
    manifest.parent.mkdir(parents=True)
    layers = [
        {"digest": f"sha256:{BLOB}", "mediaType": "application/vnd.ollama.image.model"},
        {"digest": "sha256:" + "0" * 64, "mediaType": "application/vnd.ollama.image.template"},
    ]
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}), encoding="utf-8")


def snapshot_of(
    processes: dict[int, tuple[int, str, tuple[str, ...]]],
) -> Snapshot:
    """One host `h`: pid → (card, command line, ancestors' lines nearest first), 4 GiB each."""
    cards = {
        index: h200_idle_card(
            index,
            tuple(RawProcess(pid, 4 * GIB) for pid, (c, _, _) in processes.items() if c == index),
        )
        for index in sorted({card for card, _, _ in processes.values()})
    }
    fake = FakeNvml(
        list(cards.values()),
        cmdlines={pid: line for pid, (_, line, _) in processes.items()},
        parents={pid: parents for pid, (_, _, parents) in processes.items()},
    )
    return take_snapshot(fake, NOW, "h")


def starter(snapshot: Snapshot, root: Path | None = None) -> tuple[Starter, Catalogue]:
    files = (lambda pid: RootFiles(root)) if root is not None else None
    made = starter_catalogue(
        snapshot,
        source="a test",
        cuda_context_bytes=1277 * 2**20,
        cuda_context_note="default",
        files_of=files,
    )
    return made, parse_catalogue(read_yaml(made.text, "<init>"), "<init>")


@pytest.mark.parametrize(
    ("line", "name"),
    [
        # `vllm serve` through its interpreter: named after the model, not `vllm`.
        ("/usr/bin/python3 /usr/local/bin/vllm serve Qwen/Qwen3-8B --port 8000", "qwen3-8b"),
        ("python3 -m vllm.entrypoints.cli.main serve org/Voices-Base --port 1", "voices-base"),
        ("python3 -m vllm.entrypoints.openai.api_server --model /models/chat-large", "chat-large"),
        ("python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B", "llama-3.1-8b"),
        ("ollama serve", "ollama"),  # no model after `serve`: the program
    ],
)
def test_a_name_is_the_model_through_any_interpreter(line: str, name: str) -> None:
    assert base_name(line.split()) == name


def test_an_ollama_runner_is_named_from_its_manifest_and_matched_without_its_port(
    tmp_path: Path,
) -> None:
    line = runner_line()
    assert line.endswith("--parallel 4 --port 46753")
    write_manifest(tmp_path)
    made, catalogue = starter(snapshot_of({41: (0, line, ("/bin/ollama serve",))}), tmp_path)
    (seat,) = catalogue.seats
    assert seat.name == "llama3.1-latest"
    assert seat.engine.kind == "ollama"
    assert "# from Ollama's manifest registry.ollama.ai/library/llama3.1/latest" in made.text
    assert seat.match is not None and "46753" not in seat.match
    assert seat.match.endswith(r"--parallel 4 --port [0-9]+$")
    # The next start of the same model, on another random port, is still this seat.
    restarted = line.replace("--port 46753", "--port 41234")
    assert re.search(seat.match, restarted) is not None
    assert made.warnings == ()


def test_an_ollama_runner_whose_manifest_cannot_be_read_is_said_unstable(tmp_path: Path) -> None:
    # No manifest under the root (a snapshot taken elsewhere reads none at all).
    for root in (tmp_path, None):
        made, catalogue = starter(snapshot_of({41: (0, runner_line(), ())}), root)
        (seat,) = catalogue.seats
        assert seat.name == "ollama-667b0c1932bc"
        assert made.warnings == (
            "names init could not make stable, rename them before a restart moves them: "
            "ollama-667b0c1932bc (its model blob sha256-667b0c1932bc…: no manifest of it could "
            "be read)",
        )


def test_two_runners_told_apart_by_pid_not_by_their_random_ports() -> None:
    line = runner_line()
    other = line.replace("--ctx-size 8192", "--ctx-size 4096").replace("46753", "39001")
    made, catalogue = starter(snapshot_of({41: (0, line, ()), 42: (1, other, ())}))
    assert [s.name for s in catalogue.seats] == ["ollama-667b0c1932bc-41", "ollama-667b0c1932bc-42"]
    assert len(made.warnings) == 1
    assert (
        "ollama-667b0c1932bc-41 (told apart from its namesakes by its pid (its port is "
        in (made.warnings[0])
    )
    # Each still finds its own line and not the other's, whatever port it restarts on.
    first, second = catalogue.seats
    assert first.match is not None and second.match is not None
    assert re.search(first.match, line.replace("46753", "1")) is not None
    assert re.search(first.match, other) is None and re.search(second.match, line) is None


# TensorRT-LLM with --tp_size 2: trtllm-serve runs its model in MPI pool workers that mpi4py
# spawns as `python -m mpi4py.futures.server` (tensorrt_llm/llmapi/mpi_session.py,
# MpiPoolSession; mpi4py/futures/_lib.py): every server's workers have that one line. Their
# ancestors, nearest first: MPI's orted, then the trtllm-serve that started it.
WORKER = "/usr/bin/python3 -m mpi4py.futures.server"
SERVE_A = "/usr/local/bin/trtllm-serve Qwen/Qwen3-8B --tp_size 2 --port 8001"
SERVE_B = "/usr/local/bin/trtllm-serve meta-llama/Llama-3.1-8B --tp_size 2 --port 8002"
ORTED = "orted --hnp --set-sid --report-uri 27"


def test_each_trtllm_servers_workers_are_one_seat_matched_by_its_server() -> None:
    snapshot = snapshot_of(
        {
            11: (0, WORKER, (ORTED, SERVE_A)),
            12: (1, WORKER, (ORTED, SERVE_A)),
            21: (2, WORKER, (ORTED, SERVE_B)),
            22: (3, WORKER, (ORTED, SERVE_B)),
        }
    )
    made, catalogue = starter(snapshot)
    assert [(s.name, s.pinned_cards) for s in catalogue.seats] == [
        ("qwen3-8b", (0, 1)),
        ("llama-3.1-8b", (2, 3)),
    ]
    assert [s.match for s in catalogue.seats] == [
        anchored_match(SERVE_A, [SERVE_B]),
        anchored_match(SERVE_B, [SERVE_A]),
    ]
    assert all(s.engine.kind == "trtllm" and s.card_count == 2 for s in catalogue.seats)
    # Each worker is its own server's: no match finds a worker's own line.
    seats = {p.pid: p.seat for card in attribute(snapshot, catalogue).cards for p in card.processes}
    assert seats == {11: "qwen3-8b", 12: "qwen3-8b", 21: "llama-3.1-8b", 22: "llama-3.1-8b"}
    assert all(re.search(s.match or "", WORKER) is None for s in catalogue.seats)
    assert made.warnings == ()


def test_a_worker_whose_server_is_not_found_is_said(tmp_path: Path) -> None:
    made, catalogue = starter(snapshot_of({11: (0, WORKER, ())}))
    (seat,) = catalogue.seats
    assert seat.match == r"^/usr/bin/python3 -m mpi4py\.futures\.server$"
    assert made.warnings == (
        "seat server: pid 11 is a worker every server of its engine shares, and no server was "
        "found among its parents: its match finds every such worker of the host",
    )


def test_an_empty_command_line_gets_no_match_and_is_said() -> None:
    made, catalogue = starter(snapshot_of({5: (0, "", ()), 6: (0, "python3 serve.py", ())}))
    assert "'^$'" not in made.text and "^$" not in made.text
    empty = next(s for s in catalogue.seats if s.name == "pid-5")
    assert empty.match is None
    assert "seat pid-5: pid 5 had no command line; no match, so not attributed" in made.warnings
    assert made.warnings[-1] == (
        "names init could not make stable, rename them before a restart moves them: "
        "pid-5 (named after its pid)"
    )
