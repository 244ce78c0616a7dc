"""`gpuplan learn SEAT --log FILE|-`: a seat's `engine.profile` from its engine's start-up log.

Prints the `profile:` block to paste under the seat's `engine:`, each figure with the line it
came from (`docker compose logs voices | gpuplan learn vllm-voices --vllm-log -`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from placement.cli.learn_log import figure_json, figure_source, start_up_json, start_up_note
from placement.cli.learn_text import profile_block
from placement.cli.names import did_you_mean, names
from placement.cli.notes_text import note_text, note_texts
from placement.cli.sources import add_catalogue_argument, load_catalogue_argument
from placement.fit.engines.base import StartUp, StartUpMarks, last_start_up
from seats.errors import BadInputError
from seats.names import escaped
from seats.units import format_bytes

HELP = "a seat's engine.profile from its engine's start-up log"
DESCRIPTION = (
    "Read vLLM's own start-up lines (0.10 to 0.34; `docker compose logs` prefixes are fine) and "
    "print the engine.profile block to paste under the seat's engine: weights, non_kv, "
    "kv_bytes_per_token and max_model_len, each with the line it came from. vLLM prints GiB "
    "to 0.01; token counts and byte counts are exact and preferred. Exit 2 when the log lacks "
    "a line, naming the line it looked for. --log FILE reads the seat's own engine's lines "
    "(SGLang, TGI, TensorRT-LLM, llama.cpp, Ollama; a vLLM seat's as --vllm-log). "
    "--config DIR reads a model folder instead: "
    "kv_bytes_per_token and max_model_len from config.json, weights from the safetensors headers "
    "(with --log, kv_bytes_per_token from it, the rest from the log). The whole log is read, "
    "line by line; a log of several start-ups (docker compose logs after a restart) is read as "
    "its last complete one, said with the line where it begins. A figure no engine could print "
    "(negative, past the card) is exit 2; log lines are shown with control characters escaped."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """SEAT (--log FILE|- [--config DIR] | --config DIR) [--catalogue F] [--json]."""
    parser.add_argument("seat", metavar="SEAT", help="a seat of the catalogue")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--vllm-log", metavar="FILE", help="vLLM's start-up log, or - for stdin")
    source.add_argument(
        "--log",
        metavar="FILE",
        help="the seat's engine's start-up log, or - for stdin (SGLang, TGI, TensorRT-LLM, "
        "llama.cpp, Ollama; a vLLM seat's is read as --vllm-log); read whole, line by line: "
        "with several start-ups (docker compose logs after a restart), the last complete one",
    )
    parser.add_argument(
        "--config",
        metavar="DIR",
        help="a model folder: kv_bytes_per_token and max_model_len from its config.json, "
        "weights from its *.safetensors headers; with --log, kv_bytes_per_token from it and "
        "the rest from the log",
    )
    add_catalogue_argument(parser)
    parser.add_argument("--json", action="store_true", help="the profile and its sources as JSON")


def read_start_up(name: str, marks: StartUpMarks) -> tuple[StartUp, str]:
    """The log's last complete start-up (`last_start_up`), read line by line to its end, and the
    name to give in errors. No size limit: only one start-up's lines are kept, up to its ready
    line. Lines end at a newline alone (as `grep -n` counts them): a progress bar's carriage
    returns stay inside its line."""
    source = "<stdin>" if name == "-" else name
    try:
        if name == "-":
            binary = getattr(sys.stdin, "buffer", None)
            if binary is None:  # a text stream standing in for stdin
                return last_start_up(sys.stdin, marks), source
            return last_start_up(_decoded(binary), marks), source
        with Path(name).open("rb") as handle:
            return last_start_up(_decoded(handle), marks), source
    except OSError as exc:
        raise BadInputError(
            f"{escaped(source)}: cannot read the log: {exc.strerror or exc}"
        ) from None


def _decoded(handle: IO[bytes]) -> Iterator[str]:
    """Each line of a binary stream as text (bytes that are not UTF-8 replaced)."""
    for raw in handle:
        yield raw.decode("utf-8", errors="replace")


def run(args: argparse.Namespace) -> int:
    """Print the profile block (or its JSON); exit 2 when the log lacks a line."""
    from placement.fit.engines import util_decimal
    from placement.fit.engines.registry import engine

    catalogue = load_catalogue_argument(args)
    try:
        seat = catalogue.seat(args.seat)
    except KeyError:
        close = did_you_mean(args.seat, names(catalogue, "seats"))
        raise BadInputError(f"no seat {args.seat!r} in {args.catalogue}{close}") from None
    log = args.log if args.log is not None else args.vllm_log
    if log is None and args.config is None:
        raise BadInputError("learn needs --log FILE (or --vllm-log FILE), --config DIR, or both")
    if log is None:
        from placement.cli.learn_config import run_config

        return run_config(seat, Path(args.config), as_json=args.json)
    from placement.cli.learn_log import learn_from_log, reads_own_log, run_log

    per_token = _config_per_token(seat, args.config)
    host = catalogue.hosts.get(seat.host) if seat.host else None
    card_total = host.card_total_bytes if host else None
    found = engine(seat.engine.kind)
    if reads_own_log(seat):
        # Refuses an engine without a reader before reading anything.
        learn_from_log(seat, (), "", check_only=True)
    start, source = read_start_up(log, found.start_up)
    if reads_own_log(seat):
        return run_log(
            seat, start, source, json_out=args.json, per_token=per_token, card_total=card_total
        )
    # An engine with a log reader of its own (vLLM's, with each figure's precision).
    util = seat.engine.gpu_memory_utilization
    profile, log_total = found.learn_profile(
        start.lines,
        start.first_line,
        source,
        declared_util=util_decimal(util) if util is not None else None,
        cuda_total=card_total,
    )
    note = start_up_note(start, found.title)
    if note is not None:
        profile = replace(profile, notes=(note, *profile.notes))
    if per_token is not None:
        from_config = replace(
            profile.kv_bytes_per_token,
            value=per_token[0],
            line_no=0,
            line=per_token[1],
            precision="from the model's config",
            how=None,
        )
        profile = replace(profile, kv_bytes_per_token=from_config)
    _refuse_impossible(profile, log_total, source, card_total)
    if args.json:
        print(json.dumps(_as_json(seat.name, profile, start), indent=2))
    else:
        print(_as_text(seat.name, source, profile))
    return 0


def _config_per_token(seat: Any, folder: str | None) -> tuple[int, str] | None:
    """kv_bytes_per_token from a model folder's config.json (with `--log`), and its formula."""
    if folder is None:
        return None
    from placement.check.hf_model import kv_bytes_per_token
    from placement.cli.learn_config import read_config

    config = read_config(Path(folder))
    found = kv_bytes_per_token(config, str(Path(folder) / "config.json"), seat.card_count)
    return found.value, f"{found.formula} (config.json, --config)"


