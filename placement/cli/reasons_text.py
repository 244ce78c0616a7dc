"""The words of every reason, written once: a Reason's data (its JSON) in, its sentence out.

`fit` returns each reason as its rule, card, bytes and facts (`said` names the sentence); this
module alone turns them into words, each number said once. The JSON keeps a `text` key, filled
here (`worded_json`) before it is printed or stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from placement.cli.engine_text import ENGINE_SAYS_FIGURES, ENGINE_WRITERS
from placement.cli.notes_text import note_text
from placement.cli.render import b, figure_text
from placement.cli.window_text import WINDOW_WRITERS
from placement.fit.verdict import Reason, Verdict
from seats.names import escaped

Data = Mapping[str, Any]

# The sentences that say the reason's need, room and short themselves: a line that shows them
# prints no figures before them (each number once).
SAYS_FIGURES = frozenset(
    {
        "room",
        "room_floor",
        "replicas",
        "gate",
        "kv_capacity",
        "kv_no_room",
        *ENGINE_SAYS_FIGURES,
        *WINDOW_WRITERS,
    }
)


def _names(names: Any) -> str:
    return ", ".join(str(name) for name in names)


def _room_terms(r: Data) -> str:
    """'5.57 GiB free − 256.00 MiB margin', leaving out the terms that are zero."""
    text = f"{b(r['free_bytes'])} free"
    for key, label in (
        ("held_bytes", "held"),
        ("margin_bytes", "margin"),
        ("others_bytes", "for new seats here"),
    ):
        if r.get(key):
            text += f" − {b(r[key])} {label}"
    return text


def _room(r: Data) -> str:
    return (
        f"need {b(r['need_bytes'])}, {figure_text('room', r['room_bytes'])} ({_room_terms(r)}): "
        f"short {b(r['short_bytes'])}"
    )


def _room_floor(r: Data) -> str:
    return (
        f"need at least {b(r['need_bytes'])} (its resident is unknown), "
        f"{figure_text('room', r['room_bytes'])} ({_room_terms(r)}): short at least "
        f"{b(r['short_bytes'])}"
    )


def _replicas(r: Data) -> str:
    count = r["replicas"]
    return (
        f"{count} replicas need {count} × {b(r['each_bytes'])} = {b(r['need_bytes'])}, more "
        f"than the card's {b(r['room_bytes'])} in all, short {b(r['short_bytes'])}: refused at "
        "once, no replica judged"
    )


def _gate(r: Data) -> str:
    return (
        f"{r['engine']}'s gate: {figure_text('free', r['room_bytes'])} after its "
        f"{b(r['cuda_context_bytes'])} CUDA context < util {r['util']} × "
        f"{b(r['cuda_total_bytes'])} = {b(r['need_bytes'])}, short {b(r['short_bytes'])}"
    )


def _kv_capacity(r: Data) -> str:
    util = r.get("util")
    where = "kv_cache_memory" if util is None else f"util {util} leaves"
    return (
        f"{r['engine']}'s KV cache check: {where} {b(max(0, r['room_bytes']))} holds "
        f"{r['tokens']:,} tokens at {r['kv_bytes_per_token']:,} B per token, fewer than "
        f"max_model_len {r['max_model_len']:,} ({b(r['need_bytes'])}): short "
        f"{b(r['short_bytes'])}"
    )


def _kv_no_room(r: Data) -> str:
    return (
        f"{r['engine']}'s KV cache check: util {r['util']} requests {b(r['room_bytes'])}, less "
        f"than its weights {b(r['need_bytes'])}: no memory is left for its KV cache "
        f'("No available memory for the cache blocks"): short {b(r["short_bytes"])}'
    )


def hold_note(facts: Any) -> str:
    """`4.00 GiB approved for tts at …`; a redeploy's hold says what it replaces."""
    note, held, need, seen = facts
    if not seen:
        return f"{b(held)} {note}"
    return f"{b(held)} {note} (a redeploy: {b(need)} in place of the {b(seen)} it holds here now)"


def _reserve(r: Data) -> str:
    return f"{b(r['held_bytes'])} held for {_names(r['held_for'])} ({_names(r['reserves'])})"


def _kept_reserve(r: Data) -> str:
    return "; ".join(
        f"{name} keeps {b(amount)} for {_names(owners)}" for name, amount, owners in r["kept"]
    )


def _hold_gate(r: Data) -> str:
    return (
        f"would leave {r['seat']}'s approved gate short (it requests "
        f"{b(r['requested_bytes'])}; {r['note']})"
    )


def _unbounded(r: Data) -> str:
    return (
        f"unbounded {r['engine']} (≥ 0.34 with neither gpu_memory_utilization nor "
        f"kv_cache_memory) would take what {_names(r['takes'])} need"
    )


def _unbounded_share(r: Data) -> str:
    return (
        f"unbounded {note_text(r['why'])}: it takes a share of what is free when it starts, so it would "
        f"take what {_names(r['takes'])} need; pin it ({r['pin']})"
    )


