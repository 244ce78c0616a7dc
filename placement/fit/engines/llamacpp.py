"""llama.cpp's `llama-server`: fits itself to free memory, or takes what `-ngl` gives it.

Read in ggml-org/llama.cpp at 0c1e57098 (the tree llama-cpp-python 0.3.36 vendors):

- `--fit` is on by default (common/common.h:478), leaving a margin of 1024 MiB per card
  (`fit_params_target`, common/common.h:483; `-fitt`, common/arg.cpp:2896) and lowering the
  context to no less than 4096 (common/common.h:480). With projected use P of the model,
  KV cache and compute buffers on the card and F its free memory: P ≤ F − margin changes nothing
  (common/fit.cpp:353-355); else an unset context is lowered first (:393-430; a `-c` set by the
  user is kept, :455), then layers move to the CPU until P ≤ F − margin (targets at :650).
  It never refuses for memory: what does not fit runs on the CPU (rule `spill`, with the bytes
  that leave the card: P − (F − margin)).
- `-ngl N` set by the user stops the fitting ("n_gpu_layers already set by user", :463-464):
  the layers it names go on the card whatever is free, and a load that does not fit fails with
  a CUDA allocation error — a fixed engine, judged by room.
- `--fit off` (common/arg.cpp:2868-2880) with `-ngl` and `-c` is its byte pin.
- KV = `-c` × per-token bytes, split over `-np` slots (n_ctx_seq = n_ctx / n_seq_max,
  src/llama-context.cpp:293-296): one request holds at most n_ctx_seq tokens (rule `kv_capacity`).
- Start-up lines (learn): "offloaded N/M layers to GPU" (src/llama-model.cpp:1924),
  "CUDA0 model buffer size = X MiB" (:1930), "CUDA0 KV buffer size = Y MiB"
  (src/llama-kv-cache.cpp:291), "CUDA0 compute buffer size = Z MiB" (src/llama-context.cpp:740),
  "n_ctx = N" and "n_ctx_seq = N" (src/llama-context.cpp:309-310).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from placement.fit.engines.base import (
    Behaviour,
    EngineCard,
    Learned,
    LogFigure,
    LogScan,
    NoRequest,
    Refusal,
    StartUpMarks,
    WholeNames,
    argv_mentions,
    as_int,
    fitted_need,
    image_matches,
    room_tokens,
    short_context,
    size_bytes,
    spill,
)
from placement.fit.engines.note import Said, note
from seats.model import Engine as EngineSpec
from seats.model import Seat
from seats.units import MiB

FIT_MARGIN_BYTES = 1024 * MiB
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_MODEL = re.compile(r"\b(CUDA\d+)(?: model)? buffer size =\s*([\d.]+) MiB")
_KV = re.compile(r"\b(CUDA\d+) KV buffer size =\s*([\d.]+) MiB")
_KV_SIZE = re.compile(r"llama_kv_cache\w*: size =\s*([\d.]+) MiB \(\s*(\d+) cells")
_COMPUTE = re.compile(r"\b(CUDA\d+) compute buffer size =\s*([\d.]+) MiB")
# The line each buffer's bytes on the first card come from, as the log prints it.
_CUDA0_LINE = {
    "model": "CUDA0 model buffer size = … MiB",
    "kv": "CUDA0 KV buffer size = … MiB",
    "compute": "CUDA0 compute buffer size = … MiB",
}
_N_CTX = re.compile(r"\bn_ctx\s*=\s*(\d+)")
_N_CTX_SEQ = re.compile(r"\bn_ctx_(?:seq|per_seq)\s*=\s*(\d+)")
_OFF = ("off", "false", "0", "no", "disabled")
# llama-server's own parser (common/arg.cpp, `common_params_parse_ex`): a word starting `--` has
# its `_` turned into `-`, then must be a whole option name ("error: invalid argument: …"
# otherwise); its value is the next word (no `--name=value`); the last of a repeated one wins.
PARSER = WholeNames(
    "llama.cpp's llama-server",
    (
        ("-ngl", "--gpu-layers", "--n-gpu-layers"),
        ("-c", "--ctx-size"),
        ("-fit", "--fit"),
        ("-np", "--parallel"),
    ),
    underscores=True,
    equals=False,
)
# One start-up: its build line or CUDA probe (before any buffer) to "main: model loaded" (older
# builds say "HTTP server is listening" before they load: not a ready line).
MARKS = StartUpMarks(
    # Not anchored: Docker Desktop puts its own timestamp before each line.
    begins=(
        re.compile(r"\b(?:main: )?build(?::| =) \d+ \("),
        re.compile(r"\bggml_cuda_init: found \d+ \w+ devices"),
    ),
    ready=(re.compile(r"\bmain: model loaded\b"),),
    figures=(_OFFLOADED, _MODEL, _KV, _KV_SIZE, _COMPUTE),
    failed=(re.compile(r"failed to load model|error loading model"),),
)


def fit_on(spec: EngineSpec) -> bool:
    """--fit is on unless turned off, and -ngl set by the user stops it."""
    return spec.n_gpu_layers is None and spec.fit is not False


class LlamaCpp(NoRequest):
    """ggml-org llama.cpp's `llama-server`."""

    kind = "llamacpp"
    title = "llama.cpp"
    log_reader = "learn"
    start_up = MARKS
    commands = ("llama-server",)
    images = ("ggml-org/llama.cpp", "ggerganov/llama.cpp")
    # ghcr.io/ggml-org/llama.cpp tags each build `server-b6123`, `server-cuda-b6123`,
    # `full-cuda-b5627`: the variant, then the build number its releases are named by;
    # `server-cuda`, `full-cuda`, `light` alone follow the newest build and name none.
    version_tag = re.compile(r"(?:[a-z0-9]+-)*(?P<version>b\d+)")
    margin_bytes = FIT_MARGIN_BYTES

    def behaviour(self, spec: EngineSpec) -> Behaviour:
        """Self-fitting with --fit (its default); fixed once -ngl is given or --fit is off."""
        return "self-fitting" if fit_on(spec) else "fixed"

    def recognise(self, argv: Sequence[str], image: str | None = None) -> bool:
        """`llama-server` (any path), or a llama.cpp server image."""
        if argv_mentions(argv, "llama-server"):
            return True
        # The :server images run llama-server; the :full ones do with `--server`; a pinned
        # digest says no tag, but only the server takes --port.
        if not image_matches(image, self.images):
            return False
        return "server" in (image or "") or any(w in argv for w in ("--server", "--port"))

    parser = PARSER

    def read_flags(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> dict[str, object]:
        """-ngl, -c, --fit, -np (else their LLAMA_ARG_* variables: the command line wins), read
        by whole names as llama-server reads them; FlagError for a spelling it stops at."""
        env = env or {}
        given = PARSER.values(argv)

        def text(flag: str, variable: str) -> str | None:
            return given[flag][0] if flag in given else env.get(variable)

        found: dict[str, object] = {}
        layers_text = text("-ngl", "LLAMA_ARG_N_GPU_LAYERS")
        layers = as_int(layers_text)
        if layers is not None and layers >= 0:
            found["n_gpu_layers"] = layers
        elif layers_text == "all":
            found["n_gpu_layers"] = 999
        ctx = as_int(text("-c", "LLAMA_ARG_CTX_SIZE"))
        if ctx is not None and ctx >= 0:
            found["ctx_size"] = ctx
        fit = text("-fit", "LLAMA_ARG_FIT")
        if fit is not None:
            found["fit"] = fit.strip().lower() not in _OFF
        slots = as_int(text("-np", "LLAMA_ARG_N_PARALLEL"))
        if slots is not None and slots >= 1:
            found["parallel"] = slots
        return found

    def room_bytes(self, seat: Seat, card: EngineCard) -> int:
        """What --fit lets it project on the card: free (after its context) − 1024 MiB."""
        return max(0, card.engine_free_bytes - self.margin_bytes)

    def need_bytes(self, seat: Seat, card: EngineCard) -> int:
        """Its resident; self-fitting, at most what the card lets it project (plus context)."""
        if not fit_on(seat.engine):
            return seat.resident_bytes
        return fitted_need(seat, card, self.room_bytes(seat, card))

    def gate(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """Rule `spill` when --fit must move part of it off the card; it never refuses."""
        if not fit_on(seat.engine):
            return None
        return spill(
            seat,
            card,
            self.room_bytes(seat, card),
            "llamacpp_spill",
            margin_bytes=self.margin_bytes,
        )

    def slot_tokens(self, seat: Seat) -> int | None:
        """n_ctx_seq: -c ÷ -np (None where -c is not given)."""
        ctx = seat.engine.ctx_size
        if ctx is None or ctx == 0:
            return None
        return ctx // (seat.engine.parallel or 1)

    def kv_tokens(self, seat: Seat, card: EngineCard) -> int | None:
        """Tokens its KV cache holds: -c (None where it is left to --fit or the model)."""
        ctx = seat.engine.ctx_size
        return ctx if ctx else None

    def kv_capacity(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """A slot (-c ÷ -np) shorter than the profile's length: requests are cut to it."""
        profile = seat.engine.profile
        return short_context(
            seat,
            self.slot_tokens(seat),
            profile.max_model_len if profile else None,
            "llamacpp_kv",
        )

    def pinned(self, spec: EngineSpec) -> bool:
        """-ngl set, or --fit off: its layers are fixed."""
        return not fit_on(spec)

    def pin_flags(self, seat: Seat, card: EngineCard) -> tuple[str, ...]:
        """-ngl (all, or as declared), -c (as declared, else from the resident's KV room), --fit off."""
        profile = seat.engine.profile
        ctx = room_tokens(seat, card)
        layers = seat.engine.n_gpu_layers
        flags = ["-ngl", str(layers if layers is not None else 999)]
        if seat.engine.ctx_size is not None:  # its own, as it is judged
            flags += ["-c", str(seat.engine.ctx_size)]
        elif profile is not None and ctx is not None:
            wanted = profile.max_model_len * (seat.engine.parallel or 1)
            flags += ["-c", str(min(ctx, wanted))]
        return (*flags, "--fit", "off")

    def learn(self, lines: Sequence[str], first_line: int = 1) -> Learned:
        """Model, KV and compute buffers on the first CUDA card, n_ctx and layers offloaded."""
        return read_ggml_log(self.kind, lines, first_line)

    def pin_hint(self) -> str:
        """The flags that fix its bytes, by name."""
        return "-ngl, -c and --fit off"


def read_ggml_log(kind: str, lines: Sequence[str], first_line: int = 1) -> Learned:
    """The figures llama.cpp prints as it loads (Ollama's runner prints the same lines).

    Bytes are those on the first CUDA card; a model or KV cache the log shows only on the CPU
    (`offloaded 0/N layers`, `CPU KV buffer`) is 0 bytes on the card, said in a note.
    """
    scan = LogScan.of(
        lines,
        {
            "offloaded": _OFFLOADED,
            "model": _MODEL,
            "kv": _KV,
            "kv_size": _KV_SIZE,
            "compute": _COMPUTE,
            "n_ctx": _N_CTX,
            "n_ctx_seq": _N_CTX_SEQ,
        },
        first_line=first_line,
    )
    missing: list[str] = []
    notes: list[Said] = [note("printed_mib")]
    layers_done = scan.group("offloaded", 1)

    def on_card(name: str, what: str) -> LogFigure | None:
        found = scan.size(name, "MiB", 2)
        if found is not None:
            return found
        if layers_done == "0" and name in ("model", "kv"):
            notes.append(note("offloaded_none", what=what))
            return scan.figure("offloaded", 0)
        missing.append(_CUDA0_LINE[name])
        return None

    weights, kv, compute = (
        on_card("model", "model"),
        on_card("kv", "KV"),
        on_card("compute", "compute"),
    )
    tokens = scan.number("n_ctx")
    if tokens is None:
        missing.append("n_ctx = N")
    length = scan.number("n_ctx_seq")
    per_token: LogFigure | None = None
    if scan.group("kv_size") is not None:
        size = size_bytes(scan.group("kv_size") or "0", "MiB")
        cells = int(scan.group("kv_size", 2) or 0)
        if cells > 0:
            per_token = scan.figure("kv_size", -(-size // cells))
    extra: tuple[LogFigure, ...] = ()
    if layers_done is not None:
        _, number, line = scan.found["offloaded"]
        extra = (
            LogFigure("layers on the card", int(layers_done), number, line),
            LogFigure("layers in the model", int(scan.group("offloaded", 2) or 0), number, line),
        )
    return Learned(
        kind,
        weights=weights,
        non_kv=compute,
        kv=kv,
        kv_tokens=tokens,
        max_model_len=length or tokens,
        per_token=per_token,
        extra=extra,
        missing=tuple(missing),
        notes=tuple(notes),
    )


ENGINE = LlamaCpp()
