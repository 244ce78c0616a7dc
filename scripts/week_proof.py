"""The week on one real card: `check --window` against a ledger the real poller recorded while a
co-tenant grew and shrank, and a request-gated worker's real gate at the recorded peak.

Minutes stand in for hours. A stand-in for a request-gated worker (a torch process doing a vLLM
worker's start-up steps and gate, free ≥ ceil(util × total), then holding less than its request,
as gen-small does with its KV cache pinned) runs on the card; a foreign PyTorch co-tenant holds
20 % of the card, grows to 64 % for the middle third of the recording, and shrinks back. `gpuplan
snapshot --live --interval 2` records it into a ledger. Then, with the newest snapshot showing the
co-tenant small again:

1. `check big` (35 % of the card) passes on the newest snapshot alone and is refused by `peak`
   with `--window`; at the recorded peak the real card cannot allocate it.
2. `check small` (10 %) passes with `--window`, warning (rule `restart`) that the worker could not
   restart at the peak with small placed; at the peak again, with a stand-in for small holding its
   bytes, a fresh worker's real gate refuses, and without small it passes.

Run on a machine with an NVIDIA GPU and torch; prints a Markdown report (written with --out),
exit 1 on a miss.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proof_kit import MIB, Report, gib, mib, torch_child  # noqa: E402

from inventory.calibrate import measure  # noqa: E402
from inventory.nvml import PynvmlSource  # noqa: E402
from inventory.poller import take_snapshot  # noqa: E402

HOST = "week-proof"
UTIL = "0.30"  # the worker's util request
WORKER_SHARE = 0.15  # what the worker holds once up (its KV cache pinned below its request)
BASE_SHARE, PEAK_SHARE = 0.20, 0.64  # the co-tenant, most of the time and at its peak
BIG_SHARE, SMALL_SHARE = 0.35, 0.10  # the two new seats checked
INTERVAL_S = 2

# A foreign co-tenant (a PyTorch server whose cache grows with load): "hold N" resizes it to N
# bytes (a base tensor and one extra), answering "held N" once the card shows it.
COTENANT = r"""
import sys
import torch
torch.cuda.set_device(0)
base = int(sys.argv[sys.argv.index("--hold") + 1])
t = torch.empty(base, dtype=torch.uint8, device="cuda"); t.fill_(1)
extra = None
torch.cuda.synchronize()
print("held", base, flush=True)
for line in sys.stdin:
    words = line.split()
    if not words or words[0] == "done":
        break
    want = int(words[1])
    extra = None
    torch.cuda.empty_cache()
    if want > base:
        extra = torch.empty(want - base, dtype=torch.uint8, device="cuda"); extra.fill_(1)
    torch.cuda.synchronize()
    print("held", want, flush=True)
"""

# A request-gated worker: a vLLM worker's steps before its gate (CUDA context, NCCL, cuBLAS: what
# `calibrate` measures as cuda_context), the gate on torch's free and total, then (when it
# passes) --hold bytes, held until "done".
WORKER = r"""
import gc, json, math, os, sys, tempfile
from decimal import Decimal
import torch
import torch.distributed as dist
util = Decimal(sys.argv[sys.argv.index("--util") + 1])
hold = int(sys.argv[sys.argv.index("--hold") + 1])
torch.cuda.set_device(0)
store = os.path.join(tempfile.mkdtemp(prefix="week-proof-"), "store")
dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1)
t = torch.ones(1024, device="cuda"); dist.all_reduce(t); del t
for dtype in (torch.bfloat16, torch.float32):
    a = torch.randn(1024, 1024, device="cuda", dtype=dtype); b = a @ a; del a, b
gc.collect(); torch.cuda.empty_cache(); torch.cuda.synchronize()
free, total = (int(x) for x in torch.cuda.mem_get_info())
requested = math.ceil(util * total)
started = free >= requested
held = None
if started and hold:
    held = torch.empty(hold, dtype=torch.uint8, device="cuda"); held.fill_(1)
    torch.cuda.synchronize()
print("WEEK-PROOF " + json.dumps({"free": free, "total": total, "requested": requested,
                                   "started": started}), flush=True)
for line in sys.stdin:
    if line.split() and line.split()[0] == "done":
        break
dist.destroy_process_group()
"""

# A fixed server taking N bytes (the new seat placed), or reporting that it could not. It says
# "ready" once its CUDA context is up and waits for "take N": the parent sizes N so that the
# process holds its seat's declared resident in all, as NVML counts it.
FIXED = r"""
import json, sys
import torch
torch.cuda.set_device(0)
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
print("ready", flush=True)
want = int(sys.stdin.readline().split()[1])
try:
    t = torch.empty(want, dtype=torch.uint8, device="cuda"); t.fill_(1); torch.cuda.synchronize()
    ok, why = True, ""
