"""`gpuplan learn SEAT --log FILE`: the `profile:` block from an engine's own start-up log.

The seat's `engine.kind` picks the reader (SGLang, TGI, TensorRT-LLM, llama.cpp, Ollama); each
figure is printed with the line it came from, and a figure the log does not print is `unknown`
with the line that would give it. vLLM's log keeps its own reader (`--vllm-log`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from placement.cli.learn_text import profile_block, shown_line
from placement.cli.notes_text import note_text, note_texts
from placement.fit.engines.base import Learned, LogFigure, StartUp
from placement.fit.engines.registry import engine, engines
from seats.errors import BadInputError
from seats.model import Seat
from seats.names import escaped
from seats.units import format_bytes


def reads_own_log(seat: Seat) -> bool:
    """False only where the engine's log has its own reader (vLLM's: --vllm-log)."""
    return engine(seat.engine.kind).log_reader != "vllm-log"


def learn_from_log(
    seat: Seat,
    lines: Sequence[str],
    source: str,
    first_line: int = 1,
    *,
    check_only: bool = False,
) -> Learned:
    """The engine's figures; exit 2 (BadInputError) when the log holds none of its lines.

    `check_only`: only refuse an engine without a log reader (before the log is read)."""
    found = engine(seat.engine.kind)
    if found.log_reader != "learn":
        readers = ", ".join(e.title for e in engines() if e.log_reader == "learn")
        raise BadInputError(
            f"seat {seat.name!r} runs engine kind {seat.engine.kind!r}: `learn --log` reads "
            f"the start-up logs of {readers}; set the seat's engine.kind"
        )
    if check_only:
        return Learned(found.kind)
    learned = found.learn(lines, first_line)
    figures = (learned.weights, learned.kv, learned.kv_tokens, learned.non_kv, learned.per_token)
    if all(figure is None for figure in figures):
        looked = "; ".join(learned.missing) or "its memory lines"
        raise BadInputError(
            f"{escaped(source)}: no {found.title} start-up figures found (looked for: {looked})"
        )
    return learned


def figure_source(figure: Any, width: int | None = 160) -> str:
    """Where a figure came from: the log line it was read from, or how it was worked out."""
    return note_text(figure.how) if figure.how is not None else shown_line(figure.line, width)


def figure_json(figure: Any) -> dict[str, Any] | None:
    """A figure's value, line (None where worked out) and source, as `--json` gives them."""
    if figure is None:
        return None
    return {
        "value": figure.value,
        "line": figure.line_no or None,
        "source": figure_source(figure, None),
    }


def start_up_json(start: StartUp) -> dict[str, Any]:
    """Which start-up of the log was read, for `--json`."""
    return {
        "line": start.first_line,
        "start_ups": start.count,
        "complete": start.complete,
        "lines_read": start.log_lines,
    }


def start_up_note(start: StartUp, title: str) -> str | None:
    """What was read, where the log holds more than one start-up; None where it holds one."""
    if start.count <= 1:
        return None
    said = (
        f"the log holds {start.count} start-ups of {title}: read the last complete one, "
        f"from line {start.first_line}"
        if start.complete
        else f"the log holds {start.count} start-ups of {title} and none reached its ready "
        f"line: read the last that printed a figure, from line {start.first_line}"
    )
    if start.later is not None:
        said += f" (the one from line {start.later} did not reach its ready line)"
    return said + "; no figure of another start-up is used"


# No card holds a terabyte: the bound for a figure where neither the host nor the log gives the
# card's size (the largest cards today hold 288 GB).
MAX_CARD_BYTES = 2**40

# One figure `learn` would print: its name, bytes and the line it came from (0 where derived).
Checked = tuple[str, int, int]


