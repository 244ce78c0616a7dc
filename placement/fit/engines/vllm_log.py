"""vLLM's own start-up log read back into a seat's `engine.profile` (DESIGN.md, "vLLM's second refusal").

Lines as vLLM 0.10 to 0.34 print them (read from each version's published wheel:
`gpu_model_runner.py`, `gpu_worker.py`, `kv_cache_utils.py`), behind any `docker compose logs`
or `(EngineCore_DP0 pid=…)` prefix. vLLM prints GiB rounded to 0.01 (the weights to 0.0001
in 0.10 and 0.11); token counts and "… in use is N bytes" are exact, and are preferred.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from placement.fit.engines.base import StartUpMarks, size_bytes, strip_prefix
from placement.fit.engines.note import Note, Said, note
from seats.errors import BadInputError
from seats.names import escaped
from seats.units import GiB

SUPPORTED = ((0, 10), (0, 34))
_NUMBER = r"(-?[0-9]+(?:\.[0-9]+)?)"
_COUNT = r"([0-9][0-9,]*)"
VERSION = (
    re.compile(r"vLLM (?:API )?server version v?([0-9]+)\.([0-9]+)[^\s]*"),
    re.compile(r"Initializing a V1 LLM engine \(v([0-9]+)\.([0-9]+)[^)]*\)"),
    # 0.18 on: an ASCII-art banner (`entrypoints/utils.py`), "█ ▀▄▀ █  version 0.18.0".
    re.compile(r"▀▄▀ █\s+version v?([0-9]+)\.([0-9]+)"),
)
MAX_LEN = (
    re.compile(r"max_seq_len=([0-9]+)"),
    re.compile(r"Using max model len ([0-9]+)"),
    re.compile(r"Maximum concurrency for " + _COUNT + r" tokens per request"),
    re.compile(r"non-default args: \{.*'max_model_len': ([0-9]+)"),
)
WEIGHTS = (
    re.compile(r"Model loading took " + _NUMBER + r" GiB"),
    re.compile(r"Actual usage is " + _NUMBER + r" GiB for weight"),
)
KV_EXACT = (
    re.compile(r"Current kv cache memory in use is ([0-9]+) bytes"),
    re.compile(r"kv_cache_memory_bytes=([0-9]+) \("),
)
KV_GIB = (
    re.compile(r"Available KV cache memory: " + _NUMBER + r" ?GiB"),
    re.compile(r"reserved " + _NUMBER + r" ?GiB memory for KV Cache"),
)
TOKENS = re.compile(r"KV cache size: " + _COUNT + r" tokens")
UTIL = (
    re.compile(r"Desired GPU memory utilization is \(" + _NUMBER),
    re.compile(r"'gpu_memory_utilization': " + _NUMBER),
)
TOTAL = re.compile(r"Free memory on device \(" + _NUMBER + r"/" + _NUMBER + r" GiB\)")
NON_KV_SPLIT = re.compile(
    r"GiB for weight, " + _NUMBER + r" GiB for peak activation, " + _NUMBER
    + r" GiB for non-torch memory, and " + _NUMBER + r" GiB for CUDAGraph memory"
)  # fmt: skip
NON_KV_034 = re.compile(
    r"Actual usage is " + _NUMBER + r" GiB for consumed memory \(weights \+ non-torch\), "
    + _NUMBER + r" GiB for peak activation, and " + _NUMBER + r" GiB for CUDAGraph memory"
)  # fmt: skip
# gpu_model_runner.py's capture_model, every version read: the free memory the graphs took.
GRAPHS_CAPTURED = re.compile(
    r"Graph capturing finished in [0-9.]+ secs?, took " + _NUMBER + r" ?GiB"
)
# A start-up that failed (DESIGN.md: its figures describe no seat that ran): vLLM's own lines
# (v1/engine/core.py "EngineCore failed to start.", v1/engine/utils.py "Engine core initialization
# failed", v1/executor/multiproc_executor.py "WorkerProc hit an exception."), a Python traceback, a
# CUDA OOM, or its KV capacity refusal. Only before the server says it is up: a traceback after
# "Application startup complete." is a later crash, not a failed start.
FAILED = (
    re.compile(r"EngineCore failed to start"),
    re.compile(r"Engine core initialization failed"),
    re.compile(r"WorkerProc hit an exception"),
    re.compile(r"Traceback \(most recent call last\)"),
    re.compile(r"CUDA out of memory|OutOfMemoryError|HIP out of memory"),
    re.compile(
        r"larger than the (?:maximum number of tokens that can be stored in|available) KV cache"
    ),
)
_FIGURES = (
    *MAX_LEN, *WEIGHTS, *KV_EXACT, *KV_GIB, TOKENS, *UTIL, TOTAL, NON_KV_SPLIT, NON_KV_034,
    GRAPHS_CAPTURED,
)  # fmt: skip
STARTED = re.compile(r"Application startup complete|Starting vLLM API server|Uvicorn running on")
# Where one start-up begins (the API server's version line or banner, or its "non-default args",
# each printed once before any figure) and where its figures are all out: the engine core's "init
# engine (profile, create kv cache, warmup model) took N seconds" (v1/engine/core.py, after its KV
# cache and CUDA graphs), or the server saying it is up. Its memory lines are its figures.
MARKS = StartUpMarks(
    begins=(VERSION[0], VERSION[2], re.compile(r"non-default args: \{")),
    ready=(STARTED, re.compile(r"init engine \(profile, create kv cache, warmup model\) took")),
    figures=(*WEIGHTS, *KV_EXACT, *KV_GIB, TOKENS, NON_KV_SPLIT, NON_KV_034, GRAPHS_CAPTURED),
    failed=FAILED,
)
# From 0.21 vLLM counts CUDA graphs inside its request ("CUDA graph memory profiling is enabled
# (default since v0.21.0)", 0.25.1's log); before, it captures them after sizing the KV cache, beyond
# the request: 0.10.2's log (tests/placement/data/vllm-logs) asks 12.79 GiB = 4.15 weights + 2.65
# activation + 0.02 non-torch + 5.97 KV, and its 4.06 GiB of CUDA graphs come on top.
GRAPHS_IN_REQUEST = (0, 21)


@dataclass(frozen=True)
class Figure:
    """One figure of a profile, with the log line it came from and how exact it is: "exact",
    the unit it was printed to ("0.01 GiB"), or a note. A figure worked out from others has no
    line of its own: `how` says how (a note; the words are written at the edge)."""

    value: int
    line_no: int
    line: str
    precision: Said
    how: Note | None = None


@dataclass
class LogFigures:
    """What one start-up log says; None where it says nothing."""

    version: tuple[int, int] | None = None
    version_line: str = ""
    max_model_len: Figure | None = None
    weights: Figure | None = None
    kv: Figure | None = None
    tokens: Figure | None = None
    util: Decimal | None = None
    total: Figure | None = None
    non_kv: Figure | None = None
    # CUDA graphs (inside non_kv from 0.21): the line that splits the request, else the largest
    # "Graph capturing finished … took X GiB" across ranks.
    graphs_split: Figure | None = None
    graphs: Figure | None = None
    notes: list[Said] = field(default_factory=list)
    # The first line saying the start-up failed (before the server said it was up), if any.
    failed: Figure | None = None
    started: bool = False

    # The last line that printed a figure: where the figures stop.
    last_figure_line: int | None = None


def clean(line: str) -> str:
    """The line without a `docker compose logs` prefix or its line ending."""
    return strip_prefix(line.rstrip("\r\n"))


def _precision(text: str) -> str:
    """The rounding of a printed GiB figure: its last decimal place, and never coarser than 0.01.

    From 0.14 vLLM prints GiB as `str(round(x, 2))`, which drops trailing zeros: "6.9" is 6.90.
    """
    decimals = max(len(text.partition(".")[2]), 2)
    return f"{Decimal(1).scaleb(-decimals)} GiB"


def _first(patterns: Iterable[re.Pattern[str]], line: str) -> re.Match[str] | None:
    for pattern in patterns:
        found = pattern.search(line)
        if found is not None:
            return found
    return None


def read_log(lines: Iterable[str], first_line: int = 1) -> LogFigures:
    """Every figure the log prints, the first of each kind (the smallest KV cache across ranks).

    `lines` are one start-up (`base.last_start_up` with MARKS picks it from a longer log), the
    first numbered `first_line` in the whole log."""
    out = LogFigures()
    for number, raw in enumerate(lines, start=first_line):
        line = clean(raw)
        _read_line(out, number, line)
        if any(pattern.search(line) for pattern in _FIGURES):
            out.last_figure_line = number
        if out.started or out.failed is not None:
            continue
        if STARTED.search(line):
            out.started = True
        elif _first(FAILED, line) is not None:
            out.failed = Figure(0, number, line, "exact")
    return out


def _read_line(out: LogFigures, number: int, line: str) -> None:
    """One line's figures into `out`."""
    version = _first(VERSION, line)
    if version is not None and out.version is None:
        out.version = (int(version.group(1)), int(version.group(2)))
        out.version_line = line
    found = _first(MAX_LEN, line)
    if found is not None and out.max_model_len is None:
        out.max_model_len = Figure(int(found.group(1).replace(",", "")), number, line, "exact")
    found = _first(WEIGHTS, line)
    if found is not None and out.weights is None:
        out.weights = Figure(
            size_bytes(found.group(1), "GiB"), number, line, _precision(found.group(1))
        )
    _read_kv(out, number, line)
    found = TOKENS.search(line)
    if found is not None:
        tokens = int(found.group(1).replace(",", ""))
        if out.tokens is None or tokens < out.tokens.value:
            out.tokens = Figure(tokens, number, line, "exact")
    found = _first(UTIL, line)
    if found is not None and out.util is None:
        out.util = Decimal(found.group(1))
    found = TOTAL.search(line)
    if found is not None and out.total is None:
        out.total = Figure(
            size_bytes(found.group(2), "GiB"), number, line, _precision(found.group(2))
        )
    _read_non_kv(out, number, line)
    _read_graphs(out, number, line)


