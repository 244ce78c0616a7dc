"""The words of every warning and nearest change `fit` returns as a note, written once.

A note (placement/fit/engines/note.py) is its sentence's name and figures; this module alone writes
them as words, each number once. Words that check and plan still write arrive as text and are
kept as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from placement.cli.learn_text import LEARN_WRITERS
from placement.cli.render import b
from placement.fit.engines.note import Note, Said
from seats.names import escaped

Data = Mapping[str, Any]


def _card(r: Data) -> str:
    """`3`, or `host:3` where the change is shown for a fleet of hosts."""
    on = r.get("on_host")
    return f"{on}:{r['card']}" if on else str(r["card"])


def parts_text(parts: Any) -> str:
    """`weights 7.42 GiB + non_kv 1.32 GiB + KV 2.00 GiB + cuda_context 1.16 GiB`."""
    return " + ".join(
        f"{name} {b(value)}" if value is not None else f"no {name} known" for name, value in parts
    )


def _kv_fixes(r: Data) -> str:
    card = _card(r)
    fixes: list[str] = []
    if r["util"] == "":
        fixes.append(f"no util holds {r['max_model_len']:,} tokens on card {card}")
    elif r["util"] is not None:
        refused = f" (card {card}'s gate refuses it)" if r["gate_refuses"] else ""
        fixes.append(f"util ≥ {r['util']}{refused}")
    need = r["kv_need_bytes"]
    fixes.append(f"kv_cache_memory ≥ {b(need)} ({need:,} B)")
    if r["tokens"]:
        fixes.append(f"--max-model-len ≤ {r['tokens']:,}")
    return f"card {card}: " + ", or ".join(fixes)


def _profile_resident(r: Data) -> str:
    total = r["total_bytes"]
    return (
        f"{r['seat']}: declared resident {b(r['resident_bytes'])} is below the {b(total)} its "
        f"profile implies on card {r['card']} ({parts_text(r['parts'])}): the seat will hold "
        f"more than the catalogue counts for it; raise resident to {total:,} B"
    )


def _below_floor(r: Data) -> str:
    """Alone (plan, pack) it names the seat and its floor; after `judged_resident`, which says
    the floor, it does not say it again."""
    floor = r["floor_bytes"]
    held = f"the {b(floor)} it holds" if r.get("seat") else "what it holds"
    named = f"{r['seat']}: " if r.get("seat") else ""
    return (
        f"{named}declared resident {b(r['resident_bytes'])} is below {held} with its KV cache "
        f"pinned ({parts_text(r['parts'])}): judged at that; raise resident to {floor:,} B"
    )


def _kv_changed(r: Data) -> str:
    """After `judged_resident`, which says the sum."""
    return (
        f"declared {b(r['declared_bytes'])} − its declared KV cache {b(r['declared_kv_bytes'])} "
        f"+ the new {b(r['kv_bytes'])}"
    )


def _largest_util(r: Data) -> str:
    cards = ", ".join(str(card) for card in r["cards"])
    return (
        f"util {r['util']} is the largest that passes vLLM's gate on card(s) {cards}: it requests "
        f"{b(r['requested_bytes'])}, less than the seat's {b(r['resident_bytes'])} resident, so "
        "vLLM's own gate no longer covers the whole seat"
    )


def _no_gate(r: Data) -> str:
    return (
        f"vLLM {r['version']} would not refuse {r['seat']}: with gpu_memory_utilization "
        f"{r['util']} and no kv_cache_memory it skips its start-up check and grows to about "
        "min(util × CUDA total, free − 1 GiB); gpuplan refuses it by room so that it does not "
        "squeeze the seats beside it"
    )


def _nvml_v1(r: Data) -> str:
    cards = r["cards"]
    listed = ", ".join(str(index) for index in cards)
    return (
        f"{r['source']}: NVML v1 only on card{'s' if len(cards) > 1 else ''} {listed} (no "
        "driver reserve reading): cuda_total taken as NVML total, and used includes the driver "
        "reserve"
    )


def _no_cuda_context(r: Data) -> str:
    host = r["host"]
    return (
        f"host {host} declares no cuda_context, so vLLM seats ({', '.join(r['seats'])}) are "
        "judged as if vLLM's own CUDA context took nothing before its start-up check reads free "
        "memory; it takes about 1.25 GiB (measured on an NVIDIA H200). Give the figure in the "
        f"catalogue (hosts: {host}: cuda_context: 1.25 GiB), or measure it on the host with "
        "`gpuplan calibrate`"
    )


NOTE_WRITERS: dict[str, Callable[[Data], str]] = {
    # nearest changes
    "free": lambda r: f"free {b(r['short_bytes'])} on card {_card(r)}",
    "lower_kv": lambda r: f"lower kv_cache_memory by {b(r['short_bytes'])} (card {_card(r)})",
    "release": lambda r: f"release {', '.join(r['reserves'])}",
    "smaller_util": lambda r: f"fits on card {_card(r)} with util ≤ {r['util']}",
    "too_big": lambda r: (
        f"{b(r['need_bytes'])} is more than a card of {b(r['cuda_total_bytes'])} CUDA total holds"
    ),
    "kv_fixes": _kv_fixes,
    # a verdict's warnings
    "nvml_v1_card": lambda r: (
        f"card {_card(r)}: NVML v1 only (no driver reserve reading); CUDA total taken as the NVML "
        "total, stricter for the gate"
    ),
    "largest_util": _largest_util,
    "no_gate": _no_gate,
    "profile_resident": _profile_resident,
    "vllm_version": lambda r: (
        f"vLLM version {r['version']!r} is not recognised; judged as gated with util {r['util']}"
    ),
    "unbounded_declared": lambda r: (
        "as declared it is unbounded (vLLM ≥ 0.34 with neither gpu_memory_utilization nor "
        "kv_cache_memory sizes its KV cache to nearly all free memory); start it with the flags "
        "shown"
    ),
    # a resident raised to what its KV cache and flags imply
    "below_floor": _below_floor,
    "kv_changed": _kv_changed,
    # After `judged_resident`, which says the floor.
    "floor_raised": lambda r: (
        f"the least it holds with its KV cache pinned ({parts_text(r['parts'])}), more than "
        f"{b(r['resident_bytes'])}"
    ),
    # a snapshot beside its catalogue, once per run
    "unknown_host": lambda r: (
        f"{r['source']}: host {r['host']} is not in the catalogue: no seats, reserves or margin "
        "apply to it, cuda_context taken as 0"
    ),
    "unread_card": lambda r: (
        f"{r['source']}: card {r['host']}:{r['card']} could not be read "
        f"({escaped(r['error'])}); it takes no seat"
    ),
    "nvml_v1": _nvml_v1,
    # an engine's own notes
    "no_pin": lambda r: f"{r['engine']} with no pin of its bytes",
    "vllm_unbounded": lambda r: (
        f"vLLM {r['version']} with neither gpu_memory_utilization nor kv_cache_memory"
        if r["version"]
        else "vLLM of no known version (an image tag like `latest`) with neither "
        "gpu_memory_utilization nor kv_cache_memory"
    ),
    "flag_twice": lambda r: f"{r['flag']} is given more than once; vLLM uses the last",
    # check's words around a note of fit
    "unseated_unbounded": lambda r: (
        f"resident unknown: no catalogue seat matches service {r['service']} (add "
        "`x-gpuplan-seat: NAME` or a seat whose `match` finds its command); "
        f"{note_text(r['why'])} is refused `unbounded` on a card that holds or will hold anything "
        "else, whatever its resident"
    ),
    "judged_resident": lambda r: (
        f"{r['seat']} judged with a resident of {b(r['resident_bytes'])}: {note_text(r['why'])}"
    ),
    "no_cuda_context": _no_cuda_context,
    # where a server's model name came from
    "manifest": lambda r: f"Ollama's manifest {r['path']}",
    "blob": lambda r: f"its model blob sha256-{r['digest']}…: no manifest of it could be read",
    "model_argument": lambda r: f"its model argument ({r['usage']})",
    # `learn`'s figure sources and its log readers' notes
    **LEARN_WRITERS,
}


def note_text(said: Said | Data) -> str:
    """A note's words (from the note, or its JSON); words already written are kept."""
    if isinstance(said, str):
        return said
    data = said.to_json() if isinstance(said, Note) else said
    return NOTE_WRITERS[str(data["said"])](data)


def note_texts(notes: Any) -> list[str]:
    """Each note's words, in order."""
    return [note_text(said) for said in notes]


def worded_notes(data: Any) -> Any:
    """JSON with each note (a mapping with a `said` and no `rule`) replaced by its words, at any
    depth (in place where it can be, and returned); reasons are left as they are."""
    if isinstance(data, dict):
        for key, value in data.items():
            data[key] = worded_notes(value)
        if data.get("said") and "rule" not in data:
            return note_text(data)
    elif isinstance(data, list):
        data[:] = [worded_notes(item) for item in data]
    return data
