"""vLLM behind the EngineRule protocol: the rule itself stays in this package's `__init__`.

The gate, util, need and flags of vLLM (docs/facts.md §2; read in vLLM 0.10.2, 0.33.0, 0.34.0)
are the functions of `placement.fit.engines`; this module answers the protocol with them so
that the registry lists vLLM beside the others. Behaviour: request-gated up to 0.33 and with
`kv_cache_memory`; from 0.34 without it, a share of free (a declared util only caps it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from placement.fit.engines import (
    format_util,
    need_bytes,
    passes_gate,
    requested_bytes,
    util_decimal,
    vllm_flags,
)
from placement.fit.engines.base import (
    Behaviour,
    ByCommand,
    EngineCard,
    Expand,
    Fail,
    FlagError,
    GateRule,
    Learned,
    LogFigure,
    Refusal,
    ServerArgs,
    ServiceFlags,
    StartUpMarks,
    share_text,
)
from placement.fit.engines.note import Note, note
from placement.fit.engines.vllm_command import IMAGES, VERSION_TAG, image_version, vllm_args
from placement.fit.engines.vllm_flags import KV_FLAG, UTIL_FLAG
from seats.model import Engine as EngineSpec
from seats.model import Seat

# docs/facts.md §2: the default --gpu-memory-utilization by version; 0.34 skips the gate by default.
DEFAULT_UTIL_OLD = Decimal("0.9")  # up to 0.32
DEFAULT_UTIL_033 = Decimal("0.92")  # 0.33, and 0.34+ once kv_cache_memory turns the gate back on
UNBOUNDED_FROM = (0, 34)
GATED_DEFAULT_FROM = (0, 33)
_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """'0.11.0' → (0, 11, 0); 'v0.34.1rc2' → (0, 34, 1); None or unreadable → None."""
    if text is None:
        return None
    found = _VERSION.match(text)
    if found is None:
        return None
    return (int(found.group(1)), int(found.group(2)), int(found.group(3) or 0))


def gate_rule(engine: EngineSpec, *, propose: bool) -> GateRule:
    """The gate a vLLM seat applies as declared.

    `propose=True` (plan): a vLLM seat without a declared util gets one proposed later, so it
    is gated with source "proposed" even where, as declared, it would be unbounded.
    `propose=False` (check): the version's default util, or "unbounded" for 0.34+ with neither
    util nor kv_cache_memory (and for a seat that names no version and neither).
    """
    kv = engine.kv_cache_bytes
    version = parse_version(engine.version)
    if engine.gpu_memory_utilization is not None:
        util = util_decimal(engine.gpu_memory_utilization)
        capped = kv is None and version is not None and version[:2] >= UNBOUNDED_FROM
        return GateRule("gated", util, "declared", kv, checks_gate=not capped)
    warnings: list[Note] = []
    if engine.version is not None and version is None:
        warnings.append(note("vllm_version", version=engine.version, util=str(DEFAULT_UTIL_033)))
    unbounded = kv is None and (
        engine.version is None or (version is not None and version[:2] >= UNBOUNDED_FROM)
    )
    if propose:
        if unbounded:
            warnings.append(note("unbounded_declared"))
        return GateRule("gated", None, "proposed", kv, tuple(warnings))
    if unbounded:
        return GateRule("unbounded", None, "default", kv, tuple(warnings))
    return GateRule("gated", default_util(version), "default", kv, tuple(warnings))


def default_util(version: tuple[int, int, int] | None) -> Decimal:
    """The util vLLM uses when none is passed, for a gated start (docs/facts.md §2)."""
    if version is not None and version[:2] < GATED_DEFAULT_FROM:
        return DEFAULT_UTIL_OLD
    # 0.33, 0.34+ with kv_cache_memory, and an unknown version (the stricter of the two).
    return DEFAULT_UTIL_033


def engine_flags(
    util: Decimal | None, kv_cache_bytes: int | None, *, proposed: bool
) -> tuple[str, ...]:
    """vLLM start flags: util (three decimals when proposed) and the pinned KV cache."""
    flags: list[str] = []
    if util is not None:
        text = share_text(util) if proposed else format_util(util)
        flags += [UTIL_FLAG, text]
    if kv_cache_bytes is not None:
        flags += [KV_FLAG, str(kv_cache_bytes)]
    return tuple(flags)


class VLLM(ByCommand):
    """vLLM's OpenAI server (`vllm serve`, `-m vllm.entrypoints.openai.api_server`)."""

    kind = "vllm"
    title = "vLLM"
    util_request = True
    # Its log is read by placement/fit/engines/vllm_log.py (`learn --vllm-log`).
    log_reader = "vllm-log"
    # `VLLM::`: the process titles of its engine core and workers (`VLLM::EngineCore`,
    # `VLLM::Worker_TP0`), the processes that hold its GPU memory (vllm/utils set_process_title,
    # prefix VLLM_PROCESS_NAME_PREFIX, default "VLLM").
    commands = ("vllm serve", "python -m vllm.entrypoints.openai.api_server", "VLLM::")
    images = IMAGES
    version_tag = VERSION_TAG
    # `--config FILE`: a YAML file of its flags, read before the command line's (which win).
    config_flag = "--config"
    # Runtime LoRA loading (vllm/envs.py): adapters loaded after start-up take their slots.
    variables = ("VLLM_ALLOW_RUNTIME_LORA_UPDATING",)

    def behaviour(self, spec: EngineSpec) -> Behaviour:
        """request-gated when its gate applies, else a share of free."""
        rule = gate_rule(spec, propose=False)
        return "request-gated" if rule.gating == "gated" and rule.checks_gate else "share-of-free"

    def recognise(self, argv: Sequence[str], image: str | None = None) -> bool:
        """`vllm serve`, the api_server module, its engine processes, or the vllm-openai image
        (`ByCommand`); or any module of vllm.entrypoints."""
        return super().recognise(argv, image) or any(
            word.startswith("vllm.entrypoints") for word in argv
        )

    def read_flags(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> dict[str, object]:
        """--gpu-memory-utilization and --kv-cache-memory-bytes, as vLLM's parser reads them at
        `version` (vllm_flags.py: a unique prefix is the flag; `8G` = 8 GiB, `8g` = 8·10⁹);
        FlagError for a flag or value vLLM would stop at."""
        return dict(self._sizes(argv, version).engine_fields)

    def cards_of(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> int | None:
        """--tensor-parallel-size × --pipeline-parallel-size (-tp, -pp, or a unique prefix), 1
        each by default."""
        counts = self._sizes(argv, version)
        return (counts.count("tensor_parallel_size") or 1) * (
            counts.count("pipeline_parallel_size") or 1
        )

    def cards_flag(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        version: str | None = None,
    ) -> str | None:
        """The parallel flags as written (`-tp 2 × --pipeline-parallel-size 2`)."""
        flags = vllm_flags.read_flags(*self._args(argv), FlagError, version)
        written = [
            f"{flags.values[name][1]} {flags.values[name][0]}"
            for name in ("--tensor-parallel-size", "--pipeline-parallel-size")
            if name in flags.values
        ]
        return " × ".join(written) or None

    def _args(self, argv: Sequence[str]) -> tuple[list[str], bool]:
        """vLLM's own arguments in a command line (after `vllm serve` or its module), else all."""
        return vllm_args(argv) or (list(argv), False)

    def _sizes(self, argv: Sequence[str], version: str | None) -> vllm_flags.Sizes:
        flags = vllm_flags.read_flags(*self._args(argv), FlagError, version)
        return vllm_flags.read_sizes(flags, FlagError)

    def server_args(
        self,
        argv: Sequence[str],
        image: str | None,
        command: Sequence[str],
        *,
        entrypoint: bool,
        declared: bool,
        expand: Expand = str,
    ) -> ServerArgs | None:
        """After `vllm serve` or its module (inside a `bash -c` wrapper too, its `$VAR` read by
        `expand`); else the command alone, where its image's own entrypoint starts the server
        (no `entrypoint:` given) or the service is declared vLLM."""
        found = vllm_args(argv, expand)
        if found is not None:
            return ServerArgs(tuple(argv), tuple(found[0]), found[1])
        if (image_version(image)[0] and not entrypoint) or declared:
            return ServerArgs(("vllm", "serve", *command), tuple(command), True)
        return None

    def read_service(
        self,
        args: Sequence[str],
        positional: bool,
        env: Mapping[str, str],
        version: str | None,
        fail: Fail,
    ) -> ServiceFlags:
        """Its flags as its argparse reads them at `version` (vllm_flags.py), checked in
        `read_sizes`' order; runtime LoRA from its environment."""
        flags = vllm_flags.read_flags(args, positional, fail, version)
        sizes = vllm_flags.read_sizes(flags, fail)
        runtime = env.get(self.variables[0], "").strip().lower() in {"1", "true"}
        return ServiceFlags(
            model=flags.model,
            util_text=sizes.util_text,
            kv_cache_bytes=sizes.kv_cache_bytes,
            counts=tuple(sizes.counts.items()),
            lora_modules=tuple(flags.lora_modules),
            lora_enabled=flags.lora_enabled or bool(flags.lora_modules),
            runtime_lora=runtime,
            port=sizes.port,
            max_model_len=sizes.max_model_len,
            kv_cache_dtype=sizes.kv_cache_dtype,
            engine_fields=sizes.engine_fields,
            notes=tuple(note("flag_twice", flag=flag) for flag in flags.repeated),
        )

    def one_byte_kv(self, dtype: str | None) -> bool:
        """--kv-cache-dtype fp8 (fp8_e5m2, …) or int8."""
        return vllm_flags.one_byte_kv(dtype)

    def learn_profile(
        self,
        lines: Sequence[str],
        first_line: int,
        source: str,
        *,
        declared_util: Decimal | None,
        cuda_total: int | None,
    ) -> tuple[Any, Any]:
        """vllm_log.py's profile of its start-up lines, and the card total its log prints."""
        from placement.fit.engines.vllm_log import learn_profile, read_log

        figures = read_log(lines, first_line)
        profile = learn_profile(figures, source, declared_util=declared_util, cuda_total=cuda_total)
        return profile, figures.total

    def need_bytes(self, seat: Seat, card: EngineCard) -> int:
        """The resident, or ceil(util × total) + context where its KV grows to its request."""
        rule = gate_rule(seat.engine, propose=False)
        return need_bytes(
            seat.resident_bytes,
            rule.kv_cache_bytes,
            rule.util,
            card.cuda_total_bytes,
            card.cuda_context_bytes,
        )

    def gate(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """free after context < ceil(util × total) refuses (when its gate applies)."""
        rule = gate_rule(seat.engine, propose=False)
        if rule.gating != "gated" or not rule.checks_gate or rule.util is None:
            return None
        requested = requested_bytes(rule.util, card.cuda_total_bytes)
        if passes_gate(card.engine_free_bytes, requested):
            return None
        return Refusal(
            "gate",
            requested,
            card.engine_free_bytes,
            "vllm_gate",
            (("util", str(rule.util)), ("cuda_total_bytes", card.cuda_total_bytes)),
        )

    def kv_capacity(self, seat: Seat, card: EngineCard) -> Refusal | None:
        """Left to placement/fit/kv.py, which judges vLLM's second refusal today."""
        return None

    def pinned(self, spec: EngineSpec) -> bool:
        """Not unbounded: a util or kv_cache_memory, or a version that gates by default."""
        return gate_rule(spec, propose=False).gating != "unbounded"

    def pin_flags(self, seat: Seat, card: EngineCard) -> tuple[str, ...]:
        """Its declared util and kv_cache_memory as flags."""
        rule = gate_rule(seat.engine, propose=False)
        return engine_flags(
            rule.util if rule.source == "declared" else None, rule.kv_cache_bytes, proposed=False
        )

    def kv_tokens(self, seat: Seat, card: EngineCard) -> int | None:
        """Left to placement/fit/kv.py, which judges vLLM's second refusal today."""
        return None

    @property
    def start_up(self) -> StartUpMarks:
        """Its start-up's first and ready lines (vllm_log.MARKS)."""
        from placement.fit.engines.vllm_log import MARKS

        return MARKS

    def learn(self, lines: Sequence[str], first_line: int = 1) -> Learned:
        """The figures of vLLM's start-up log, read by vllm_log.py (which `learn` prints with
        their precision and the seat's util); a figure the log lacks is named in `missing`."""
        from placement.fit.engines.vllm_log import read_log

        found = read_log(lines, first_line)
        parts = {
            "weights": (found.weights, "Model loading took … GiB"),
            "non_kv": (found.non_kv, "the memory profile's non-KV line"),
            "kv": (found.kv, "Available KV cache memory: … GiB"),
            "kv_tokens": (found.tokens, "GPU KV cache size: … tokens"),
            "max_model_len": (found.max_model_len, "max_model_len=… in the engine's config"),
        }
        figures = {
            name: None
            if figure is None
            else LogFigure(name, figure.value, figure.line_no, figure.line)
            for name, (figure, _) in parts.items()
        }
        return Learned(
            self.kind,
            weights=figures["weights"],
            non_kv=figures["non_kv"],
            kv=figures["kv"],
            kv_tokens=figures["kv_tokens"],
            max_model_len=figures["max_model_len"],
            missing=tuple(line for figure, line in parts.values() if figure is None),
        )

    def request_rule(self, spec: EngineSpec, *, propose: bool) -> GateRule:
        """Its util request by version (`gate_rule`)."""
        return gate_rule(spec, propose=propose)

    def request_flags(
        self, util: Decimal | None, kv_cache_bytes: int | None, *, proposed: bool
    ) -> tuple[str, ...]:
        """--gpu-memory-utilization and --kv-cache-memory-bytes."""
        return engine_flags(util, kv_cache_bytes, proposed=proposed)

    def unbounded_why(self, spec: EngineSpec) -> Note:
        """≥ 0.34 (or no known version, as an image tag like `latest`) with neither util nor
        kv_cache_memory."""
        return note("vllm_unbounded", version=spec.version or None)

    def pin_hint(self) -> str:
        """Its two pins."""
        return f"{UTIL_FLAG} or {KV_FLAG}"

    def flag_of(self, field: str) -> str:
        """The util and KV fields' flags; any other field is its flag in snake_case."""
        if field == "gpu_memory_utilization":
            return UTIL_FLAG
        if field in ("kv_cache_bytes", "kv_cache_memory"):
            return KV_FLAG
        return "--" + field.replace("_", "-")


ENGINE = VLLM()
