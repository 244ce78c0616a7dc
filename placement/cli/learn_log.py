"""`gpuplan learn SEAT --log FILE`: the `profile:` block from an engine's own start-up log.

The seat's `engine.kind` picks the reader (SGLang, TGI, TensorRT-LLM, llama.cpp, Ollama); each
figure is printed with the line it came from, and a figure the log does not print is `unknown`
with the line that would give it. vLLM's log keeps its own reader (`--vllm-log`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from placement.fit.engines.base import Learned, LogFigure
from placement.fit.engines.registry import engine, engines
from seats.errors import BadInputError
from seats.model import Seat
from seats.units import format_bytes


def reads_own_log(seat: Seat) -> bool:
    """False only where the engine's log has its own reader (vLLM's: --vllm-log)."""
    return engine(seat.engine.kind).log_reader != "vllm-log"


def learn_from_log(seat: Seat, lines: Sequence[str], source: str) -> Learned:
    """The engine's figures; exit 2 (BadInputError) when the log holds none of its lines."""
    found = engine(seat.engine.kind)
    if found.log_reader != "learn":
        readers = ", ".join(e.title for e in engines() if e.log_reader == "learn")
        raise BadInputError(
            f"seat {seat.name!r} runs engine kind {seat.engine.kind!r}: `learn --log` reads "
            f"the start-up logs of {readers}; set the seat's engine.kind"
        )
    learned = found.learn(lines)
    figures = (learned.weights, learned.kv, learned.kv_tokens, learned.non_kv, learned.per_token)
    if all(figure is None for figure in figures):
        looked = "; ".join(learned.missing) or "its memory lines"
        raise BadInputError(
            f"{source}: no {found.title} start-up figures found (looked for: {looked})"
        )
    return learned


def _value(figure: LogFigure | None) -> int | None:
    return None if figure is None else figure.value


def profile_values(learned: Learned) -> dict[str, int | None]:
    """The profile's four figures (None where the log does not give one)."""
    return {
        "weights_bytes": _value(learned.weights),
        "non_kv_bytes": _value(learned.non_kv),
        "kv_bytes_per_token": learned.kv_bytes_per_token,
        "max_model_len": _value(learned.max_model_len),
    }


def as_text(seat: str, source: str, learned: Learned) -> str:
    """The block to paste, then each figure's source line, then what is missing."""
    values = profile_values(learned)

    def line(key: str, value: int | None, *, size: bool) -> str:
        if value is None:
            return f"        {key}: unknown"
        return f"        {key}: {value}" + (f"  # {format_bytes(value)}" if size else "")

    out = [
        f"# {seat}: from {engine(learned.kind).title}'s start-up log ({source})",
        "      profile:",
        line("weights", values["weights_bytes"], size=True),
        line("non_kv", values["non_kv_bytes"], size=True),
        line("kv_bytes_per_token", values["kv_bytes_per_token"], size=False),
        line("max_model_len", values["max_model_len"], size=False),
        "sources:",
    ]
    named = (
        ("weights", learned.weights),
        ("non_kv", learned.non_kv),
        ("kv", learned.kv),
        ("kv_tokens", learned.kv_tokens),
        ("kv_bytes_per_token", learned.per_token),
        ("max_model_len", learned.max_model_len),
        *((figure.name, figure) for figure in learned.extra),
    )
    for name, figure in named:
        if figure is not None:
            text = figure.line.strip()
            clipped = text[:160] + ("…" if len(text) > 160 else "")
            out.append(f"  {name}: {figure.value} (line {figure.line_no}: {clipped})")
    if learned.kv_bytes_per_token is not None and learned.per_token is None:
        out.append(
            "  kv_bytes_per_token: KV bytes ÷ KV tokens, rounded down (at least the true figure)"
        )
    out.extend(f"missing: {text}" for text in learned.missing)
    out.extend(f"note: {text}" for text in learned.notes)
    return "\n".join(out)


def as_json(seat: str, learned: Learned) -> dict[str, Any]:
    """The same content with raw ints."""

    def figure(value: LogFigure | None) -> dict[str, Any] | None:
        if value is None:
            return None
        return {"value": value.value, "line": value.line_no, "source": value.line.strip()}

    return {
        "schema": 1,
        "seat": seat,
        "engine": learned.kind,
        "profile": profile_values(learned),
        "sources": {
            "weights": figure(learned.weights),
            "non_kv": figure(learned.non_kv),
            "kv": figure(learned.kv),
            "kv_tokens": figure(learned.kv_tokens),
            "kv_bytes_per_token": figure(learned.per_token),
            "max_model_len": figure(learned.max_model_len),
        },
        "missing": list(learned.missing),
        "notes": list(learned.notes),
    }


def run_log(seat: Seat, lines: Sequence[str], source: str, *, json_out: bool) -> int:
    """Print the block (or its JSON) and exit 0."""
    learned = learn_from_log(seat, lines, source)
    if json_out:
        print(json.dumps(as_json(seat.name, learned), indent=2))
    else:
        print(as_text(seat.name, source, learned))
    return 0
