"""Ollama: fits each model into what is free less its own margins; the rest runs on the CPU.

Read in ollama/ollama v0.32.15 (b7871fc0):

- OLLAMA_GPU_OVERHEAD: bytes held back on every card, default 0 (envconfig/config.go:303).
- A CUDA card keeps 457 MiB aside (`MinimumMemory`, ml/device.go:359-364).
- The scheduler's room on a card: available = free − OLLAMA_GPU_OVERHEAD − 457 MiB, 0 when free
  is smaller (server/sched.go:616-619).
- It starts llama.cpp's `llama-server` (LLAMA_CPP_VERSION b10488) with `-c num_ctx × parallel`
  (llm/llama_server.go:368-377) and passes `-ngl` only when `num_gpu` is set
  (:403-410); otherwise llama-server fits the layers itself, leaving its 1024 MiB margin
  (llamacpp.py). So its room is min(free − overhead − 457 MiB, free after its context − 1024 MiB).
- It never refuses for memory: layers that do not fit run on the CPU (rule `spill`, with the
  bytes that leave the card), and it evicts its own idle models to load another.
- Pins: `num_gpu` (layers on the card) and `num_ctx` (api/types.go:589-591, a Modelfile
  PARAMETER or a request option; OLLAMA_CONTEXT_LENGTH sets the default num_ctx,
  envconfig/config.go:230), and OLLAMA_GPU_OVERHEAD to keep its neighbours' bytes.
- Start-up lines (learn): its runner prints llama.cpp's "offloaded N/M layers to GPU" and
  the model / KV / compute buffer sizes (the lines its own parser reads,
  llm/llama_server.go:2742-2743); its own engine logs "model weights", "kv cache" and
  "compute graph" per device (ml/device.go:241-268).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from placement.fit.engines.base import (
    Behaviour,
    EngineCard,
    HostFiles,
    Learned,
    LogFigure,
    LogScan,
    ModelName,
    NoRequest,
    Refusal,
    StartUpMarks,
    as_int,
    command_in,
    fitted_need,
    flag_value,
    room_tokens,
    short_context,
    spill,
)
from placement.fit.engines.llamacpp import FIT_MARGIN_BYTES, read_ggml_log
from placement.fit.engines.llamacpp import MARKS as GGML_MARKS
from placement.fit.engines.note import note
from seats.model import Engine as EngineSpec
from seats.model import Seat
from seats.units import MiB

MINIMUM_BYTES = 457 * MiB
_WEIGHTS = re.compile(
    r'msg="model weights" (?:buffer|device)=CUDA0 size="([\d.]+) (B|KiB|MiB|GiB)"'
)
_KV_CACHE = re.compile(r'msg="kv cache" device=CUDA0 size="([\d.]+) (B|KiB|MiB|GiB)"')
_GRAPH = re.compile(
    r'msg="compute graph" (?:backend|device)=CUDA0 (?:\S+ )?size="([\d.]+) (B|KiB|MiB|GiB)"'
)

# One start-up: `ollama serve`'s config line or a runner it starts for a model (server.go
# "starting llama server", newer "starting runner"), to "llama runner started in".
MARKS = StartUpMarks(
    begins=(
        re.compile(r'msg="starting (?:llama server|runner)"'),
        re.compile(r"server config env="),
    ),
    ready=(re.compile(r"llama runner started in"),),
    figures=(*GGML_MARKS.figures, _WEIGHTS, _KV_CACHE, _GRAPH),
    failed=(re.compile(r'msg="error loading llama server"|llama runner process has terminated'),),
)


class Ollama(NoRequest):
    """Ollama's `ollama serve` (and the runners it starts)."""

    kind = "ollama"
    title = "Ollama"
    log_reader = "learn"
    start_up = MARKS
    # Its runners hold the GPU memory: `ollama runner` (0.4 on), `ollama_llama_server` before it.
    commands = ("ollama serve", "ollama runner", "ollama_llama_server")
    images = ("ollama/ollama",)
    # ollama/ollama tags a release `0.12.6` (`0.12.6-rocm`, pre-releases `0.5.14-rc0`);
    # `latest` and `rocm` name none.
    version_tag = re.compile(r"v?(?P<version>\d+\.\d+\.\d+(?:-rc\d+)?)(?:-.*)?")

    def behaviour(self, spec: EngineSpec) -> Behaviour:
        """Self-fitting; `num_gpu` makes its layers fixed."""
        return "fixed" if spec.num_gpu is not None else "self-fitting"

    def recognise(self, argv: Sequence[str], image: str | None = None) -> bool:
        """`ollama serve|runner`, the ollama image, or a llama-server of Ollama's model store
        (its blobs are named `sha256-HEX` under OLLAMA_MODELS, ~/.ollama/models by default)."""
        return super().recognise(argv, image) or any(
            "/.ollama/models/" in word or "/blobs/sha256-" in word for word in argv
        )

    def volatile_flags(self, argv: Sequence[str]) -> tuple[str, ...]:
        """A runner's --port: `ollama serve` asks the system for a free port for every runner it
        starts (a `--port 46753` in the runner line of tests/…/ollama/securetag-0.5.4-…log), so
        no `match` may name it."""
        return ("--port",) if _runner(argv) else ()

    def model_name(self, argv: Sequence[str], files: HostFiles | None) -> ModelName | None:
        """A runner's model by the name Ollama pulled it as: the manifest (manifests/HOST/
        NAMESPACE/MODEL/TAG under its models folder) whose model layer is the runner's
        --model blob (blobs/sha256-HEX); where none can be read, the blob's digest stands in."""
        found = _BLOB.fullmatch(flag_value(argv, "--model") or "")
        if found is None:
            return None
        digest = "sha256:" + found["hex"]
        manifests = found["models"] + "/manifests"
        if files is not None:
            for relative in files.listing(manifests):
                if _models_layer(files.read_text(f"{manifests}/{relative}"), digest):
                    return ModelName(_pulled_name(relative), note("manifest", path=relative))
        short = found["hex"][:12]
        return ModelName(f"ollama-{short}", note("blob", digest=short), stable=False)

    def read_flags(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> dict[str, object]:
        """OLLAMA_GPU_OVERHEAD (bytes) and OLLAMA_CONTEXT_LENGTH (the default num_ctx).

        Ollama reads OLLAMA_GPU_OVERHEAD with strconv.ParseUint(s, 10, 64) after trimming spaces
        and quotes (envconfig/config.go, `Uint64` and `Var`); anything it cannot parse, a number
        past 2**64 − 1 included, is its default 0 with a warning: left out here, so 0 too."""
        env = env or {}
        found: dict[str, object] = {}
        overhead = (env.get("OLLAMA_GPU_OVERHEAD") or "").strip().strip("\"'")
        if re.fullmatch(r"[0-9]+", overhead) and int(overhead) < 2**64:
            found["gpu_overhead"] = int(overhead)
        ctx = as_int(env.get("OLLAMA_CONTEXT_LENGTH"))
        if ctx is not None and ctx >= 1:
            found["num_ctx"] = ctx
        return found

    def overhead_bytes(self, seat: Seat) -> int:
        """OLLAMA_GPU_OVERHEAD as declared, else 0."""
        return seat.engine.gpu_overhead_bytes or 0

    def room_bytes(self, seat: Seat, card: EngineCard) -> int:
        """min(free − overhead − 457 MiB, free after its context − 1024 MiB), never negative."""
        scheduler = card.free_bytes - self.overhead_bytes(seat) - MINIMUM_BYTES
        fitter = card.engine_free_bytes - FIT_MARGIN_BYTES
        return max(0, min(scheduler, fitter))

    def need_bytes(self, seat: Seat, card: EngineCard) -> int:
        """Its resident, or what its room lets it load (plus its context) when self-fitting."""
        if seat.engine.num_gpu is not None:
            return seat.resident_bytes
        return fitted_need(seat, card, self.room_bytes(seat, card))

    def gate(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """Rule `spill` when its room is short of the resident; Ollama itself never refuses."""
        if seat.engine.num_gpu is not None:
            return None
        return spill(
            seat,
            card,
            self.room_bytes(seat, card),
            "ollama_spill",
            overhead="OLLAMA_GPU_OVERHEAD",
            minimum_bytes=MINIMUM_BYTES,
        )

    def kv_tokens(self, seat: Seat, card: EngineCard) -> int | None:
        """num_ctx: the tokens one request may hold."""
        return seat.engine.num_ctx

    def kv_capacity(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """num_ctx below the profile's length: Ollama truncates the prompt to num_ctx."""
        profile = seat.engine.profile
        return short_context(
            seat,
            seat.engine.num_ctx,
            profile.max_model_len if profile else None,
            "ollama_kv",
        )

    def pinned(self, spec: EngineSpec) -> bool:
        """num_gpu fixes its layers on the card."""
        return spec.num_gpu is not None

    def pin_flags(self, seat: Seat, card: EngineCard) -> tuple[str, ...]:
        """num_gpu, num_ctx (as declared, else from the resident's KV room), and the overhead that
        keeps the rest."""
        profile = seat.engine.profile
        tokens = room_tokens(seat, card)
        flags = ["num_gpu", str(seat.engine.num_gpu if seat.engine.num_gpu is not None else 999)]
        if seat.engine.num_ctx is not None:  # its own, as it is judged
            flags += ["num_ctx", str(seat.engine.num_ctx)]
        elif profile is not None and tokens is not None:
            flags += ["num_ctx", str(min(tokens, profile.max_model_len))]
        overhead = max(0, card.free_bytes - MINIMUM_BYTES - seat.resident_bytes)
        return (*flags, f"OLLAMA_GPU_OVERHEAD={overhead}")

    def learn(self, lines: Sequence[str], first_line: int = 1) -> Learned:
        """llama.cpp's load lines as its runner prints them, or its own engine's
        (`msg="model weights" device=CUDA0 size="11.5 GiB"`, ml/device.go:241-268; older releases
        wrote buffer= and backend=)."""
        learned = read_ggml_log(self.kind, lines, first_line)
        if learned.weights is not None:
            return learned
        return read_own_log(lines, learned, first_line)

    def pin_hint(self) -> str:
        """The flags that fix its bytes, by name."""
        return "num_gpu, num_ctx and OLLAMA_GPU_OVERHEAD"


# Ollama's model store (OLLAMA_MODELS, ~/.ollama/models by default): each layer a blob named
# blobs/sha256-HEX, each pulled model a manifest at manifests/HOST/NAMESPACE/MODEL/TAG whose
# `layers` give each layer's digest and mediaType (the format: server/internal/manifest/manifest.go
# at v0.12.0); the weights' layer is the one of mediaType application/vnd.ollama.image.model.
_BLOB = re.compile(r"(?P<models>.+)/blobs/sha256[-:](?P<hex>[0-9a-f]{64})")
_MODEL_LAYER = "application/vnd.ollama.image.model"


def _runner(argv: Sequence[str]) -> bool:
    """A runner Ollama starts (`ollama runner`, `ollama_llama_server` before 0.4), not its server."""
    return command_in(argv, "ollama runner") or command_in(argv, "ollama_llama_server")


def _models_layer(text: str | None, digest: str) -> bool:
    """True when a manifest's text names `digest` as its model layer."""
    try:
        layers = json.loads(text or "").get("layers")
    except (ValueError, AttributeError):
        return False
    return isinstance(layers, list) and any(
        isinstance(layer, dict)
        and layer.get("digest") == digest
        and layer.get("mediaType") == _MODEL_LAYER
        for layer in layers
    )


def _pulled_name(relative: str) -> str:
    """`registry.ollama.ai/library/llama3.1/latest` → `llama3.1:latest` (as `ollama pull` names
    it: the library's namespace and the default registry left out)."""
    parts = relative.split("/")
    if len(parts) < 4:
        return relative.replace("/", "-")
    host, namespace, model, tag = parts[-4], "/".join(parts[1:-2]), parts[-2], parts[-1]
    prefix = "" if namespace == "library" else f"{namespace}/"
    if host != "registry.ollama.ai":
        prefix = f"{host}/{prefix}"
    return f"{prefix}{model}:{tag}"


def read_own_log(lines: Sequence[str], fallback: Learned, first_line: int = 1) -> Learned:
    """Ollama's own engine: weights, KV cache and compute graph on the first CUDA card."""
    scan = LogScan.of(
        lines, {"weights": _WEIGHTS, "kv": _KV_CACHE, "compute": _GRAPH}, first_line=first_line
    )

    def figure(name: str) -> LogFigure | None:
        return scan.size(name, scan.group(name, 2) or "B")  # None where it did not match

    weights, kv, compute = figure("weights"), figure("kv"), figure("compute")
    missing = [
        text
        for found, text in (
            (weights, 'msg="model weights" device=CUDA0 size="…"'),
            (kv, 'msg="kv cache" device=CUDA0 size="…"'),
            (compute, 'msg="compute graph" device=CUDA0 size="…"'),
        )
        if found is None
    ]
    return replace(
        fallback,
        weights=weights,
        kv=kv or fallback.kv,
        non_kv=compute or fallback.non_kv,
        missing=tuple(missing),
        notes=(note("printed_3_figures"),),
    )


ENGINE = Ollama()
