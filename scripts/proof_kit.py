"""What the two real-GPU proofs share: their Markdown report, byte figures, and a torch co-tenant.

Imported by scripts/gpu_check.py and scripts/check_gpu_proof.py, which run as scripts (so this
folder is on their import path); it needs nothing beyond the standard library.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

MIB = 2**20
GIB = 2**30


@dataclass
class Report:
    """Markdown lines and the checks that failed."""

    lines: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def say(self, text: str = "") -> None:
        self.lines.append(text)
        print(text, flush=True)

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.say(f"- {'PASS' if ok else 'FAIL'} — {name}: {detail}")
        if not ok:
            self.failed.append(name)

    def add_checks(self, checks: Report) -> None:
        """A `## Checks` section after the tables: the lines and failures of `checks`."""
        self.say()
        self.say("## Checks")
        self.say()
        self.lines.extend(checks.lines)
        self.failed.extend(checks.failed)

    def finish(self, path: Path) -> int:
        """The closing verdict line, the report written to `path`; exit 0, or 1 on a miss."""
        self.say()
        self.say("All checks passed." if not self.failed else f"FAILED: {', '.join(self.failed)}")
        path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        return 0 if not self.failed else 1


def mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / MIB:,.1f} MiB"


def gib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / GIB:,.2f} GiB"


@contextmanager
def cotenant(source: str, hold_bytes: int, uuid: str) -> Iterator[subprocess.Popen[str]]:
    """A child running the torch program `source` with `--hold hold_bytes` on card `uuid` alone."""
    with torch_child(source, ["--hold", str(hold_bytes)], uuid) as child:
        yield child


@contextmanager
def torch_child(source: str, args: list[str], uuid: str) -> Iterator[subprocess.Popen[str]]:
    """A child running the torch program `source` with `args` on card `uuid` alone.

    It talks line by line over stdin/stdout; on leaving the block it is told "done", given 30 s
    to free its memory, then killed.
    """
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=uuid)
    env.setdefault("NCCL_DEBUG", "WARN")
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "gpuplan_proof_child.py"
        script.write_text(source, encoding="utf-8")
        child = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert child.stdin is not None and child.stdout is not None
        try:
            yield child
        finally:
            if child.poll() is None:
                try:
                    child.stdin.write("done\n")
                    child.stdin.flush()
                except BrokenPipeError:
                    pass  # it is exiting already (an allocation that failed, say)
                try:
                    child.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    child.kill()
