"""Benchmark of holds: what 1,000 active holds in the ledger add to one `check --ledger`.

Target (issue 13): under 20 ms. The same check (fv-ml1's vllm-voices on card 0, decision recorded,
no new hold) runs in this process against a ledger with no holds and one with 1,000 active
holds of other seats spread over 125 hosts × 8 cards; medians of runs alternated side by side.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from bench import quick
from inventory.holds import Hold
from inventory.ledger.store import open_ledger
from inventory.snapshot import load_snapshot
from placement.cli import check as cli_check
from placement.cli import sources
from placement.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "seats/catalogue/fv-ml1.snapshot.json"
CATALOGUE = ROOT / "seats/catalogue/fv-ml1.yaml"
HOLDS = 1000
TARGET_MS = 20.0


def _ledger(path: Path, holds: int) -> Path:
    now = load_snapshot(SNAPSHOT).taken_at
    with open_ledger(path) as ledger, ledger.approving(now) as approval:
        approval.hold(
            [
                Hold(
                    seat=f"held-{n}",
                    host=f"host-{n // 8:03d}",
                    cards=(n % 8,),
                    need_bytes=(1 + n % 4) * 2**30,
                    created_at=now,
                    expires_at=now + timedelta(days=1),
                    user="bench",
                )
                for n in range(holds)
            ]
        )
    return path


def _check_ms(db: Path) -> float:
    argv = [
        "check", "vllm-voices", "--gpu", "0", "--catalogue", str(CATALOGUE),
        "--snapshot", str(SNAPSHOT), "--ledger", str(db), "--no-hold",
    ]  # fmt: skip
    sink = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = main(argv)
    elapsed = (time.perf_counter() - started) * 1000
    if code != 0:
        raise RuntimeError(f"check exited {code}: {sink.getvalue()[-500:]}")
    return elapsed


def run() -> str:
    """Alternate the two ledgers; report medians, the difference, and the target."""
    taken = load_snapshot(SNAPSHOT).taken_at
    clock = lambda: taken + timedelta(minutes=1)  # noqa: E731 - the holds are active then
    sources.utc_now, cli_check.utc_now = clock, clock  # type: ignore[assignment]
    runs = 7 if quick() else 25
    with tempfile.TemporaryDirectory() as tmp:
        empty = _ledger(Path(tmp) / "empty.sqlite", 0)
        full = _ledger(Path(tmp) / "full.sqlite", HOLDS)
        with open_ledger(full, readonly=True) as ledger:
            active = len(ledger.holds(taken + timedelta(minutes=1)))
        _check_ms(empty), _check_ms(full)  # warm imports and caches
        base, held = [], []
        for _ in range(runs):
            base.append(_check_ms(empty))
            held.append(_check_ms(full))
    b, h = statistics.median(base), statistics.median(held)
    verdict = "meets" if h - b < TARGET_MS else "MISSES"
    return "\n".join(
        [
            "## Holds: `check --ledger` with 1,000 active holds",
            "",
            f"{runs} runs each, alternated, in one process (imports warm); {active} active holds.",
            "",
            "| ledger | median ms | min ms |",
            "|---|---:|---:|",
            f"| no holds | {b:.1f} | {min(base):.1f} |",
            f"| {active} active holds | {h:.1f} | {min(held):.1f} |",
            "",
            f"Added by the holds: **{h - b:.1f} ms** (target under {TARGET_MS:.0f} ms: {verdict}).",
        ]
    )


if __name__ == "__main__":
    print(run())
