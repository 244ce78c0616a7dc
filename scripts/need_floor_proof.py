"""A seat declared below its weights + KV + context, on a real card: `check` judges it at that sum,
and a process taking those parts really does not fit where the declared resident would have.

The catalogue's seat declares an 8 GiB resident with 6 GiB of weights and a 4 GiB KV cache pinned
(vLLM 0.11, a small util). gpuplan's need is at least weights + KV + the host's cuda_context
(DESIGN.md "What fits", placement/fit/kv.py `kv_need_floor`), about 11 GiB, not 8 GiB. A co-tenant
leaves the card with free memory between the two; `check` must refuse (rule room), where judging
the declared 8 GiB passed; a child process then takes its CUDA context, the weights and the KV
cache (torch stands in for vLLM: vLLM is not run) and must fail to get them all. With more free
memory, `check` passes and the child holds them, NVML showing it above its declared 8 GiB.
Prints a Markdown report (written with --out), exit 1 on a miss.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hold_gate_proof import COTENANT, gpuplan  # noqa: E402
from kv_profile_proof import run_child, steps  # noqa: E402
from proof_kit import GIB, MIB, Report, cotenant, gib, mib  # noqa: E402

from inventory.calibrate import measure  # noqa: E402
from inventory.nvml import PynvmlSource  # noqa: E402
from inventory.poller import take_snapshot  # noqa: E402
from inventory.snapshot import dumps_snapshot  # noqa: E402

HOST = "floor-proof"
DECLARED = 8 * GIB
WEIGHTS = 6 * GIB
KV = 4 * GIB


def catalogue_text(cards: int, gpu: int, context: int) -> str:
    """One vLLM 0.11 seat declared at 8 GiB with 6 GiB of weights and a 4 GiB KV pin."""
    return (
        "# Written by scripts/need_floor_proof.py: cuda_context measured on this card just before.\n"
        f"hosts:\n  {HOST}:\n    cards: {cards}\n    cuda_context: {context}\n    margin: 0\n"
        "seats:\n"
        "  - name: floor-seat\n"
        f"    host: {HOST}\n"
        f"    gpus: [{gpu}]\n"
        f"    resident: {DECLARED}\n"
        f"    weights: {WEIGHTS}\n"
        "    state: planned\n"
        "    match: 'never-matches-a-process'\n"
        '    engine: {kind: vllm, version: "0.11.0", gpu_memory_utilization: 0.03, '
        f"kv_cache_memory: {KV}}}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    out: Path = args.out or Path(tempfile.mkdtemp(prefix="gpuplan-floor-proof-"))
    out.mkdir(parents=True, exist_ok=True)
    report = Report()
    report.say("# A seat declared below its weights + KV + context, on a real card")
    report.say()
    report.say(f"Measured on an NVIDIA H200, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.")
    report.say(
        "Reproduce with `python3 scripts/need_floor_proof.py --out DIR` (torch, an NVIDIA GPU)."
    )
    report.say()
    with PynvmlSource() as source:
        card = source.read_card(args.gpu)
        uuid = card.uuid or str(args.gpu)
        context = measure(args.gpu, runs=2, source=source).cuda_context_bytes()
        floor = WEIGHTS + KV + context
        report.say(f"- card {args.gpu}: {card.name}, driver {source.driver_version()}")
        report.say(
            f"- seat: declared resident {DECLARED:,} B ({gib(DECLARED)}), weights {WEIGHTS:,} B, "
            f"KV pinned {KV:,} B; cuda_context measured {context:,} B ({mib(context)}): "
            f"need floor {floor:,} B ({gib(floor)})"
        )
        catalogue = out / "floor-proof.catalogue.yaml"
        catalogue.write_text(
            catalogue_text(source.card_count(), args.gpu, context), encoding="utf-8"
        )
        report.say()
        report.say(
            "| NVML free | check | need judged | the child's context, weights, KV | "
            "NVML of the child after each |"
        )
        report.say("|---|---|---|---|---|")
        checks = Report()
        # Between the declared 8 GiB and the floor; then above the floor.
        for left in (DECLARED + (floor - DECLARED) // 2, floor + 2 * GIB):
            report.say(one_case(checks, source, args.gpu, uuid, left, floor, catalogue, out))
        report.add_checks(checks)
    return report.finish(out / "need-floor-proof.md")


def one_case(
    report: Report,
    source: PynvmlSource,
    gpu: int,
    uuid: str,
    left: int,
    floor: int,
    catalogue: Path,
    out: Path,
) -> str:
    """A co-tenant leaves about `left` bytes free; check the seat; a child takes its parts."""
    now = source.read_card(gpu)
    assert now.free_bytes is not None
    # The co-tenant's own context (~500 MiB) comes on top of what it holds.
    hold = max(0, now.free_bytes - left - 512 * MIB)
    with cotenant(COTENANT, hold, uuid) as child:
        assert child.stdout is not None
        child.stdout.readline()
        snapshot = take_snapshot(source, datetime.now(UTC), HOST)
        snap = out / f"snapshot-{left}.json"
        snap.write_text(dumps_snapshot(snapshot), encoding="utf-8")
        free = snapshot.card(gpu).free_bytes or 0
        code, data = gpuplan(
            "check", "floor-seat", "--gpu", str(gpu), "--catalogue", str(catalogue),
            "--snapshot", str(snap),
        )  # fmt: skip
        need = data.get("need_bytes")
        rules = sorted({str(r["rule"]) for r in data.get("reasons", [])})  # type: ignore[union-attr]

        def read_used(pid: int) -> int | None:
            found = source.read_card(gpu)
            return next((p.used_bytes for p in found.processes if p.pid == pid), None)

        readings = run_child(read_used, uuid, steps(WEIGHTS, 0, KV))
    took_all = readings[-1] is not None
    fits = free >= floor
    report.check(
        f"free {gib(free)}: check judges the seat at its floor",
        need == floor,
        f"need_bytes {need} (floor {floor:,} B; the declared resident is {DECLARED:,} B)",
    )
    report.check(
        f"free {gib(free)}: check's verdict is what the real allocation did",
        (code == 0) == took_all and (code == 0) == fits,
        f"check exit {code} (rules {rules or '-'}); the child {'took' if took_all else 'did not get'} "
        f"context + weights + KV; judged by the declared {gib(DECLARED)} it would have "
        f"{'passed' if free >= DECLARED else 'been refused'}",
    )
    if took_all:
        held = readings[-1] or 0
        report.check(
            f"free {gib(free)}: the child holds more than the declared resident",
            held > DECLARED,
            f"NVML {held:,} B against {DECLARED:,} B declared and {floor:,} B judged",
        )
    # Context, weights, non-KV (none here), KV: the last is missing where the allocation failed.
    shown = " / ".join("-" if r is None else mib(r) for r in readings)
    return (
        f"| {gib(free)} | exit {code} {' '.join(rules)} | "
        f"{gib(need if isinstance(need, int) else None)} | "
        f"{'all taken' if took_all else 'failed'} | {shown} |"
    )


if __name__ == "__main__":
    sys.exit(main())
