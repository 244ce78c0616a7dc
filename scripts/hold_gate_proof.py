"""Two approvals on one real card: `check --ledger` approves svc-a, then judges svc-b before and
after svc-a starts, and each verdict must match what svc-b's real vLLM-style gate then says.

A co-tenant holds memory; two workers each do a vLLM worker's start-up steps (CUDA context, NCCL,
cuBLAS), read free memory, apply vLLM's gate (free ≥ ceil(util × total)) and, when it passes,
take their request (as vLLM 0.11 without --kv-cache-memory-bytes grows to its request). Utils
are swept around the cut-off where two such workers stop fitting. Run on a machine with an
NVIDIA GPU and torch; prints a Markdown report (written with --out), exit 1 on a miss.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proof_kit import GIB, MIB, Report, cotenant, gib, mib, torch_child  # noqa: E402

from inventory.calibrate import measure  # noqa: E402
from inventory.nvml import PynvmlSource  # noqa: E402
from inventory.poller import take_snapshot  # noqa: E402
from inventory.snapshot import dumps_snapshot  # noqa: E402
from placement.fit.engines import UTIL_STEP  # noqa: E402

HOST = "hold-proof"

COTENANT = r"""
import sys
import torch
hold = int(sys.argv[sys.argv.index("--hold") + 1])
torch.cuda.set_device(0)
t = torch.empty(hold, dtype=torch.uint8, device="cuda")
t.fill_(1)
torch.cuda.synchronize()
print("holding", flush=True)
for line in sys.stdin:
    if line.split() and line.split()[0] == "done":
        break
"""

# A vLLM-like worker: the steps before vLLM's gate, the gate, then its request taken (or its
# refusal). It prints one JSON line and, when started, holds its bytes until told "done".
WORKER = r"""
import gc, json, math, os, sys, tempfile
from decimal import Decimal
import torch
import torch.distributed as dist
util = Decimal(sys.argv[sys.argv.index("--util") + 1])
torch.cuda.set_device(0)
store = os.path.join(tempfile.mkdtemp(prefix="hold-proof-"), "store")
dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1)
t = torch.ones(1024, device="cuda"); dist.all_reduce(t); del t
for dtype in (torch.bfloat16, torch.float32):
    a = torch.randn(1024, 1024, device="cuda", dtype=dtype); b = a @ a; del a, b
gc.collect(); torch.cuda.empty_cache(); torch.cuda.synchronize()
free, total = (int(x) for x in torch.cuda.mem_get_info())
requested = math.ceil(util * total)
started = free >= requested
held = None
if started:
    held = torch.empty(requested, dtype=torch.uint8, device="cuda")
    held.fill_(1)
    torch.cuda.synchronize()
print("HOLD-PROOF " + json.dumps({"free": free, "total": total, "requested": requested,
                                   "started": started}), flush=True)
for line in sys.stdin:
    if line.split() and line.split()[0] == "done":
        break
dist.destroy_process_group()
"""


def catalogue_text(cards: int, gpu: int, context: int) -> str:
    """svc-a and svc-b: vLLM 0.11 seats, 1 GiB resident, no pinned KV cache (each grows to its request)."""
    seats = "".join(
        f"""  - name: {name}
    host: {HOST}
    gpus: [{gpu}]
    resident: 1 GiB
    state: planned
    match: 'gpuplan_proof_child.py --util [0-9.]+ --seat {name}$'
    engine: {{kind: vllm, version: "0.11.0"}}
