"""`gpuplan check` against a real card: a co-tenant holds memory, and the verdict must flip where vLLM's gate does.

Run on a machine with an NVIDIA GPU and torch; prints a Markdown report (and writes it with --out), exit 1 on a miss.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proof_kit import GIB, MIB, Report, cotenant, gib, mib  # noqa: E402

from inventory.calibrate import measure, run_child  # noqa: E402
from inventory.nvml import PynvmlSource, RawCard  # noqa: E402
from inventory.poller import take_snapshot  # noqa: E402
from inventory.snapshot import Snapshot, dumps_snapshot  # noqa: E402
from placement.fit.engines import UTIL_STEP, largest_util_within, requested_bytes  # noqa: E402

HOST = "gpu-proof"

# Holds memory on the card like a neighbouring seat would; the parent can ask for a little more
# so that the predicted cut-off util sits mid-step (a 0.001 step is ~143 MiB on an H200).
COTENANT = r"""
import sys
import torch
hold = int(sys.argv[sys.argv.index("--hold") + 1])
torch.cuda.set_device(0)
tensors = [torch.empty(hold, dtype=torch.uint8, device="cuda")]
tensors[0].fill_(1)  # the first kernel loads CUDA modules: the footprint is then stable
torch.cuda.synchronize()
print("holding", flush=True)
for line in sys.stdin:
    words = line.split()
    if words and words[0] == "more":
        t = torch.empty(int(words[1]), dtype=torch.uint8, device="cuda")
        t.fill_(1)
        torch.cuda.synchronize()
        tensors.append(t)
        print("ok", flush=True)
    elif words and words[0] == "done":
        break
"""


def catalogue_text(cards: int, gpu: int, cuda_context: int) -> str:
    """A one-host catalogue with the probe seat: vLLM with a pinned KV cache, so only the gate binds."""
    return f"""\
# Written by scripts/check_gpu_proof.py: cuda_context measured on this card just before.
hosts:
  {HOST}:
    cards: {cards}
    cuda_context: {cuda_context}
    margin: 0
seats:
  - name: probe
    host: {HOST}
    gpus: [{gpu}]
    resident: 2 GiB             # at least its KV cache + the measured cuda_context
    state: planned
    engine: {{kind: vllm, version: "0.11.0", kv_cache_memory: 512 MiB}}
"""


def gpuplan_check(
    catalogue: Path, snapshot: Path | None, gpu: int, util: Decimal, *, as_json: bool
) -> tuple[int, str]:
    """Run the real CLI, `python -m placement check probe --gpu N --util U`, and return (exit, stdout).

    `snapshot` None reads the card live through NVML (`--live`).
    """
    source = ["--live"] if snapshot is None else ["--snapshot", str(snapshot), "--max-age", "10m"]
    argv = [
        sys.executable, "-m", "placement", "check", "probe", "--gpu", str(gpu), "--util", str(util),
        "--catalogue", str(catalogue), *source,
    ]  # fmt: skip
    if as_json:
        argv.append("--json")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    if done.stderr.strip():
        print(done.stderr, file=sys.stderr)
    return done.returncode, done.stdout


def cut_off_position(snapshot: Snapshot, gpu: int, cuda_context: int) -> tuple[int, int, Fraction]:
    """(gate free, CUDA total, 1000 × gate free / total): the cut-off util is floor(position) / 1000."""
    card = snapshot.card(gpu)
    assert card.free_bytes is not None and card.total_bytes is not None
    total = card.total_bytes - (card.reserved_bytes or 0)
    gate_free = card.free_bytes - cuda_context
    return gate_free, total, Fraction(1000 * gate_free, total)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpu", type=int, default=0, help="NVML index of the card (default 0)")
    parser.add_argument(
        "--hold-gib", type=float, default=100.0, help="co-tenant's tensor (default 100 GiB)"
    )
    parser.add_argument("--runs", type=int, default=2, help="calibration runs (default 2)")
    parser.add_argument("--out", type=Path, help="write the report, catalogue and snapshot here")
    args = parser.parse_args(argv)
    out: Path = args.out or Path(tempfile.mkdtemp(prefix="gpuplan-proof-"))
    out.mkdir(parents=True, exist_ok=True)
    report = Report()
    gpu = args.gpu

    with PynvmlSource() as source:
        card = source.read_card(gpu)
        cards = source.card_count()
        say_setup(report, source, card, gpu, cards)
        context = say_calibration(report, source, gpu, args.runs)
        hold = int(args.hold_gib * GIB)
        report.say(
            f"## 2. A co-tenant holding {args.hold_gib:g} GiB (torch), then a snapshot with the real poller"
        )
        report.say()
        uuid = card.uuid or str(gpu)
        with cotenant(COTENANT, hold, uuid) as child:
            snapshot = snapshot_mid_step(report, source, child, gpu, context)
            if snapshot is None:
                return 1
            snapshot_path = out / "proof.snapshot.json"
            snapshot_path.write_text(dumps_snapshot(snapshot), encoding="utf-8")
            catalogue_path = out / "proof.catalogue.yaml"
            catalogue_path.write_text(catalogue_text(cards, gpu, context), encoding="utf-8")
            gate_free, total, position = cut_off_position(snapshot, gpu, context)
            say_snapshot(report, snapshot, gpu, total)
            cut = largest_util_within(gate_free, total)
            if cut is None:
                report.check("a cut-off exists", False, "the co-tenant left too little free")
                return 1
            say_prediction(report, cut, gate_free, total, position)
            verdicts = check_verdicts(report, catalogue_path, snapshot_path, gpu, cut)
            real_gate(report, source, card.uuid, gpu, cut, total, gate_free, verdicts)
    return report.finish(out / "check-gpu-proof.md")


def say_setup(report: Report, source: PynvmlSource, card: RawCard, gpu: int, cards: int) -> None:
    """The report's title and the machine: card, driver, Python and torch, idle memory."""
    report.say("# `gpuplan check` on a real card: the verdict flips where vLLM's gate does")
    report.say()
    report.say(f"Measured on an NVIDIA H200, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.")
    report.say()
    report.say(f"- card {gpu} of {cards}: {card.name} ({card.uuid})")
    report.say(f"- driver {source.driver_version()}, NVML {source.nvml_version()}")
    try:
        torch = importlib.import_module("torch")
        report.say(
            f"- Python {platform.python_version()}, torch {torch.__version__}, CUDA {torch.version.cuda}"
        )
    except ImportError:
        report.say(f"- Python {platform.python_version()}, torch not importable")
    report.say(
        f"- NVML total {card.total_bytes:,} B, driver reserve {card.reserved_bytes:,} B, "
        f"free {card.free_bytes:,} B ({gib(card.free_bytes)}) idle"
    )
    report.say()