def _read_kv(out: LogFigures, number: int, line: str) -> None:
    """The KV cache bytes: an exact count where the log has one, else the smallest GiB figure."""
    exact = _first(KV_EXACT, line)
    if exact is not None:
        value = int(exact.group(1))
        if out.kv is None or out.kv.precision != "exact" or value < out.kv.value:
            out.kv = Figure(value, number, line, "exact")
        return
    found = _first(KV_GIB, line)
    if found is None or (out.kv is not None and out.kv.precision == "exact"):
        return
    value = size_bytes(found.group(1), "GiB")
    if out.kv is None or value < out.kv.value:
        out.kv = Figure(value, number, line, _precision(found.group(1)))


def _read_non_kv(out: LogFigures, number: int, line: str) -> None:
    """Activation peak + non-torch (+ CUDA graphs from 0.21), where a line splits the request."""
    if out.non_kv is not None:
        return
    found = NON_KV_SPLIT.search(line)
    if found is not None:
        peak, non_torch, graphs = (Decimal(found.group(i)) for i in (1, 2, 3))
        if out.version is None or out.version >= GRAPHS_IN_REQUEST:
            summed = int((peak + non_torch + graphs) * GiB)
            out.non_kv = Figure(summed, number, line, note("summed", figures=3, unit="0.01 GiB"))
            return
        summed = int((peak + non_torch) * GiB)
        out.non_kv = Figure(summed, number, line, note("summed", figures=2, unit="0.01 GiB"))
        out.graphs_split = _graphs_figure(found.group(3), number, line, split=True)
        return
    found = NON_KV_034.search(line)
    if found is not None and out.weights is not None:
        consumed, peak, graphs = (Decimal(found.group(i)) for i in (1, 2, 3))
        value = int((consumed + peak + graphs) * GiB) - out.weights.value
        out.non_kv = Figure(
            value, number, line, note("summed", figures=3, unit="0.01 GiB", less="weights")
        )