def _refuse_impossible(profile: Any, log_total: Any, source: str, card_total: int | None) -> None:
    """Exit 2 when a figure is negative or past the card (the host's, else the log's own)."""
    from placement.cli.learn_log import checked, refuse_impossible

    card, where = card_total, "the host's card_total"
    if card is None and log_total is not None:
        card, where = log_total.value, f"the card the log names (line {log_total.line_no})"
    figures = checked(
        (
            ("weights", profile.weights),
            ("non_kv", profile.non_kv),
            ("cuda_graphs", profile.cuda_graphs),
            ("KV cache", profile.kv),
            ("kv_bytes_per_token", profile.kv_bytes_per_token),
        )
    )
    where = f"{where} ({format_bytes(card)})" if card else ""
    refuse_impossible(figures, card, where, source, "vLLM")


def _figure(figure: Any) -> dict[str, Any] | None:
    found = figure_json(figure)
    return found and {**found, "precision": note_text(figure.precision)}


def _as_json(seat: str, profile: Any, start: StartUp) -> dict[str, Any]:
    return {
        "schema": 1,
        "seat": seat,
        "vllm_version": profile.version,
        "start_up": start_up_json(start),
        "profile": {
            "weights_bytes": profile.weights.value,
            "non_kv_bytes": profile.non_kv.value if profile.non_kv else None,
            "cuda_graphs_bytes": _graphs_bytes(profile),
            "kv_bytes_per_token": profile.kv_bytes_per_token.value,
            "max_model_len": profile.max_model_len.value,
        },
        "sources": {
            "weights": _figure(profile.weights),
            "non_kv": _figure(profile.non_kv),
            "cuda_graphs": _figure(profile.cuda_graphs),
            "kv_bytes_per_token": _figure(profile.kv_bytes_per_token),
            "max_model_len": _figure(profile.max_model_len),
            "kv_cache": _figure(profile.kv),
            "kv_tokens": _figure(profile.tokens),
        },
        "notes": note_texts(profile.notes),
    }


def _graphs_bytes(profile: Any) -> int | None:
    """The profile's cuda_graphs: 0 from vLLM 0.21 (inside non_kv), None where the log lacks it."""
    if not profile.graphs_outside_request:
        return 0
    return profile.cuda_graphs.value if profile.cuda_graphs else None


def _source(figure: Any) -> str:
    return f"line {figure.line_no}: {figure_source(figure)}"


def _as_text(seat: str, source: str, profile: Any) -> str:
    """The block to paste, then each figure's source line and precision."""
    # vLLM before 0.21 captures its CUDA graphs outside its request: they are a figure of their own.
    graphs = (
        (("cuda_graphs", _graphs_bytes(profile), True),) if profile.graphs_outside_request else ()
    )
    out = profile_block(
        f"{seat}: from vLLM {profile.version}'s start-up log ({escaped(source)})",
        (
            ("weights", profile.weights.value, True),
            ("non_kv", profile.non_kv.value if profile.non_kv else None, True),
            *graphs,
            ("kv_bytes_per_token", profile.kv_bytes_per_token.value, False),
            ("max_model_len", profile.max_model_len.value, False),
        ),
    )
    out.append("sources:")
    for name in ("weights", "non_kv", "cuda_graphs", "kv", "tokens", "max_model_len"):
        figure = getattr(profile, name)
        if figure is not None:
            out.append(f"  {name}: {_source(figure)} ({note_text(figure.precision)})")
    per_token = profile.kv_bytes_per_token
    source, precision = figure_source(per_token, None), note_text(per_token.precision)
    out.append(f"  kv_bytes_per_token: {source} ({precision})")
    out.extend(f"note: {note}" for note in note_texts(profile.notes))
    return "\n".join(out)