def say_calibration(report: Report, source: PynvmlSource, gpu: int, runs: int) -> int:
    """Section 1: measure cuda_context as a vLLM worker takes it; return it in bytes."""
    report.say(
        "## 1. cuda_context, measured (`inventory/calibrate.py`: context, NCCL, cuBLAS, as a vLLM worker)"
    )
    report.say()
    calibration = measure(gpu, runs, source=source)
    context = calibration.cuda_context_bytes()
    taken = [run.taken_bytes("cublas") for run in calibration.runs]
    report.say(
        f"- taken before the gate reads free memory, per run: {', '.join(mib(t) for t in taken)}"
    )
    report.say(f"- catalogue `cuda_context: {context // MIB} MiB` (largest run, rounded up to MiB)")
    report.say()
    return context


def snapshot_mid_step(
    report: Report,
    source: PynvmlSource,
    child: subprocess.Popen[str],
    gpu: int,
    context_bytes: int,
) -> Snapshot | None:
    """A snapshot with the co-tenant holding its bytes, grown so the cut-off sits mid-step.

    None (with a failed check in the report) when the co-tenant does not answer.
    """
    assert child.stdin is not None and child.stdout is not None
    if child.stdout.readline().strip() != "holding":
        report.check("co-tenant started", False, "it did not report holding its bytes")
        return None
    time.sleep(0.5)
    snapshot = take_snapshot(source, datetime.now(UTC), HOST)
    # Put the cut-off mid-step, so a few MiB of context jitter cannot decide the test.
    for _ in range(3):
        _gate_free, total, position = cut_off_position(snapshot, gpu, context_bytes)
        fraction = position - (position.numerator // position.denominator)
        if Fraction(3, 10) <= fraction <= Fraction(7, 10):
            break
        extra = int(((fraction - Fraction(1, 2)) % 1) * total / 1000) + MIB
        child.stdin.write(f"more {extra}\n")
        child.stdin.flush()
        if child.stdout.readline().strip() != "ok":
            report.check("co-tenant grew", False, "it did not confirm")
            return None
        report.say(f"- co-tenant took {mib(extra)} more to put the cut-off mid-step")
        time.sleep(0.5)
        snapshot = take_snapshot(source, datetime.now(UTC), HOST)
    return snapshot


def say_snapshot(report: Report, snapshot: Snapshot, gpu: int, total_bytes: int) -> None:
    """The processes on the card and its memory as the snapshot saw them."""
    shot = snapshot.card(gpu)
    for process in shot.processes:
        report.say(f"- process {process.pid}: {mib(process.used_bytes)} `{process.cmdline}`")
    report.say(
        f"- snapshot {snapshot.taken_at:%H:%M:%S}Z: used {shot.used_bytes:,} B, free {shot.free_bytes:,} B "
        f"({gib(shot.free_bytes)}); CUDA total {total_bytes:,} B ({gib(total_bytes)})"
    )


def say_prediction(
    report: Report, cut: Decimal, gate_free_bytes: int, total_bytes: int, position: Fraction
) -> None:
    """What the gate will read, the largest util that passes, and the two requests."""
    above = cut + UTIL_STEP
    report.say(
        f"- predicted: vLLM's gate will read free = {gate_free_bytes:,} B ({gib(gate_free_bytes)}) = NVML free − "
        f"cuda_context; the largest 3-decimal util that passes is **{cut}** "
        f"(1000 × free / total = {float(position):.3f})"
    )
    report.say(
        f"- requests: util {cut} → {requested_bytes(cut, total_bytes):,} B; util {above} → "
        f"{requested_bytes(above, total_bytes):,} B"
    )
    report.say()


def check_verdicts(
    report: Report, catalogue_path: Path, snapshot_path: Path, gpu: int, cut: Decimal
) -> dict[Decimal, int]:
    """Section 3: `gpuplan check` at the cut-off and one step above, on the snapshot and live."""
    above = cut + UTIL_STEP
    report.say("## 3. `gpuplan check probe --gpu N --util U` on that snapshot")
    report.say()
    verdicts: dict[Decimal, int] = {}
    for util in (cut, above):
        code, text = gpuplan_check(catalogue_path, snapshot_path, gpu, util, as_json=True)
        verdicts[util] = code
        try:
            data = json.loads(text)
            rules = [r["rule"] for r in data["reasons"]]
            verdict = data["verdict"]
        except (ValueError, KeyError):
            rules, verdict = [], f"unreadable output {text[:200]!r}"
        report.say(
            f"- util {util}, --snapshot: exit {code}, verdict {verdict}, rules {rules or '-'}"
        )
    live: dict[Decimal, int] = {}
    for util in (cut, above):
        live[util], text = gpuplan_check(catalogue_path, None, gpu, util, as_json=False)
        headline = text.splitlines()[0] if text else "(no output)"
        report.say(f"- util {util}, --live: exit {live[util]} — {headline}")
    _code, human = gpuplan_check(catalogue_path, snapshot_path, gpu, above, as_json=False)
    report.say()
    report.say(f"The refusal as printed (util {above}):")
    report.say()
    report.say("```")
    report.say(human.rstrip())
    report.say("```")
    report.say()
    report.check("check passes at the cut-off", verdicts[cut] == 0, f"exit {verdicts[cut]}")
    report.check("check refuses one step above", verdicts[above] == 1, f"exit {verdicts[above]}")
    report.check("the --live check agrees", live == verdicts, f"exits {live[cut]}/{live[above]}")
    report.say()
    return verdicts


def real_gate(
    report: Report,
    source: PynvmlSource,
    uuid: str | None,
    gpu: int,
    cut: Decimal,
    total_bytes: int,
    gate_free_bytes: int,
    verdicts: dict[Decimal, int],
) -> None:
    """Section 4: a fresh process doing what a vLLM worker does, against the prediction and check."""
    above = cut + UTIL_STEP
    report.say(
        "## 4. The real gate: a fresh process doing what a vLLM worker does, then free vs ceil(util × total)"
    )
    report.say()
    real: dict[Decimal, bool] = {}
    for util in (cut, above):
        nvml_before = source.read_card(gpu).free_bytes or 0
        data = run_child(uuid, gpu)
        free, cuda_total = data["cublas"]
        wanted = requested_bytes(util, cuda_total)
        real[util] = free >= wanted
        report.say(
            f"- util {util}: NVML free before {nvml_before:,} B; the process read free {free:,} B, "
            f"total {cuda_total:,} B (took {mib(nvml_before - free)}): "
            f"{_gate_said(util, free, cuda_total, wanted)}"
        )
        report.check(
            f"real CUDA total = snapshot's CUDA total (util {util})",
            cuda_total == total_bytes,
            f"{cuda_total:,} vs {total_bytes:,}",
        )
        report.check(
            f"real free within 32 MiB of the prediction (util {util})",
            abs(free - gate_free_bytes) <= 32 * MIB,
            f"{free - gate_free_bytes:+,} B",
        )
    report.say()
    report.check("the real gate passes at the cut-off", real[cut], f"util {cut}")
    report.check("the real gate refuses one step above", not real[above], f"util {above}")
    report.check(
        "gpuplan check agrees with the real gate at both utils",
        (verdicts[cut] == 0) == real[cut] and (verdicts[above] == 1) == (not real[above]),
        f"check exits {verdicts[cut]}/{verdicts[above]}, real gate {real[cut]}/{real[above]}",
    )


def _gate_said(util: Decimal, free_bytes: int, cuda_total_bytes: int, wanted_bytes: int) -> str:
    """What vLLM says at start-up: it starts, or its own refusal sentence."""
    if free_bytes >= wanted_bytes:
        return f"starts: free {free_bytes:,} B ≥ requested {wanted_bytes:,} B (spare {mib(free_bytes - wanted_bytes)})"
    return (
        f"Free memory on device cuda:0 ({round(free_bytes / GIB, 2)}/{round(cuda_total_bytes / GIB, 2)} GiB) "
        f"on startup is less than desired GPU memory utilization ({util}, "
        f"{round(wanted_bytes / GIB, 2)} GiB) — short {mib(wanted_bytes - free_bytes)}"
    )


if __name__ == "__main__":
    sys.exit(main())