def _graphs_figure(text: str, number: int, line: str, *, split: bool = False) -> Figure:
    """A printed CUDA graph figure; a negative one (free memory grew while capturing) counts as 0.
    `split`: printed in the line that splits the request (its words are quoted beside it)."""
    value = size_bytes(text, "GiB")
    said = note("graphs", printed=text, unit=_precision(text), split=split, counted=value >= 0)
    return Figure(max(value, 0), number, line, said)


def _read_graphs(out: LogFigures, number: int, line: str) -> None:
    """The CUDA graphs one rank's capture took: the largest across ranks is kept."""
    found = GRAPHS_CAPTURED.search(line)
    if found is None:
        return
    figure = _graphs_figure(found.group(1), number, line)
    if out.graphs is None or figure.value > out.graphs.value:
        out.graphs = figure


@dataclass(frozen=True)
class LearntProfile:
    """The profile block `learn` prints: each figure with its source, None where unknown."""

    version: str
    weights: Figure
    non_kv: Figure | None
    kv_bytes_per_token: Figure
    max_model_len: Figure
    kv: Figure
    tokens: Figure
    notes: tuple[Said, ...]
    # Before 0.21 the graphs lie outside the request: the profile's cuda_graphs (None: unknown).
    graphs_outside_request: bool = False
    cuda_graphs: Figure | None = None


_LOOKED_FOR = {
    "weights": "'Model loading took X GiB'",
    "kv": "'Available KV cache memory: X GiB' (or '… in use is N bytes')",
    "tokens": "'GPU KV cache size: N tokens'",
    "max_model_len": "'max_seq_len=N' (or 'Maximum concurrency for N tokens per request')",
}