except torch.OutOfMemoryError as exc:
    ok, why = False, str(exc).splitlines()[0]
print("WEEK-PROOF " + json.dumps({"allocated": ok, "why": why}), flush=True)
for line in sys.stdin:
    if line.split() and line.split()[0] == "done":
        break
"""


def catalogue_text(cards: int, gpu: int, context: int, total: int) -> str:
    """The worker running (its `match` finds the stand-in), big and small planned on the card."""
    resident = -(-(int(WORKER_SHARE * total) + context) // MIB)  # MiB, rounded up
    big = int(BIG_SHARE * total) // MIB
    small = int(SMALL_SHARE * total) // MIB
    return f"""# Written by scripts/week_proof.py: cuda_context measured on this card just before.
hosts:
  {HOST}:
    cards: {cards}
    cuda_context: {context}
    margin: 0
seats:
  - name: worker
    host: {HOST}
    gpus: [{gpu}]
    resident: {resident} MiB
    state: running
    match: 'gpuplan_proof_child.py --util [0-9.]+ --hold [0-9]+ --seat worker'
    engine: {{kind: vllm, version: "0.11.0", gpu_memory_utilization: {UTIL}, kv_cache_memory: 1 GiB}}
  - name: big
    host: {HOST}
    gpus: [{gpu}]
    resident: {big} MiB
    state: planned
  - name: small
    host: {HOST}
    gpus: [{gpu}]
    resident: {small} MiB
    state: planned
"""


def _answer(child: subprocess.Popen[str]) -> dict[str, object]:
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("WEEK-PROOF "):
            answer: dict[str, object] = json.loads(line.removeprefix("WEEK-PROOF "))
            return answer
    raise RuntimeError(f"a proof child exited with {child.wait()} before answering")


@contextmanager
def worker(uuid: str, hold: int) -> Iterator[dict[str, object]]:
    """A worker at UTIL holding `hold` bytes when it starts; yields its gate's figures."""
    args = ["--util", UTIL, "--hold", str(hold), "--seat", "worker"]
    with torch_child(WORKER, args, uuid) as child:
        yield _answer(child)


@contextmanager
def fixed(source: PynvmlSource, gpu: int, uuid: str, nbytes: int) -> Iterator[dict[str, object]]:
    """A process holding `nbytes` on the card in all (its CUDA context included)."""
    free_before = _free(source, gpu)
    with torch_child(FIXED, [], uuid) as child:
        assert child.stdin is not None and child.stdout is not None
        child.stdout.readline()  # ready: its context is up
        context = free_before - _free(source, gpu)
        child.stdin.write(f"take {max(0, nbytes - context)}\n")
        child.stdin.flush()
        answer = _answer(child)
        answer["context"] = context
        yield answer


def _free(source: PynvmlSource, gpu: int) -> int:
    card = take_snapshot(source, datetime.now(UTC), HOST).card(gpu)
    assert card.free_bytes is not None
    return card.free_bytes


def resize(child: subprocess.Popen[str], nbytes: int) -> None:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(f"hold {nbytes}\n")
    child.stdin.flush()
    line = child.stdout.readline()
    if not line.startswith("held"):
        raise RuntimeError(f"the co-tenant did not resize to {nbytes:,} B: {line!r}")


def gpuplan(*argv: str) -> tuple[int, dict[str, object], str]:
    """The real CLI with --json: (exit, its JSON, the command as typed)."""
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
        timeout=300,
    )
    try:
        data = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError:
        data = {"raw": done.stdout}
    if done.returncode not in (0, 1):
        print(done.stdout, done.stderr, file=sys.stderr)
    return done.returncode, data, "gpuplan " + " ".join(argv)


