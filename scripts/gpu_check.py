"""The inventory's proof on a real NVIDIA card: NVML identities, attribution, cuda_context, timing.

Run on a machine with a GPU (`make test-gpu`); prints a Markdown report and exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proof_kit import GIB, MIB, Report, cotenant, mib  # noqa: E402

from inventory.calibrate import STAGE_TEXT, STAGES, measure  # noqa: E402
from inventory.ledger.store import open_ledger  # noqa: E402
from inventory.nvml import PynvmlSource  # noqa: E402
from inventory.poller import take_snapshot  # noqa: E402
from inventory.snapshot import Snapshot, dumps_snapshot  # noqa: E402
from seats.errors import GpuplanError  # noqa: E402
from seats.loader import parse_catalogue  # noqa: E402

TOLERANCE_BYTES = 2 * MIB
HOST = "gpu-check"

# Holds a known number of bytes on the card, in steps the parent drives over stdin/stdout:
# first the CUDA context alone, then the tensor on top, so both can be snapshotted.
COTENANT = r"""
import sys
import torch
hold = int(sys.argv[sys.argv.index("--hold") + 1])
torch.cuda.set_device(0)
torch.cuda.mem_get_info()
print("context", flush=True)
sys.stdin.readline()
# torch.empty launches no kernel: the process then holds its context and the tensor alone.
x = torch.empty(hold, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("holding", flush=True)
sys.stdin.readline()
# The first kernel launch loads CUDA modules onto the card: the process grows by their size.
x.fill_(1)
torch.cuda.synchronize()
print("filled", flush=True)
sys.stdin.readline()
"""


def median_us(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of `fn` in microseconds over `repeat` calls (after two warm-ups)."""
    fn()
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1000


def idle_check(report: Report, source: PynvmlSource, gpu: int, out: Path | None) -> Snapshot:
    """(a) NVML identities on the idle card."""
    report.say("## (a) Idle card: NVML v1 vs v2")
    report.say()
    snapshot = take_snapshot(source, datetime.now(UTC), HOST)
    if out:
        (out / "idle.snapshot.json").write_text(dumps_snapshot(snapshot))
    card = snapshot.card(gpu)
    mem = source.memory(gpu)
    report.say("| reading | bytes | MiB |")
    report.say("|---|---:|---:|")
    for label, value in (
        ("v1 total", mem.v1_total_bytes),
        ("v1 used", mem.v1_used_bytes),
        ("v1 free", mem.v1_free_bytes),
        ("v2 total", mem.v2_total_bytes),
        ("v2 reserved", mem.v2_reserved_bytes),
        ("v2 used", mem.v2_used_bytes),
        ("v2 free", mem.v2_free_bytes),
    ):
        report.say(
            f"| {label} | {value:,} | {mib(value)} |"
            if value is not None
            else f"| {label} | n/a | |"
        )
    report.say()
    report.check(
        "card is idle",
        not card.processes,
        f"{len(card.processes)} compute process(es) on card {gpu}",
    )
    if mem.v2_reserved_bytes is None or mem.v2_used_bytes is None:
        report.check("NVML v2 memory", False, "the driver answered v1 only")
        return snapshot
    report.check(
        "v1 used = v2 used + v2 reserved",
        mem.v1_used_bytes == mem.v2_used_bytes + mem.v2_reserved_bytes,
        f"{mem.v1_used_bytes:,} vs {mem.v2_used_bytes:,} + {mem.v2_reserved_bytes:,}",
    )
    report.check(
        "v1 free = v2 free",
        mem.v1_free_bytes == mem.v2_free_bytes,
        f"{mem.v1_free_bytes:,} vs {mem.v2_free_bytes}",
    )
    report.check(
        "snapshot carries v2 figures",
        card.used_bytes == mem.v2_used_bytes and card.reserved_bytes == mem.v2_reserved_bytes,
        f"used {card.used_bytes:,}, reserved {card.reserved_bytes:,}",
    )
    report.say()
    return snapshot


def calibration_check(report: Report, source: PynvmlSource, gpu: int, runs: int) -> None:
    """(c) cuda_context, and CUDA total = NVML total − reserved from the same fresh processes."""
    report.say("## (c) cuda_context: what a fresh process takes before its gate reads free memory")
    report.say()
    calibration = measure(gpu, runs, source=source)
    report.say(
        "| process does, in vLLM's worker order | "
        + " | ".join(f"run {i + 1}" for i in range(runs))
        + " |"
    )
    report.say("|---|" + "---:|" * runs)
    for stage in STAGES:
        cells = " | ".join(f"{r.taken_bytes(stage) / MIB:,.1f} MiB" for r in calibration.runs)
        report.say(f"| {STAGE_TEXT[stage]} | {cells} |")
    report.say()
    reserved = calibration.nvml_reserved_bytes
    if reserved is not None:
        expected = calibration.nvml_total_bytes - reserved
        totals = {r.cuda_total_bytes for r in calibration.runs}
        report.check(
            "cudaMemGetInfo total = NVML total − v2 reserved",
            totals == {expected},
            f"CUDA {', '.join(f'{t:,}' for t in sorted(totals))} vs {calibration.nvml_total_bytes:,} − {reserved:,}"
            f" = {expected:,}",
        )
    context = calibration.cuda_context_bytes()
    report.say()
    report.say("For the catalogue (largest run, rounded up to MiB):")
    report.say()
    report.say("```yaml")
    report.say(f"cuda_context: {context // MIB} MiB")
    report.say("```")
    report.say()


def cotenant_check(
    report: Report, source: PynvmlSource, gpu: int, hold_bytes: int, repeat: int, out: Path | None
) -> None:
    """(b) a co-tenant holding `hold_bytes` is attributed with held + its context; (d) timing with it."""
    report.say(f"## (b) A co-tenant holding {hold_bytes / GIB:g} GiB, attributed by the poller")
    report.say()
    catalogue = parse_catalogue(
        {
            "hosts": {HOST: {"cards": source.card_count()}},
            "seats": [
                {
                    "name": "gpu-check-cotenant",
                    "host": HOST,
                    "gpus": [gpu],
                    "resident": hold_bytes,
                    "state": "running",
                    "match": r"gpuplan_cotenant\.py --hold",
                }
            ],
        },
        "<gpu-check catalogue>",
    )
    uuid = source.read_card(gpu).uuid or str(gpu)
    with cotenant(COTENANT, hold_bytes, uuid) as child:
        assert child.stdin is not None and child.stdout is not None
        if child.stdout.readline().strip() != "context":
            report.check("co-tenant started", False, "it did not report its CUDA context")
            return
        time.sleep(0.5)
        with_context = take_snapshot(source, datetime.now(UTC), HOST, catalogue=catalogue)
        child.stdin.write("go\n")
        child.stdin.flush()
        if child.stdout.readline().strip() != "holding":
            report.check("co-tenant allocated", False, "it did not report holding its bytes")
            return
        time.sleep(0.5)
        holding = take_snapshot(source, datetime.now(UTC), HOST, catalogue=catalogue)
        if out:
            (out / "cotenant.snapshot.json").write_text(dumps_snapshot(holding))
        before = [p for p in with_context.card(gpu).processes if p.pid == child.pid]
        after = holding.card(gpu).processes
        report.say("| process | pid | used | cmdline | seat |")
        report.say("|---|---:|---:|---|---|")
        for p in after:
            report.say(
                f"| on card {gpu} | {p.pid} | {mib(p.used_bytes)} | `{p.cmdline}` | {p.seat} |"
            )
        report.say()
        report.check(
            "NVML lists exactly the co-tenant, by its PID",
            [p.pid for p in after] == [child.pid],
            f"listed {[p.pid for p in after]}, child PID {child.pid}"
            + (
                ""
                if any(p.pid == child.pid for p in after)
                else " (a PID namespace apart? see --pid=host)"
            ),
        )
        mine = [p for p in after if p.pid == child.pid]
        report.check(
            "attributed to its seat by cmdline",
            len(mine) == 1 and mine[0].seat == "gpu-check-cotenant",
            f"seat {mine[0].seat if mine else None!r}, cmdline {mine[0].cmdline if mine else None!r}",
        )
        context = before[0].used_bytes if before and before[0].used_bytes is not None else None
        used = mine[0].used_bytes if mine else None
        if context is not None and used is not None:
            report.check(
                "used = held + its context (±2 MiB)",
                abs(used - (hold_bytes + context)) <= TOLERANCE_BYTES,
                f"used {used:,} B = held {hold_bytes:,} + context {context:,} "
                f"({context / MIB:,.1f} MiB) {used - hold_bytes - context:+,} B",
            )
        else:
            report.check(
                "used = held + its context (±2 MiB)", False, f"context {context}, used {used}"
            )
        card = holding.card(gpu)
        report.say(
            f"- card {gpu} while holding: v2 used {mib(card.used_bytes)}, free {mib(card.free_bytes)}, "
            f"reserved {mib(card.reserved_bytes)}"
        )
        child.stdin.write("go\n")
        child.stdin.flush()
        if child.stdout.readline().strip() == "filled":
            time.sleep(0.5)
            filled = take_snapshot(source, datetime.now(UTC), HOST, catalogue=catalogue)
            grown = [p.used_bytes for p in filled.card(gpu).processes if p.pid == child.pid]
            if grown and grown[0] is not None and used is not None:
                report.say(
                    f"- after its first kernel launch (`fill_`) the same process holds {mib(grown[0])}: "
                    f"{mib(grown[0] - used)} more, the CUDA modules loaded lazily onto the card "
                    "(a seat's resident is measured once it has served, not just after start-up)"
                )
        report.say()
        timing(report, source, gpu, catalogue, repeat)
        ledger_check(report, [with_context, holding])


def timing(report: Report, source: PynvmlSource, gpu: int, catalogue: object, repeat: int) -> None:
    """(d) one snapshot per card vs the raw NVML calls vs nvidia-smi as a subprocess."""
    report.say("## (d) Cost of a reading (with the co-tenant running)")
    report.say()
    cards = source.card_count()
    raw_one = median_us(lambda: source.read_card(gpu), repeat)
    raw_all = median_us(source.read_cards, repeat)
    snap = median_us(lambda: take_snapshot(source, datetime.now(UTC), HOST), repeat)
    snap_attr = median_us(
        lambda: take_snapshot(source, datetime.now(UTC), HOST, catalogue=catalogue),  # type: ignore[arg-type]
        repeat,
    )
    mem = median_us(lambda: source.memory(gpu), repeat)
    smi_cmd = [
        "nvidia-smi",
        "--query-gpu=index,memory.total,memory.used,memory.free",
        "--format=csv,noheader",
    ]
    try:
        smi = median_us(lambda: subprocess.run(smi_cmd, capture_output=True, check=True), 20)
    except (OSError, subprocess.CalledProcessError):
        smi = float("nan")
    report.say(f"{cards} card(s) on this host; medians over {repeat} calls (nvidia-smi: 20).")
    report.say()
    report.say("| reading | median µs | per card µs |")
    report.say("|---|---:|---:|")
    report.say(f"| NVML memory v1 + v2, one card | {mem:,.1f} | {mem:,.1f} |")
    report.say(
        f"| raw NVML card reading (name, uuid, memory, utilisation, processes), one card | {raw_one:,.1f} | {raw_one:,.1f} |"
    )
    report.say(f"| raw NVML, all cards (`read_cards`) | {raw_all:,.1f} | {raw_all / cards:,.1f} |")
    report.say(
        f"| `take_snapshot` (raw + /proc cmdlines + frozen Snapshot) | {snap:,.1f} | {snap / cards:,.1f} |"
    )
    report.say(
        f"| `take_snapshot` with attribution | {snap_attr:,.1f} | {snap_attr / cards:,.1f} |"
    )
    report.say(
        f"| `nvidia-smi --query-gpu … --format=csv` subprocess | {smi:,.1f} | {smi / cards:,.1f} |"
    )
    report.say()
    report.check(
        "snapshot ≤ 2× the raw NVML calls it makes",
        snap <= 2 * raw_all,
        f"{snap / raw_all:.2f}× ({snap:,.1f} µs vs {raw_all:,.1f} µs)",
    )
    report.say(f"- nvidia-smi subprocess / snapshot: {smi / snap:,.0f}×")
    report.say()


def ledger_check(report: Report, snapshots: list[Snapshot]) -> None:
    """The real snapshots go into a ledger and come back equal."""
    report.say("## Ledger round trip of the real snapshots")
    report.say()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "ledger.sqlite"
        with open_ledger(path) as ledger:
            ids = [ledger.append(s) for s in snapshots]
            again = [ledger.append(s) for s in snapshots]
            back = list(ledger.snapshots(HOST))
    # The ledger keeps one snapshot per host and second: the first one of each second stays.
    first_of_second: dict[datetime, Snapshot] = {}
    for snapshot in snapshots:
        first_of_second.setdefault(snapshot.taken_at, snapshot)
    kept = sorted(first_of_second.values(), key=lambda s: s.taken_at)
    report.check(
        "stored once per host and second",
        ids == again and len(set(ids)) == len(kept),
        f"ids {ids}, again {again}, {len(kept)} distinct second(s)",
    )
    report.check("read back equal", back == kept, f"{len(back)} snapshot(s)")
    report.say()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--gpu", type=int, default=0, help="NVML index of the card to use (default 0)"
    )
    parser.add_argument(
        "--hold-gib", type=float, default=20.0, help="bytes the co-tenant holds (default 20 GiB)"
    )
    parser.add_argument("--runs", type=int, default=3, help="calibration runs (default 3)")
    parser.add_argument(
        "--repeat", type=int, default=500, help="timed calls per reading (default 500)"
    )
    parser.add_argument(
        "--out", type=Path, help="also write the report and the snapshots into this folder"
    )
    args = parser.parse_args(argv)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    report = Report()
    with PynvmlSource() as source:
        card = source.read_card(args.gpu)
        report.say("# gpuplan GPU check")
        report.say()
        report.say(f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
        report.say(f"- card {args.gpu} of {source.card_count()}: {card.name} ({card.uuid})")
        report.say(f"- driver {source.driver_version()}, NVML {source.nvml_version()}")
        report.say(f"- Python {platform.python_version()}, {platform.machine()}")
        try:
            torch = importlib.import_module("torch")
            report.say(f"- torch {torch.__version__}, CUDA {torch.version.cuda}")
        except ImportError:
            report.say("- torch: not importable")
        report.say()
        idle_check(report, source, args.gpu, args.out)
        calibration_check(report, source, args.gpu, args.runs)
        cotenant_check(report, source, args.gpu, int(args.hold_gib * GIB), args.repeat, args.out)
    report.say("## Result")
    report.say()
    report.say("all checks passed" if not report.failed else f"FAILED: {', '.join(report.failed)}")
    if args.out:
        (args.out / "gpu-check.md").write_text("\n".join(report.lines) + "\n")
    return 1 if report.failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GpuplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(int(exc.exit_code))
