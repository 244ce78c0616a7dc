"""Benchmark of `gpuplan init` on a 64-process host: under 1 s (issue 27).

The host is 8 H200 cards with 8 processes each, the engines' command lines in turn (vLLM,
SGLang, TGI, TensorRT-LLM, Ollama, llama.cpp, other), read through a fake NVML behind the
project's `NvmlSource`. Timed: `init --live` in process (NVML read, build, validation, write),
`init --from FILE` in process, and `gpuplan init --from FILE` as a fresh process (start-up and
imports included); medians of the runs.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import inventory.poller
from bench import ROOT, cpu_s, quick
from inventory.fake import FakeNvml, h200_idle_card
from inventory.nvml import RawProcess
from inventory.snapshot import save_snapshot
from placement.cli.main import main
from seats.units import GiB, MiB

CARDS = 8
PER_CARD = 8
TARGET_S = 1.0
TAKEN = datetime(2026, 12, 4, tzinfo=UTC)
# One command line per engine kind, as /proc shows them; {n} makes each process its own.
LINES = (
    "python3 -m vllm.entrypoints.openai.api_server --model org/model-{n} --port {port} "
    "--gpu-memory-utilization 0.11 --kv-cache-memory-bytes 2G --api-key sk-{n}",
    "python3 -m sglang.launch_server --model-path org/model-{n} --port {port} "
    "--mem-fraction-static 0.1 --max-total-tokens 65536",
    "text-generation-launcher --model-id org/model-{n} --port {port} --cuda-memory-fraction 0.1",
    "trtllm-serve org/model-{n} --port {port} --kv_cache_free_gpu_memory_fraction 0.1",
    "/usr/bin/ollama runner --model /root/.ollama/models/blobs/sha256-{n} --port {port}",
    "/app/llama-server -m /models/model-{n}.gguf -ngl 99 -c 8192 --port {port}",
    "python3 /app/worker_{n}.py --port {port}",
)


def host() -> FakeNvml:
    """8 H200s × 8 processes of 1–8 GiB (+ a context's 518 MiB) each."""
    cards = []
    cmdlines: dict[int, str | None] = {}
    for card in range(CARDS):
        processes = []
        for slot in range(PER_CARD):
            n = card * PER_CARD + slot
            pid = 10_000 + n
            processes.append(RawProcess(pid, (slot + 1) * GiB + 518 * MiB))
            cmdlines[pid] = LINES[n % len(LINES)].format(n=n, port=8000 + n)
        cards.append(h200_idle_card(card, tuple(processes)))
    return FakeNvml(cards, cmdlines=cmdlines)


@contextlib.contextmanager
def _source(fake: FakeNvml) -> Iterator[FakeNvml]:
    yield fake


def _time(runs: int, once: Callable[[], None]) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each run."""
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), cpu_s()
        once()
        wall.append(time.perf_counter() - start)
        cpu.append(cpu_s() - start_cpu)
    return wall, cpu


def run() -> str:
    """The Markdown section: one row per way of running init, median seconds."""
    runs = 3 if quick() else 7
    fake = host()
    with tempfile.TemporaryDirectory(prefix="gpuplan-bench-init-") as scratch:
        folder = Path(scratch)
        snapshot = folder / "host.snapshot.json"
        save_snapshot(inventory.poller.take_snapshot(fake, TAKEN, "bench-host"), snapshot)
        counter = iter(range(10**6))

        def out() -> str:
            return str(folder / f"out-{next(counter)}.yaml")

        def live() -> None:
            argv = ["init", "--live", "--host", "bench-host", "--no-calibrate", "--out", out()]
            if main(argv) != 0:
                raise RuntimeError("init --live failed")

        def from_file() -> None:
            if main(["init", "--from", str(snapshot), "--out", out()]) != 0:
                raise RuntimeError("init --from failed")

        def fresh() -> None:
            command = [sys.executable, "-m", "placement", "init", "--from", str(snapshot)]
            command += ["--out", out()]
            subprocess.run(command, check=True, cwd=ROOT, capture_output=True)

        original = inventory.poller.open_source
        inventory.poller.open_source = lambda: _source(fake)  # type: ignore[assignment]
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # "wrote …" lines
                rows = [
                    ("`init --live` in process (fake NVML)", _time(runs, live)),
                    ("`init --from FILE` in process", _time(runs, from_file)),
                ]
        finally:
            inventory.poller.open_source = original  # type: ignore[assignment]
        rows.append(("`gpuplan init --from FILE`, a fresh process", _time(runs, fresh)))
    processes = CARDS * PER_CARD
    worst = max(statistics.median(wall) for _, (wall, _) in rows)
    verdict = "met" if worst < TARGET_S else "MISSED"
    lines = [
        "## init",
        "",
        f"`gpuplan init` on a host of {CARDS} H200 cards × {PER_CARD} processes ({processes} "
        f"seats, command lines of every engine kind), through a fake NVML behind `NvmlSource`; "
        f"median of {runs} runs each. Target: under {TARGET_S:g} s ({verdict}). The CPU column "
        "(user + system, the child's for the fresh process) is what a busy machine does not move.",
        "",
        "| run | processes | median s | min s | max s | CPU s (median) |",
        "|---|---|---|---|---|---|",
        *(
            f"| {name} | {processes} | {statistics.median(wall):.3f} | {min(wall):.3f} "
            f"| {max(wall):.3f} | {statistics.median(cpu):.3f} |"
            for name, (wall, cpu) in rows
        ),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