"""
        for name in ("svc-a", "svc-b")
    )
    return (
        f"# Written by scripts/hold_gate_proof.py: cuda_context measured on this card just before.\n"
        f"hosts:\n  {HOST}:\n    cards: {cards}\n    cuda_context: {context}\n    margin: 0\n"
        f"seats:\n{seats}"
    )


@contextmanager
def worker(util: Decimal, seat: str, uuid: str) -> Iterator[dict[str, object]]:
    """A worker for `seat` at `util`; yields what it read and did, and holds its bytes until the end.

    The catalogue's `match` of each seat looks for its `--util … --seat NAME` arguments.
    """
    with torch_child(WORKER, ["--util", str(util), "--seat", seat], uuid) as child:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("HOLD-PROOF "):
                yield json.loads(line.removeprefix("HOLD-PROOF "))
                return
        raise RuntimeError(f"worker {seat} exited with {child.wait()} before its gate")


def gpuplan(*argv: str) -> tuple[int, dict[str, object]]:
    """Run the real CLI with --json; (exit, the JSON answer)."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    done = subprocess.run(
        [sys.executable, "-m", "placement", *argv, "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    try:
        data = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError:
        data = {"raw": done.stdout}
    if done.returncode not in (0, 1):
        print(done.stderr, file=sys.stderr)
    return done.returncode, data


def gate_line(data: dict[str, object]) -> str:
    """'gate free X, requested Y' from a VERDICT's figures, and its rules."""
    figures = data.get("card_figures") or []
    rules = sorted({str(r["rule"]) for r in data.get("reasons", [])})  # type: ignore[union-attr]
    if not figures:
        return f"rules {rules or '-'}"
    f = figures[0]  # type: ignore[index]
    return (
        f"gate free {f['gate_free_bytes']:,} B, requested {f['requested_bytes']:,} B, "
        f"rules {rules or '-'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--hold-gib", type=float, default=50.0, help="co-tenant (default 50 GiB)")
    parser.add_argument("--steps", type=int, default=2, help="utils each side of the cut-off")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    out: Path = args.out or Path(tempfile.mkdtemp(prefix="gpuplan-hold-proof-"))
    out.mkdir(parents=True, exist_ok=True)
    report = Report()
    gpu = args.gpu
    report.say("# Two approvals on one real card: a hold counts in the next gate")
    report.say()
    report.say(f"Measured on an NVIDIA H200, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.")
    report.say()
    report.say("Reproduce with `python3 scripts/hold_gate_proof.py --out DIR` on a machine with an")
    report.say("NVIDIA GPU and torch.")
    report.say()
    with PynvmlSource() as source:
        card = source.read_card(gpu)
        cards = source.card_count()
        uuid = card.uuid or str(gpu)
        report.say(f"- card {gpu}: {card.name} ({card.uuid}), driver {source.driver_version()}")
        context = measure(gpu, runs=2, source=source).cuda_context_bytes()
        report.say(f"- cuda_context measured: {context:,} B ({mib(context)})")
        catalogue = out / "hold-proof.catalogue.yaml"
        catalogue.write_text(catalogue_text(cards, gpu, context), encoding="utf-8")
        with cotenant(COTENANT, int(args.hold_gib * GIB), uuid) as child:
            assert child.stdout is not None
            child.stdout.readline()
            report.say(f"- a co-tenant holds {args.hold_gib:g} GiB (torch)")
            before = take_snapshot(source, datetime.now(UTC), HOST)
            snap = out / "before.snapshot.json"
            snap.write_text(dumps_snapshot(before), encoding="utf-8")
            c = before.card(gpu)
            assert c.free_bytes is not None and c.cuda_total_bytes is not None
            total = c.cuda_total_bytes
            # Two workers fit while free − 2·context ≥ 2·request (each takes context + request).
            cut = Decimal(500 * (c.free_bytes - 2 * context) // total) * UTIL_STEP
            report.say(
                f"- NVML free {c.free_bytes:,} B ({gib(c.free_bytes)}), CUDA total {total:,} B;"
                f" predicted cut-off for the pair: util {cut}"
            )
            report.say()
            report.say(
                "| util | svc-a check | svc-b check, svc-a approved | svc-a real | svc-b real gate | svc-b check, svc-a seen |"
            )
            report.say("|---|---|---|---|---|---|")
            utils = [cut + UTIL_STEP * k for k in range(-args.steps, args.steps + 1)]
            checks = Report()
            for util in utils:
                report.say(one_util(checks, util, catalogue, snap, gpu, uuid, source, out))
            report.add_checks(checks)
    return report.finish(out / "hold-gate-proof.md")


def one_util(
    report: Report,
    util: Decimal,
    catalogue: Path,
    snap: Path,
    gpu: int,
    uuid: str,
    source: PynvmlSource,
    out: Path,
) -> str:
    """One row: approve svc-a, judge svc-b, start svc-a, svc-b's real gate, judge svc-b again."""
    ledger = out / f"ledger-{util}.sqlite"
    common = ["--gpu", str(gpu), "--util", str(util), "--catalogue", str(catalogue)]
    code_a, _ = gpuplan("check", "svc-a", *common, "--snapshot", str(snap), "--ledger", str(ledger))
    code_b, data_b = gpuplan(
        "check", "svc-b", *common, "--snapshot", str(snap), "--ledger", str(ledger)
    )
    with worker(util, "svc-a", uuid) as a:
        after = take_snapshot(source, datetime.now(UTC), HOST)
        seen = out / f"after-{util}.snapshot.json"
        seen.write_text(dumps_snapshot(after), encoding="utf-8")
        # The poller stores the snapshot where svc-a runs: its hold ends as seen.
        gpuplan(
            "snapshot", "--from", str(seen), "--catalogue", str(catalogue), "--ledger", str(ledger)
        )
        code_seen, data_seen = gpuplan(
            "check", "svc-b", *common, "--ledger", str(ledger), "--max-age", "10m", "--no-hold"
        )
        with worker(util, "svc-b", uuid) as b:
            pass
    real_a, real_b = bool(a["started"]), bool(b["started"])
    report.check(
        f"util {util}: svc-b's check with svc-a approved matches its real gate",
        (code_b == 0) == real_b,
        f"check exit {code_b} ({gate_line(data_b)}); real gate free {b['free']:,} B vs "
        f"requested {b['requested']:,} B",
    )
    predicted = (data_b.get("card_figures") or [{}])[0].get("gate_free_bytes")  # type: ignore[union-attr]
    if isinstance(predicted, int):
        report.check(
            f"util {util}: svc-b's gate free, predicted with svc-a's hold, within 32 MiB of the real one",
            abs(predicted - int(b["free"])) <= 32 * MIB,  # type: ignore[call-overload]
            f"predicted {predicted:,} B, real {b['free']:,} B ({int(b['free']) - predicted:+,} B)",  # type: ignore[call-overload]
        )
    report.check(
        f"util {util}: svc-b's check with svc-a seen running matches its real gate",
        (code_seen == 0) == real_b,
        f"check exit {code_seen} ({gate_line(data_seen)})",
    )
    report.check(f"util {util}: svc-a was approved and started", code_a == 0 and real_a, "")
    return (
        f"| {util} | exit {code_a} | exit {code_b}: {gate_line(data_b)} | "
        f"{'started' if real_a else 'refused'} | free {b['free']:,} B vs {b['requested']:,} B: "
        f"{'starts' if real_b else 'refused'} | exit {code_seen}: {gate_line(data_seen)} |"
    )


if __name__ == "__main__":
    sys.exit(main())