def learn_profile(
    figures: LogFigures, source: str, *, declared_util: Decimal | None, cuda_total: int | None
) -> LearntProfile:
    """The profile a log gives, or BadInputError naming the file and the line it looked for.

    `declared_util` and `cuda_total` (the seat's and its host's) give `non_kv` where the log
    prints no split of the request: non_kv = ceil(util × total) − weights − KV bytes.
    """
    _refuse_failed(figures, source)
    if figures.version is not None and not SUPPORTED[0] <= figures.version <= SUPPORTED[1]:
        major, minor = figures.version
        raise BadInputError(
            f"{source}: vLLM {major}.{minor} is outside the versions read (0.10 to 0.34): "
            f"{escaped(figures.version_line.strip()[:200])}"
        )
    for name, looked in _LOOKED_FOR.items():
        if getattr(figures, name) is None:
            raise BadInputError(
                f"{source}: no vLLM start-up line {looked}; is it vLLM 0.10 to 0.34?"
            )
    weights, kv, tokens, length = figures.weights, figures.kv, figures.tokens, figures.max_model_len
    assert weights is not None and kv is not None and tokens is not None and length is not None
    if tokens.value < 1:
        raise BadInputError(f"{source}: line {tokens.line_no}: the KV cache holds no token")
    notes = list(figures.notes)
    per_token = Figure(
        kv.value // tokens.value,
        kv.line_no,
        "",
        _per_token_precision(kv, tokens.value),
        how=note(
            "kv_over_tokens",
            kv_bytes=kv.value,
            tokens=tokens.value,
            lines=(kv.line_no, tokens.line_no),
        ),
    )
    non_kv = figures.non_kv or _non_kv_from_request(figures, declared_util, cuda_total, notes)
    version = ".".join(str(part) for part in figures.version) if figures.version else "unknown"
    outside = figures.version is not None and figures.version < GRAPHS_IN_REQUEST
    graphs = figures.graphs_split or figures.graphs
    notes.extend(_graphs_notes(graphs) if outside else [])
    return LearntProfile(
        version,
        weights,
        non_kv,
        per_token,
        length,
        kv,
        tokens,
        tuple(notes),
        graphs_outside_request=outside,
        cuda_graphs=graphs if outside else None,
    )


def _refuse_failed(figures: LogFigures, source: str) -> None:
    """A start-up that failed: exit 2 naming the line, and where the figures stop."""
    failed = figures.failed
    if failed is None:
        return
    last = figures.last_figure_line
    raise BadInputError(
        f"{source}: line {failed.line_no}: vLLM's start-up failed here "
        f"({escaped(failed.line.strip()[:200])}); "
        + (
            f"its figures stop at line {last}, before it"
            if last is not None and last < failed.line_no
            else f"its figures run on to line {last}"
            if last is not None
            else "no figure was printed before it"
        )
        + ", and they describe no seat that ran: learn from the log of a start that reached "
        "'Application startup complete.'"
    )


def _graphs_notes(graphs: Figure | None) -> list[Said]:
    """What `cuda_graphs` means before vLLM 0.21, or why it is unknown."""
    if graphs is None:
        return [note("graphs_unknown")]
    if not graphs.value:
        return []
    return [note("graphs_outside", graphs_bytes=graphs.value, line=graphs.line_no)]


def _per_token_precision(kv: Figure, tokens: int) -> Note:
    """How far floor(KV bytes / tokens) may be from the true bytes per token.

    With exact KV bytes it is an upper bound (tokens are whole blocks, so the KV bytes hold a part
    of a block more). With KV bytes printed to 0.01 GiB it may fall on either side: half a
    hundredth of a GiB over the tokens (0.15's 64.73 GiB ÷ 530,288 tokens is 131,067, 5 B under
    Llama-3-8B's 131,072).
    """
    if kv.precision == "exact":
        return note("per_token_bound")
    assert isinstance(kv.precision, str)  # a KV figure's precision is the unit it was printed to
    half_unit = Decimal(kv.precision.split()[0]) * GiB / 2
    return note("per_token_within", slack_bytes=math.ceil(half_unit / tokens), unit=kv.precision)


def _non_kv_from_request(
    figures: LogFigures, declared: Decimal | None, cuda_total: int | None, notes: list[Said]
) -> Figure | None:
    """non_kv = ceil(util × total) − weights − KV bytes, from the log's util and total or the seat's."""
    weights, kv = figures.weights, figures.kv
    assert weights is not None and kv is not None
    util = figures.util if figures.util is not None else declared
    total = figures.total.value if figures.total is not None else cuda_total
    if util is None or total is None:
        notes.append(note("non_kv_unknown"))
        return None
    product = util * total
    requested = math.ceil(product)  # Decimal's // truncates toward zero: no -(-x // 1) here
    if requested - weights.value - kv.value < 0:
        notes.append(note("non_kv_below", util=str(util), total_bytes=total))
        return None
    return Figure(
        requested - weights.value - kv.value,
        weights.line_no,
        "",
        note("as_its_terms"),
        how=note(
            "request_less",
            util=str(util),
            total_bytes=total,
            total_from="log" if figures.total is not None else "host",
        ),
    )
