"""gpuplan's resident from an `engine.profile` against a real card: predicted vs NVML per process.

A child process (torch stands in for vLLM: it does not run vLLM) takes its CUDA context, then a
model-sized tensor (the profile's weights), then the non-KV bytes (allocated and freed back to
torch's cache, as vLLM's activation peak stays reserved), then the KV cache the profile implies
(the pinned `kv_cache_memory`, or ceil(util × CUDA total) − weights − non_kv). After each step the
parent reads NVML's per-process bytes; gpuplan's prediction is weights + non_kv + KV bytes +
cuda_context (`placement/fit/resident_sum.py`, the formula `check` warns with). Prints a Markdown
report with a PASS/FAIL table and exits 1 on a miss.

Imports only the standard library, nvidia-ml-py (through inventory.nvml), torch (in the child)
and pydantic-free parts of this repository.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proof_kit import MIB, Report, cotenant, mib  # noqa: E402

from placement.fit.resident_sum import leftover_kv_bytes, request_bytes, resident_bytes  # noqa: E402
from seats.units import parse_bytes  # noqa: E402

# The fv-ml1 seat of issue 15 with a Qwen3-4B profile (tests/placement/cli/test_check_kv.py).
DEFAULTS = {"weights": "8044936192", "non_kv": "300 MiB", "kv_cache_memory": "1536 MiB"}
BYTES_PER_TOKEN = 147_456  # Qwen3-4B: 2 × 36 layers × 8 KV heads × head dim 128 × 2 B
TOLERANCE_BYTES = 64 * MIB  # torch's allocator rounds each block; a first kernel loads modules

# Steps driven over stdin/stdout: "context", then one tensor per word the parent sends.
CHILD = r"""
import sys
import torch
torch.cuda.set_device(0)
torch.ones(1, device="cuda").add_(1)  # the first kernel loads CUDA modules: part of the context
torch.cuda.synchronize()
print("context", flush=True)
kept = []
for line in sys.stdin:
    words = line.split()
    if not words or words[0] == "done":
        break
    size = int(words[1])
    t = torch.empty(size, dtype=torch.uint8, device="cuda")
    t.fill_(1)
    torch.cuda.synchronize()
    if words[0] == "transient":
        del t  # freed to torch's cache, still reserved on the card (vLLM's activation peak)
    else:
        kept.append(t)
    print("ok", flush=True)
"""


@dataclass(frozen=True)
class Part:
    """One part of the resident: what gpuplan predicts, and what NVML saw the process take for it."""

    name: str
    predicted_bytes: int
    observed_bytes: int | None

    @property
    def difference_bytes(self) -> int | None:
        return None if self.observed_bytes is None else self.observed_bytes - self.predicted_bytes


def kv_bytes(
    weights: int, non_kv: int, *, pinned: int | None, util: Decimal | None, cuda_total: int
) -> int:
    """The KV cache the profile implies: the pin, else the request's leftover (as `check`)."""
    if pinned is not None:
        return pinned
    if util is None:
        raise ValueError("give --kv-cache-memory or --util: an unbounded KV cache has no size")
    return leftover_kv_bytes(request_bytes(util, cuda_total), weights, non_kv)


def steps(weights: int, non_kv: int, kv: int) -> list[tuple[str, str, int]]:
    """What the child allocates, in vLLM's order: (part, how it holds it, bytes)."""
    return [("weights", "keep", weights), ("non_kv", "transient", non_kv), ("KV cache", "keep", kv)]


def verdict_table(parts: Sequence[Part], tolerance_bytes: int) -> tuple[list[str], bool]:
    """Markdown rows comparing each part and the total; True when every row is within tolerance."""
    rows = ["| part | predicted | NVML per process | difference | |", "|---|---:|---:|---:|---|"]
    ok_all = True
    for part in parts:
        diff = part.difference_bytes
        ok = diff is not None and abs(diff) <= tolerance_bytes
        ok_all = ok_all and ok
        rows.append(
            f"| {part.name} | {part.predicted_bytes:,} B | "
            f"{'n/a' if part.observed_bytes is None else f'{part.observed_bytes:,} B'} | "
            f"{'n/a' if diff is None else f'{diff:+,} B ({mib(abs(diff))})'} | "
            f"{'PASS' if ok else 'FAIL'} |"
        )
    return rows, ok_all


def total_part(parts: Sequence[Part]) -> Part:
    """gpuplan's resident (the sum of the parts) against the process's final NVML reading."""
    seen = [p.observed_bytes for p in parts]
    observed = None if any(x is None for x in seen) else sum(x for x in seen if x is not None)
    predicted = resident_bytes(
        weights=parts[1].predicted_bytes,
        non_kv=parts[2].predicted_bytes,
        kv=parts[3].predicted_bytes,
        cuda_context=parts[0].predicted_bytes,
    )
    return Part("resident = weights + non_kv + KV + cuda_context", predicted, observed)


