"""Measures a host's `cuda_context`: what a new engine process takes on its card before its gate reads free memory.

NVML free just before a fresh process starts, minus what that process reads as free after
doing what a vLLM worker does first (docs/facts.md §1). PyTorch runs in a child process only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from inventory.nvml import PynvmlSource
from seats.errors import CannotDecideError

MIB = 2**20
STAGES = ("context", "nccl", "cublas")
STAGE_TEXT = {
    "context": "CUDA context only",
    "nccl": "+ NCCL (world size 1, one all-reduce)",
    "cublas": "+ cuBLAS/cuBLASLt warm-up (bf16, fp32), gc + empty_cache",
}

# The child repeats a vLLM worker's steps before its gate, in that order, and prints what
# cudaMemGetInfo says after each. It must be a fresh process: a context already made would hide.
CHILD = r"""
import gc, json, os, sys, tempfile
import torch
out = {}
def read(stage):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    out[stage] = [int(free), int(total)]
torch.cuda.set_device(0)
read("context")
import torch.distributed as dist
store = os.path.join(tempfile.mkdtemp(prefix="gpuplan-calibrate-"), "store")
dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1)
t = torch.ones(1024, device="cuda")
dist.all_reduce(t)
del t
read("nccl")
for dtype in (torch.bfloat16, torch.float32):
    a = torch.randn(1024, 1024, device="cuda", dtype=dtype)
    b = a @ a
    del a, b
gc.collect()
torch.cuda.empty_cache()
read("cublas")
dist.destroy_process_group()
print("GPUPLAN-CALIBRATE " + json.dumps(out), flush=True)
"""


@dataclass(frozen=True)
class CalibrationRun:
    """One fresh process: NVML free before it started, and what it read after each stage."""

    nvml_free_before_bytes: int
    cuda_total_bytes: int
    cuda_free_bytes: dict[str, int]

    def taken_bytes(self, stage: str) -> int:
        """NVML free before the process minus its own cudaMemGetInfo free after `stage`."""
        return self.nvml_free_before_bytes - self.cuda_free_bytes[stage]


@dataclass(frozen=True)
class Calibration:
    """Runs on one card, and the value to write as the host's `cuda_context`."""

    gpu: int
    uuid: str | None
    name: str | None
    nvml_total_bytes: int
    nvml_reserved_bytes: int | None
    runs: tuple[CalibrationRun, ...]
    other_processes: int = 0

    def cuda_context_bytes(self) -> int:
        """The largest full-stage figure over the runs, rounded up to whole MiB (the safe side)."""
        worst = max(run.taken_bytes("cublas") for run in self.runs)
        return -(-worst // MIB) * MIB


def torch_available() -> bool:
    """Whether PyTorch can be imported by this interpreter (without importing it)."""
    return importlib.util.find_spec("torch") is not None


def _child_env(uuid: str | None, gpu: int) -> dict[str, str]:
    env = dict(os.environ)
    # NVML numbers cards by PCI bus; CUDA by speed unless told. Pin the child to our card.
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env["CUDA_VISIBLE_DEVICES"] = uuid or str(gpu)
    env.setdefault("NCCL_DEBUG", "WARN")
    return env


def run_child(
    uuid: str | None, gpu: int, *, python: str = sys.executable, timeout_s: float = 180
) -> dict[str, list[int]]:
    """Start the calibration child on the card and return its readings per stage."""
    with tempfile.TemporaryDirectory(prefix="gpuplan-calibrate-") as scratch:
        script = Path(scratch) / "gpuplan_calibrate_child.py"
        script.write_text(CHILD, encoding="utf-8")
        try:
            done = subprocess.run(
                [python, str(script)],
                env=_child_env(uuid, gpu),
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise CannotDecideError(
                f"calibration process on card {gpu} took over {timeout_s:g} s"
            ) from exc
    for line in done.stdout.splitlines():
        if line.startswith("GPUPLAN-CALIBRATE "):
            data: dict[str, list[int]] = json.loads(line.removeprefix("GPUPLAN-CALIBRATE "))
            return data
    tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
    raise CannotDecideError(
        f"calibration process on card {gpu} failed (exit {done.returncode}): " + " | ".join(tail)
    )


def measure(gpu: int = 0, runs: int = 3, *, source: PynvmlSource | None = None) -> Calibration:
    """Measure `runs` fresh processes on card `gpu`; CannotDecideError without torch or NVML."""
    if not torch_available():
        raise CannotDecideError(
            "calibrate needs PyTorch with CUDA in this Python (pip install torch); "
            "it starts a CUDA process the way a vLLM worker does"
        )
    owned = source is None
    nvml = PynvmlSource() if source is None else source
    nvml.open()
    try:
        count = nvml.card_count()
        if not 0 <= gpu < count:
            raise CannotDecideError(f"no card {gpu}: NVML sees {count} card(s)")
        card = nvml.read_card(gpu)
        measured: list[CalibrationRun] = []
        for _ in range(runs):
            before = nvml.read_card(gpu).free_bytes
            if before is None:  # pragma: no cover - read_card raises instead
                raise CannotDecideError(f"card {gpu}: NVML gave no free memory")
            data = run_child(card.uuid, gpu)
            measured.append(
                CalibrationRun(
                    nvml_free_before_bytes=before,
                    cuda_total_bytes=data["context"][1],
                    cuda_free_bytes={stage: data[stage][0] for stage in STAGES},
                )
            )
    finally:
        if owned:
            nvml.close()
    return Calibration(
        gpu=gpu,
        uuid=card.uuid,
        name=card.name,
        nvml_total_bytes=card.total_bytes or 0,
        nvml_reserved_bytes=card.reserved_bytes,
        runs=tuple(measured),
        other_processes=len(card.processes),
    )


def render(calibration: Calibration) -> str:
    """The measurement as a table and the `cuda_context:` line for the catalogue."""
    lines = [
        f"card {calibration.gpu}: {calibration.name} ({calibration.uuid})",
        "taken before the gate reads free memory (MiB, per run):",
    ]
    for stage in STAGES:
        figures = ", ".join(f"{run.taken_bytes(stage) / MIB:,.1f}" for run in calibration.runs)
        lines.append(f"  {STAGE_TEXT[stage]:<60} {figures}")
    reserved = calibration.nvml_reserved_bytes
    total = calibration.runs[0].cuda_total_bytes if calibration.runs else 0
    if reserved is not None:
        expected = calibration.nvml_total_bytes - reserved
        same = "equal" if total == expected else f"differ by {total - expected:,} B"
        lines.append(f"CUDA total {total:,} B; NVML total − reserved {expected:,} B: {same}")
    if calibration.other_processes:
        # Another process growing or shrinking between the two readings moves the figure.
        lines.append(
            f"warning: {calibration.other_processes} other process(es) held card {calibration.gpu}; "
            "measure on an idle card for a clean figure"
        )
    context = calibration.cuda_context_bytes()
    lines.append(f"cuda_context: {context // MIB} MiB   # put under hosts.<host> in the catalogue")
    return "\n".join(lines)
