"""`gpuplan learn SEAT --log FILE|-`: a seat's `engine.profile` from its engine's start-up log.

Prints the `profile:` block to paste under the seat's `engine:`, each figure with the line it
came from (`docker compose logs voices | gpuplan learn vllm-voices --vllm-log -`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from placement.cli.names import did_you_mean, names
from placement.cli.sources import add_catalogue_argument, load_catalogue_argument
from seats.errors import BadInputError
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
    "kv_bytes_per_token and max_model_len from config.json, weights from the safetensors headers."
)
MAX_LOG_BYTES = 64 * 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """SEAT (--vllm-log FILE|- | --config DIR) [--catalogue F] [--json]."""
    parser.add_argument("seat", metavar="SEAT", help="a seat of the catalogue")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--vllm-log", metavar="FILE", help="vLLM's start-up log, or - for stdin")
    source.add_argument(
        "--log",
        metavar="FILE",
        help="the seat's engine's start-up log, or - for stdin (SGLang, TGI, TensorRT-LLM, "
        "llama.cpp, Ollama; a vLLM seat's is read as --vllm-log)",
    )
    source.add_argument(
        "--config",
        metavar="DIR",
        help="a model folder: kv_bytes_per_token and max_model_len from its config.json, "
        "weights from its *.safetensors headers",
    )
    add_catalogue_argument(parser)
    parser.add_argument("--json", action="store_true", help="the profile and its sources as JSON")


def _read(name: str) -> tuple[list[str], str]:
    """The log's lines and the name to give in errors."""
    if name == "-":
        return sys.stdin.read(MAX_LOG_BYTES).splitlines(), "<stdin>"
    path = Path(name)
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return handle.read(MAX_LOG_BYTES).splitlines(), name
    except OSError as exc:
        raise BadInputError(f"{name}: cannot read the log: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    """Print the profile block (or its JSON); exit 2 when the log lacks a line."""
    from placement.fit.engines import util_decimal
    from placement.fit.engines.vllm_log import learn_profile, read_log

    catalogue = load_catalogue_argument(args)
    try:
        seat = catalogue.seat(args.seat)
    except KeyError:
        close = did_you_mean(args.seat, names(catalogue, "seats"))
        raise BadInputError(f"no seat {args.seat!r} in {args.catalogue}{close}") from None
    if args.config is not None:
        from placement.cli.learn_config import run_config

        return run_config(seat, Path(args.config), as_json=args.json)
    from placement.cli.learn_log import reads_own_log, run_log

    # --vllm-log is a spelling of --log (one of the two is given): the seat's engine picks the reader.
    lines, source = _read(args.log if args.log is not None else args.vllm_log)
    if reads_own_log(seat):
        return run_log(seat, lines, source, json_out=args.json)
    util = seat.engine.gpu_memory_utilization
    host = catalogue.hosts.get(seat.host) if seat.host else None
    profile = learn_profile(
        read_log(lines),
        source,
        declared_util=util_decimal(util) if util is not None else None,
        cuda_total=host.card_total_bytes if host else None,
    )
    if args.json:
        print(json.dumps(_as_json(seat.name, profile), indent=2))
    else:
        print(_as_text(seat.name, source, profile))
    return 0


def _figure(figure: Any) -> dict[str, Any] | None:
    if figure is None:
        return None
    return {
        "value": figure.value,
        "line": figure.line_no,
        "source": figure.line.strip(),
        "precision": figure.precision,
    }


def _as_json(seat: str, profile: Any) -> dict[str, Any]:
    return {
        "schema": 1,
        "seat": seat,
        "vllm_version": profile.version,
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
        "notes": list(profile.notes),
    }


def _graphs_bytes(profile: Any) -> int | None:
    """The profile's cuda_graphs: 0 from vLLM 0.21 (inside non_kv), None where the log lacks it."""
    if not profile.graphs_outside_request:
        return 0
    return profile.cuda_graphs.value if profile.cuda_graphs else None


def _graphs_line(profile: Any) -> list[str]:
    """`cuda_graphs:` for vLLM before 0.21, which captures them outside its request."""
    if not profile.graphs_outside_request:
        return []
    graphs = profile.cuda_graphs
    if graphs is None:
        return ["        cuda_graphs: unknown"]
    return [f"        cuda_graphs: {graphs.value}  # {format_bytes(graphs.value)}"]


def _source(figure: Any) -> str:
    text = figure.line.strip()
    return f"line {figure.line_no}: {text[:160]}{'…' if len(text) > 160 else ''}"


def _as_text(seat: str, source: str, profile: Any) -> str:
    """The block to paste, then each figure's source line and precision."""
    non_kv = profile.non_kv.value if profile.non_kv else "unknown"
    out = [
        f"# {seat}: from vLLM {profile.version}'s start-up log ({source})",
        "      profile:",
        f"        weights: {profile.weights.value}  # {format_bytes(profile.weights.value)}",
        f"        non_kv: {non_kv}"
        + (f"  # {format_bytes(profile.non_kv.value)}" if profile.non_kv else ""),
        *_graphs_line(profile),
        f"        kv_bytes_per_token: {profile.kv_bytes_per_token.value}",
        f"        max_model_len: {profile.max_model_len.value}",
        "sources:",
    ]
    for name in ("weights", "non_kv", "cuda_graphs", "kv", "tokens", "max_model_len"):
        figure = getattr(profile, name)
        if figure is not None:
            out.append(f"  {name}: {_source(figure)} ({figure.precision})")
    per_token = profile.kv_bytes_per_token
    out.append(f"  kv_bytes_per_token: {per_token.line} ({per_token.precision})")
    out.extend(f"note: {note}" for note in profile.notes)
    return "\n".join(out)