def refuse_impossible(
    figures: Iterable[Checked], card_bytes: int | None, card: str, source: str, title: str
) -> None:
    """Exit 2 when a figure could not have been printed by an engine that ran: negative, or past
    the card's size (`card_bytes`, described by `card`; MAX_CARD_BYTES where none is known)."""
    limit = card_bytes if card_bytes is not None else MAX_CARD_BYTES
    where = card if card_bytes is not None else f"any card ({format_bytes(MAX_CARD_BYTES)})"
    for name, value, line_no in figures:
        at = f"line {line_no}: " if line_no else ""
        if 0 <= value <= limit:
            continue
        raise BadInputError(
            f"{escaped(source)}: {at}{name} is {value:,} B"
            + (", below zero" if value < 0 else f" ({format_bytes(value)}), past {where}")
            + f": no {title} start-up prints that; is this the seat's own log?"
        )


def checked(named: Iterable[tuple[str, Any]]) -> list[Checked]:
    """(name, bytes, line) of each figure given (a LogFigure or vLLM's Figure), None left out."""
    return [(name, f.value, f.line_no) for name, f in named if f is not None]


def refuse_learned(learned: Learned, source: str, title: str, card_total: int | None) -> None:
    """Exit 2 when a byte figure is negative or past the card (the host's card_total)."""
    figures = checked(
        (
            ("weights", learned.weights),
            ("non_kv", learned.non_kv),
            ("KV cache", learned.kv),
            ("kv_bytes_per_token", learned.per_token),
        )
    )
    if learned.per_token is None and learned.kv_bytes_per_token is not None:
        figures.append(("kv_bytes_per_token", learned.kv_bytes_per_token, 0))
    where = f"the host's card_total ({format_bytes(card_total)})" if card_total else ""
    refuse_impossible(figures, card_total, where, source, title)


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
    out = profile_block(
        f"{seat}: from {engine(learned.kind).title}'s start-up log ({escaped(source)})",
        (
            ("weights", values["weights_bytes"], True),
            ("non_kv", values["non_kv_bytes"], True),
            ("kv_bytes_per_token", values["kv_bytes_per_token"], False),
            ("max_model_len", values["max_model_len"], False),
        ),
    )
    out.append("sources:")
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
        if figure is None:
            continue
        # A figure worked out from lines says which lines in its words: not twice.
        at = f"line {figure.line_no}: " if figure.line_no and figure.how is None else ""
        out.append(f"  {name}: {figure.value} ({at}{figure_source(figure)})")
    if learned.kv_bytes_per_token is not None and learned.per_token is None:
        out.append(
            "  kv_bytes_per_token: KV bytes ÷ KV tokens, rounded down (at least the true figure)"
        )
    out.extend(f"missing: {text}" for text in learned.missing)
    out.extend(f"note: {text}" for text in note_texts(learned.notes))
    return "\n".join(out)


def as_json(seat: str, learned: Learned, start: StartUp | None = None) -> dict[str, Any]:
    """The same content with raw ints (log lines escaped, as in the text)."""

    return {
        "schema": 1,
        "seat": seat,
        "engine": learned.kind,
        **({"start_up": start_up_json(start)} if start is not None else {}),
        "profile": profile_values(learned),
        "sources": {
            "weights": figure_json(learned.weights),
            "non_kv": figure_json(learned.non_kv),
            "kv": figure_json(learned.kv),
            "kv_tokens": figure_json(learned.kv_tokens),
            "kv_bytes_per_token": figure_json(learned.per_token),
            "max_model_len": figure_json(learned.max_model_len),
        },
        "missing": list(learned.missing),
        "notes": note_texts(learned.notes),
    }


def run_log(
    seat: Seat,
    start: StartUp,
    source: str,
    *,
    json_out: bool,
    per_token: tuple[int, str] | None = None,
    card_total: int | None = None,
) -> int:
    """Print the block (or its JSON) and exit 0; `per_token` (bytes, formula) from `--config`."""
    learned = learn_from_log(seat, start.lines, source, start.first_line)
    title = engine(learned.kind).title
    note = start_up_note(start, title)
    if note is not None:
        learned = replace(learned, notes=(note, *learned.notes))
    if per_token is not None:
        learned = replace(
            learned, per_token=LogFigure("kv_bytes_per_token", per_token[0], 0, per_token[1])
        )
    refuse_learned(learned, source, title, card_total)
    if json_out:
        print(json.dumps(as_json(seat.name, learned, start), indent=2))
    else:
        print(as_text(seat.name, source, learned))
    return 0
