"""Files from other GPU tools, recognised so a wrong `--snapshot` says what it is and what to do.

nvidia-smi's table, its `-q` report, its `-q -x` XML and its `--query-gpu … --format=csv`, and
gpustat's `--json`, are the outputs people have at hand; none of them holds what a snapshot
needs (bytes, not whole MiB, and each process's command line), so gpuplan does not convert them.
"""

from __future__ import annotations

import re
from typing import Any

HOW = (
    "take a gpuplan snapshot on that host instead: `gpuplan snapshot --out FILE` "
    "(or `gpuplan snapshot --json > FILE`), then copy FILE here"
)

_TEXT_SIGNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^\|\s*NVIDIA-SMI \d", re.M), "nvidia-smi's table"),
    (re.compile(r"=+NVSMI LOG=+"), "nvidia-smi -q's report"),
    (re.compile(r"<nvidia_smi_log>"), "nvidia-smi -q -x's XML"),
    (re.compile(r"^[^\n]*\bmemory\.(total|used|free) \[MiB\]", re.M), "nvidia-smi --query-gpu CSV"),
)


def recognise_text(text: str) -> str | None:
    """The tool whose output `text` is, or None (judged on the first 64 KiB)."""
    head = text[: 64 * 1024]
    for pattern, name in _TEXT_SIGNS:
        if pattern.search(head):
            return name
    return None


def recognise_json(data: Any) -> str | None:
    """ "gpustat --json" for gpustat's shape (a `gpus` list of entries with `memory.used`), else None."""
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        return None
    entries = [g for g in data["gpus"] if isinstance(g, dict)]
    if entries and any("memory.used" in g or "memory.total" in g for g in entries):
        return "gpustat --json"
    return None


def message(tool: str) -> str:
    """The whole refusal: what the file is, what a snapshot holds that it lacks, what to do."""
    return (
        f"this is {tool}, not a gpuplan snapshot (whole MiB instead of bytes, and no command "
        f"line per process to tell the seats apart); {HOW}"
    )
