"""The words of `gpuplan learn`'s figure sources, written once: how a figure was worked out from
the log's lines, how exact it is, and the notes an engine's log reader hands up as data.

A log line is shown as the engine printed it (`shown_line`); everything else here is ours.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from placement.cli.render import b
from seats.names import escaped

Data = Mapping[str, Any]

# ANSI colour codes (SGR, `ESC [ … m`: vLLM colours its process prefixes): dropped from a shown
# line, so they neither colour the terminal nor clutter it as escapes.
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def shown_line(line: str, width: int | None = 160) -> str:
    """A log line as `learn` shows it: colour codes dropped, stripped, clipped to `width`
    characters, and every other control character escaped (seats.names.escaped), so that no log
    line can move the cursor, erase a line or print a line of its own."""
    text = _COLOUR.sub("", line).strip()
    if width is None or len(text) <= width:
        return escaped(text)
    return escaped(text[:width]) + "…"


def profile_block(header: str, figures: Sequence[tuple[str, int | None, bool]]) -> list[str]:
    """`# header`, `profile:` and a line a figure to paste under the seat's `engine:`: its
    number, with its size beside it where it is bytes, or `unknown`."""
    out = [f"# {header}", "      profile:"]
    for key, value, size in figures:
        shown = "unknown" if value is None else str(value)
        out.append(
            f"        {key}: {shown}" + (f"  # {b(value)}" if size and value is not None else "")
        )
    return out


def _graphs(r: Data) -> str:
    """A printed CUDA graph figure: its unit, the split line's words, and a negative one."""
    quoted = f", '{r['printed']} GiB for CUDAGraph memory'" if r["split"] else ""
    if r["counted"]:
        return f"{r['unit']}{quoted}"
    return f"printed {r['printed']} GiB{quoted}: none counted"


def _lines(r: Data) -> str:
    """`(lines 15 and 26)`, or `(line 7)` where one line prints both figures."""
    first, second = r["lines"]
    return f"(line {first})" if first == second else f"(lines {first} and {second})"


def _request_less(r: Data) -> str:
    where = "the log's" if r["total_from"] == "log" else "the host's card_total (NVML total)"
    return f"ceil({r['util']} × {r['total_bytes']:,} B, {where}) − weights − KV bytes"


def _sizes_up(r: Data) -> str:
    summed = " + ".join(f"{size} + {r['up']}" for size in r["sizes"])
    return (
        f"({summed}) GiB ÷ {r['tokens']:,} tokens, rounded down: at least the true figure "
        + _lines(r)
    )


LEARN_WRITERS: dict[str, Callable[[Data], str]] = {
    # how a figure was worked out from the log's lines
    "kv_over_tokens": lambda r: f"{r['kv_bytes']:,} B ÷ {r['tokens']:,} tokens {_lines(r)}",
    "request_less": _request_less,
    "sizes_up_over_tokens": _sizes_up,
    # how exact a figure is
    "summed": lambda r: (
        f"{r['figures']} figures of {r['unit']}"
        + (f", less the {r['less']}" if r.get("less") else "")
    ),
    "graphs": _graphs,
    "per_token_bound": lambda r: "an upper bound: vLLM counts tokens in whole blocks",
    "per_token_within": lambda r: (
        f"within {r['slack_bytes']:,} B either way: the KV bytes are printed to {r['unit']} "
        "(and vLLM counts tokens in whole blocks)"
    ),
    "as_its_terms": lambda r: "as exact as its terms",
    # what a log reader notes
    "graphs_outside": lambda r: (
        f"CUDA graphs took {b(r['graphs_bytes'])} beyond weights + non_kv + KV (line {r['line']}): "
        "vLLM before 0.21 captures them after sizing the KV cache, outside its request; "
        "cuda_graphs counts them in the seat's resident, not in its KV cache"
    ),
    "non_kv_below": lambda r: (
        f"non_kv unknown: util {r['util']} × {r['total_bytes']:,} B is less than the log's "
        "weights and KV cache together; is this the seat's own log?"
    ),
    "offloaded_none": lambda r: (
        f"no {r['what']} on a CUDA card: 0 bytes there (offloaded 0 layers)"
    ),
    "graphs_unknown": lambda r: (
        "cuda_graphs unknown: the log prints no 'Graph capturing finished in … took X GiB' "
        "line (0 if vLLM ran with --enforce-eager)"
    ),
    "non_kv_unknown": lambda r: (
        "non_kv unknown: the log prints no 'Free memory on device (…) … Actual usage is …' "
        "line; declare gpu_memory_utilization on the seat and card_total on its host"
    ),
    "printed_gib": lambda r: "SGLang prints GB as 2**30 bytes to 0.01: weights and KV are ± 5 MiB",
    "printed_mib": lambda r: (
        "buffer sizes are printed in MiB to 0.01: each figure is within 10 KiB"
    ),
    "printed_3_figures": lambda r: (
        "Ollama prints sizes to 3 significant figures: each is within 0.5 %"
    ),
}