def record(catalogue: Path, ledger: Path, count: int) -> subprocess.Popen[str]:
    """The real poller, in the background: `count` snapshots, one every INTERVAL_S."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    argv = ["snapshot", "--live", "--host", HOST, "--catalogue", str(catalogue)]
    argv += ["--ledger", str(ledger), "--interval", str(INTERVAL_S), "--count", str(count)]
    return subprocess.Popen(
        [sys.executable, "-m", "placement", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--phase", type=int, default=40, help="seconds per phase (default 40)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    out: Path = args.out or Path(tempfile.mkdtemp(prefix="gpuplan-week-proof-"))
    out.mkdir(parents=True, exist_ok=True)
    report, checks = Report(), Report()
    gpu = args.gpu
    with PynvmlSource() as source:
        card = source.read_card(gpu)
        name = card.name or "NVIDIA GPU"
        report.say("# The week on a real card: a peak the newest snapshot hides")
        report.say()
        report.say(f"Measured on an {name}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.")
        report.say()
        report.say("Reproduce with `python3 scripts/week_proof.py --out DIR` on a machine with an")
        report.say("NVIDIA GPU and torch (minutes stand in for hours: three phases of")
        report.say(f"{args.phase} s, a snapshot every {INTERVAL_S} s).")
        report.say()
        uuid = card.uuid or str(gpu)
        before = take_snapshot(source, datetime.now(UTC), HOST).card(gpu)
        assert before.cuda_total_bytes is not None
        total = before.cuda_total_bytes
        report.say(f"- card {gpu}: {name} ({card.uuid}), driver {source.driver_version()}")
        report.say(f"- CUDA total {total:,} B ({gib(total)})")
        context = measure(gpu, runs=2, source=source).cuda_context_bytes()
        report.say(f"- cuda_context measured: {context:,} B ({mib(context)})")
        catalogue = out / "week-proof.catalogue.yaml"
        catalogue.write_text(catalogue_text(source.card_count(), gpu, context, total), "utf-8")
        ledger = out / "week-proof.sqlite"
        base, peak = int(BASE_SHARE * total), int(PEAK_SHARE * total)
        hold = int(WORKER_SHARE * total)
        common = ["--gpu", str(gpu), "--catalogue", str(catalogue), "--ledger", str(ledger)]
        window = ["--window", "30m", "--min-history", "30s", "--no-hold"]
        with torch_child(COTENANT, ["--hold", str(base)], uuid) as tenant:
            assert tenant.stdout is not None
            tenant.stdout.readline()
            with worker(uuid, hold) as first:
                report.say(
                    f"- worker (util {UTIL}) started: free {first['free']:,} B ≥ requested "
                    f"{first['requested']:,} B; it holds {hold:,} B ({gib(hold)}) once up"
                )
                report.say(
                    f"- co-tenant: {base:,} B ({gib(base)}), {peak:,} B ({gib(peak)}) for the "
                    "middle phase"
                )
                count = 3 * args.phase // INTERVAL_S
                poller = record(catalogue, ledger, count)
                started = time.monotonic()
                time.sleep(args.phase)
                resize(tenant, peak)
                peak_from = datetime.now(UTC)
                time.sleep(max(0.0, 2 * args.phase - (time.monotonic() - started)))
                resize(tenant, base)
                peak_to = datetime.now(UTC)
                try:
                    poller.wait(timeout=3 * args.phase + 60)
                except subprocess.TimeoutExpired:
                    poller.kill()
                report.say(
                    f"- recorded {count} snapshots with `gpuplan snapshot --live --interval "
                    f"{INTERVAL_S}`; the co-tenant was at its peak from {peak_from:%H:%M:%S} to "
                    f"{peak_to:%H:%M:%S} UTC"
                )
                report.say()
                big_now = gpuplan("check", "big", *common, "--no-hold")
                big_week = gpuplan("check", "big", *common, *window)
                small_week = gpuplan("check", "small", *common, *window)
                show_checks(report, checks, big_now, big_week, small_week)
                # At the peak again: big cannot be allocated; worker restarts alone, not beside small.
                resize(tenant, peak)
                with fixed(source, gpu, uuid, int(BIG_SHARE * total) // MIB * MIB) as big_real:
                    pass
            # The worker is down now (a restart); the co-tenant is at its peak.
            with worker(uuid, 0) as alone:
                pass
            small_bytes = int(SMALL_SHARE * total) // MIB * MIB  # its declared resident
            with (
                fixed(source, gpu, uuid, small_bytes) as small_real,
                worker(uuid, 0) as beside,
            ):
                pass
        show_real(report, checks, big_week, small_week, big_real, alone, beside, small_real)
    report.add_checks(checks)
    return report.finish(out / "proof-week.md")


def _window(data: dict[str, object]) -> dict[str, object]:
    block = data.get("window")
    return block if isinstance(block, dict) else {}


def _card(data: dict[str, object]) -> dict[str, object]:
    cards = _window(data).get("cards")
    return cards[0] if isinstance(cards, list) and cards else {}


def _rules(data: dict[str, object]) -> list[str]:
    reasons = data.get("reasons")
    return [str(r.get("rule")) for r in reasons] if isinstance(reasons, list) else []


def _risks(data: dict[str, object]) -> list[dict[str, object]]:
    risks = _window(data).get("restart_risks")
    return [r for r in risks if isinstance(r, dict)] if isinstance(risks, list) else []


def show_checks(
    report: Report,
    checks: Report,
    big_now: tuple[int, dict[str, object], str],
    big_week: tuple[int, dict[str, object], str],
    small_week: tuple[int, dict[str, object], str],
) -> None:
    report.say("## What gpuplan said")
    report.say()
    report.say("| command | exit | verdict | rules | window room | at | short moments |")
    report.say("|---|---|---|---|---|---|---|")
    for code, data, typed in (big_now, big_week, small_week):
        card = _card(data)
        room = card.get("window_room_bytes")
        report.say(
            f"| `{typed.split(' --catalogue')[0]} …{' --window 30m' if '--window' in typed else ''}` "
            f"| {code} | {data.get('verdict')} | {', '.join(_rules(data)) or '-'} | "
            f"{f'{room:,} B' if isinstance(room, int) else '-'} | {card.get('min_room_at', '-')} | "
            f"{card.get('short_moments', '-')} |"
        )
    report.say()
    for risk in _risks(small_week[1]):
        report.say(
            f"- restart risk with small placed: {risk.get('seat')} requests "
            f"{risk.get('requested_bytes'):,} B; short by {risk.get('short_bytes'):,} B at "
            f"{risk.get('worst_at')} ({risk.get('short_moments')} moments)"
        )
    report.say()
    checks.check(
        "big passes on the newest snapshot alone",
        big_now[0] == 0 and big_now[1].get("verdict") == "pass",
        f"exit {big_now[0]}",
    )
    checks.check(
        "big is refused by peak over the window",
        big_week[0] == 1 and "peak" in _rules(big_week[1]),
        f"exit {big_week[0]}, rules {', '.join(_rules(big_week[1])) or '-'}",
    )
    checks.check(
        "small passes over the window, with a restart risk for worker",
        small_week[0] == 0 and any(r.get("seat") == "worker" for r in _risks(small_week[1])),
        f"exit {small_week[0]}, {len(_risks(small_week[1]))} restart risk(s)",
    )


def show_real(
    report: Report,
    checks: Report,
    big_week: tuple[int, dict[str, object], str],
    small_week: tuple[int, dict[str, object], str],
    big_real: dict[str, object],
    alone: dict[str, object],
    beside: dict[str, object],
    small_real: dict[str, object],
) -> None:
    report.say("## What the card did at the peak, again")
    report.say()
    report.say(
        f"- big's bytes allocated beside the co-tenant at its peak: "
        f"{'yes' if big_real['allocated'] else 'no (' + str(big_real['why']) + ')'}"
    )
    report.say(
        f"- worker restarted alone: free {alone['free']:,} B vs requested {alone['requested']:,} B: "
        f"{'starts' if alone['started'] else 'refused'}"
    )
    report.say(
        f"- small's stand-in allocated: {'yes' if small_real['allocated'] else 'no'} (its declared "
        f"resident in all, {small_real['context']:,} B of it its CUDA context); worker "
        f"restarted beside it: free {beside['free']:,} B vs requested {beside['requested']:,} B: "
        f"{'starts' if beside['started'] else 'refused'}"
    )
    checks.check(
        "big cannot be allocated at the recorded peak, as peak said",
        not big_real["allocated"],
        str(big_real["why"]) or "allocated",
    )
    checks.check(
        "worker restarts alone at the peak (the risk is small's doing)",
        bool(alone["started"]),
        f"free {alone['free']:,} B",
    )
    checks.check(
        "worker's real gate refuses at the peak beside small, as restart predicted",
        bool(small_real["allocated"]) and not beside["started"],
        f"free {beside['free']:,} B < requested {beside['requested']:,} B",
    )
    risk = next((r for r in _risks(small_week[1]) if r.get("seat") == "worker"), None)
    if risk is not None:
        predicted = int(risk["requested_bytes"]) - int(risk["short_bytes"])  # type: ignore[call-overload]
        real = int(beside["free"])  # type: ignore[call-overload]
        report.say(
            f"- predicted gate read at the worst recorded moment {predicted:,} B; real "
            f"{real:,} B ({real - predicted:+,} B)"
        )
        checks.check(
            "the predicted gate read is within 256 MiB of the real one",
            abs(real - predicted) <= 256 * MIB,
            f"{real - predicted:+,} B",
        )
    del big_week


if __name__ == "__main__":
    sys.exit(main())