def run_child(
    read_used: Callable[[int], int | None], uuid: str, plan: Sequence[tuple[str, str, int]]
) -> list[int | None]:
    """NVML's per-process bytes after the context and after each step of `plan`."""
    readings: list[int | None] = []
    with cotenant(CHILD, 0, uuid) as child:
        assert child.stdin is not None and child.stdout is not None
        if child.stdout.readline().strip() != "context":
            return [None] * (len(plan) + 1)
        time.sleep(0.5)
        readings.append(read_used(child.pid))
        for _name, how, size in plan:
            child.stdin.write(f"{how} {size}\n")
            child.stdin.flush()
            if child.stdout.readline().strip() != "ok":
                readings.extend([None] * (len(plan) + 1 - len(readings)))
                break
            time.sleep(0.5)
            readings.append(read_used(child.pid))
    return readings


def parts_from(plan: Sequence[tuple[str, str, int]], readings: Sequence[int | None]) -> list[Part]:
    """Per part: predicted bytes and the NVML growth its step caused.

    The context is this process's own first reading, standing for the catalogue's cuda_context
    (a vLLM worker's is larger: NCCL and cuBLAS too, docs/facts.md §1).
    """
    first = readings[0]
    parts = [Part("cuda_context (measured: this process's own)", first or 0, first)]
    for (name, _how, size), before, after in zip(plan, readings[:-1], readings[1:], strict=True):
        grew = None if before is None or after is None else after - before
        parts.append(Part(name, size, grew))
    return parts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", type=int, default=0, help="NVML index of the card (default 0)")
    parser.add_argument("--weights", default=DEFAULTS["weights"], help="profile weights per card")
    parser.add_argument("--non-kv", default=DEFAULTS["non_kv"], help="profile non_kv per card")
    parser.add_argument(
        "--kv-cache-memory", default=DEFAULTS["kv_cache_memory"], help="the pinned KV cache"
    )
    parser.add_argument("--util", type=Decimal, help="no pin: KV = ceil(util × total) − the rest")
    parser.add_argument("--max-model-len", type=int, default=8192, help="for the token count")
    parser.add_argument("--out", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    from inventory.nvml import PynvmlSource

    report = Report()
    weights, non_kv = parse_bytes(args.weights), parse_bytes(args.non_kv)
    pinned = None if args.util is not None else parse_bytes(args.kv_cache_memory)
    with PynvmlSource() as source:
        card = source.read_card(args.gpu)
        cuda_total = (card.total_bytes or 0) - (card.reserved_bytes or 0)
        kv = kv_bytes(weights, non_kv, pinned=pinned, util=args.util, cuda_total=cuda_total)
        say_setup(report, card.name, args.gpu, cuda_total, weights, non_kv, kv, args.max_model_len)
        plan = steps(weights, non_kv, kv)

        def read_used(pid: int) -> int | None:
            now = source.read_card(args.gpu)
            return next((p.used_bytes for p in now.processes if p.pid == pid), None)

        readings = run_child(read_used, card.uuid or str(args.gpu), plan)
    parts = parts_from(plan, readings)
    rows, ok = verdict_table([*parts, total_part(parts)], TOLERANCE_BYTES)
    for row in rows:
        report.say(row)
    report.say()
    report.check(
        "gpuplan's resident matches NVML's per-process bytes", ok, f"within {mib(TOLERANCE_BYTES)}"
    )
    out = args.out or Path(tempfile.mkdtemp(prefix="gpuplan-kv-proof-"))
    out.mkdir(parents=True, exist_ok=True)
    return report.finish(out / "kv-profile-proof.md")


def say_setup(
    report: Report,
    name: str | None,
    gpu: int,
    cuda_total: int,
    weights: int,
    non_kv: int,
    kv: int,
    max_model_len: int,
) -> None:
    """The report's title, the card and the profile being proved."""
    report.say("# gpuplan's resident from a profile, against NVML on a real card")
    report.say()
    report.say(f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on card {gpu}: {name}.")
    report.say(
        "torch stands in for vLLM: the child allocates the profile's parts; vLLM is not run."
    )
    report.say()
    tokens = max(0, kv) // BYTES_PER_TOKEN
    report.say(
        f"- CUDA total {cuda_total:,} B; profile weights {weights:,} B, non_kv {non_kv:,} B, "
        f"KV {kv:,} B ({tokens:,} tokens at {BYTES_PER_TOKEN:,} B per token; max_model_len "
        f"{max_model_len:,} {'fits' if tokens >= max_model_len else 'does not fit'})"
    )
    report.say()


if __name__ == "__main__":
    sys.exit(main())