def _unbounded_beside(r: Data) -> str:
    return (
        f"{r['beside']} beside it on card {r['card']} is unbounded ({note_text(r['why'])}): it grows into "
        f"nearly all free memory, so {r['seat']} has no room it can count on; pin "
        f"{r['beside']} with {r['pin']}"
    )


def _few_cards(r: Data) -> str:
    passing = _names(r["passing"]) or "none"
    return (
        f"{r['seat']} needs {r['cards_wanted']} cards of one host; {r['host']} has "
        f"{len(r['passing'])} with room for it ({passing})"
    )


def _unusable(r: Data) -> str:
    if r.get("seat_host"):
        (_, why), *_ = r["unusable"]
        return f"{r['seat']} names host {r['seat_host']}, which is unusable: {why}"
    listed = "; ".join(f"{host}: {why}" for host, why in r["unusable"])
    return f"every host {r['seat']} may use is unusable ({listed})"


def _blocked(r: Data) -> str:
    return f"would refuse {r['seat']} (priority {r['priority']}) there: {sentence(r['within'])}"


_WRITERS: dict[str, Callable[[Data], str]] = {
    "room": _room,
    "room_floor": _room_floor,
    "replicas": _replicas,
    "gate": _gate,
    "kv_capacity": _kv_capacity,
    "kv_no_room": _kv_no_room,
    "reserve": _reserve,
    "kept_reserve": _kept_reserve,
    "hold": lambda r: "; ".join(map(hold_note, r["notes"])),
    "hold_gate": _hold_gate,
    "unbounded": _unbounded,
    "unbounded_share": _unbounded_share,
    "unbounded_beside": _unbounded_beside,
    "exclusive": lambda r: f"{r['seat']} is exclusive; card {r['card']} holds {_names(r['holds'])}",
    "beside_exclusive": lambda r: f"card {r['card']} holds exclusive {_names(r['holds'])}",
    "error": lambda r: f"card {r['card']} is in error ({escaped(r['error'])}); it takes no seat",
    "other_host": lambda r: f"{r['seat']} names host {r['seat_host']}, not {r['host']}",
    "card_count": lambda r: (
        f"{r['seat']} takes {r['cards_wanted']} card(s); {r['cards_given']} given"
    ),
    "card_twice": lambda r: f"card list {list(r['cards'])} names a card twice",
    "no_card": lambda r: f"{r['host']} has no card {r['card']}",
    "no_snapshot": lambda r: f"no snapshot of host {r['host']}",
    "unseen_host": lambda r: f"{r['seat']} names host {r['host']}; no snapshot of it was given",
    "few_cards": _few_cards,
    "alone": lambda r: (
        f"fits card {r['card']} of {r['host']} alone, but not beside the seats placed first "
        "(higher priority, or more seats placed without it)"
    ),
    "blocked": _blocked,
    "unusable": _unusable,
    **ENGINE_WRITERS,  # each engine's own refusal or spill (placement/cli/engine_text.py)
    **WINDOW_WRITERS,  # peak, restart, trend (placement/cli/window_text.py)
}


def _unchecked(r: Data) -> str:
    """What vLLM ≥ 0.34 with a util cap and no kv_cache_memory does where room refuses it."""
    squeezed = _names(r["squeezes"]) or "the card's margin"
    return (
        f"{r['unchecked']} {r['unchecked_version']} would not refuse it (no start-up check "
        f"without kv_cache_memory): it would start and take about "
        f"{b(r['unchecked_takes_bytes'])}, squeezing {squeezed}"
    )


def sentence(data: Data) -> str:
    """A reason's words from its data (its JSON form); words already written are kept."""
    said = data.get("said")
    if not said:
        return str(data.get("text") or "")
    text = _WRITERS[said](data)
    if data.get("unchecked") is not None:
        text += f"; {_unchecked(data)}"
    return text


def reason_text(reason: Reason) -> str:
    """One reason's words."""
    return reason.text or sentence(reason.to_json())


def says_figures(reason: Reason) -> bool:
    """True when a reason's words say its need, room and short themselves."""
    return reason.said in SAYS_FIGURES


def worded(reason: Reason) -> Reason:
    """The reason with its words written into `text` (for what is stored or printed as JSON)."""
    if reason.text:
        return reason
    within = worded(reason.within) if reason.within is not None else None
    return replace(reason, text=reason_text(reason), within=within)


def worded_verdict(verdict: Verdict) -> Verdict:
    """A verdict whose reasons carry their words."""
    return replace(verdict, reasons=tuple(worded(reason) for reason in verdict.reasons))


def worded_json(data: Any) -> Any:
    """JSON output with each reason's `text` written and each note turned into its words (in
    place, and returned): every mapping with a `said` and no words yet, at any depth. A note
    (a `said` without a `rule`) is replaced by its sentence, as DESIGN.md's JSON shows it."""
    if isinstance(data, dict):
        for key, value in data.items():
            data[key] = worded_json(value)
        if data.get("said") and "rule" not in data:
            return note_text(data)
        if data.get("said") and not data.get("text"):
            data["text"] = sentence(data)
    elif isinstance(data, list):
        data[:] = [worded_json(item) for item in data]
    return data
