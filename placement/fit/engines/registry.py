"""Every engine a seat may run, listed once: one module per kind, imported when first used.

Adding an engine is one module in this package (with an `ENGINE` object that satisfies
`base.Engine`) and one line in `ENGINES`. A module is imported only when a seat or a service
asks for its kind, so `check` pays for the engines it meets and no others.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from placement.fit.engines.base import EngineRule
    from seats.model import Engine as EngineSpec
    from seats.model import Profile

# kind → module, in the order recognition tries them: Ollama before llama.cpp, since Ollama's
# runner is a llama-server of Ollama's own model store.
ENGINES: tuple[tuple[str, str], ...] = (
    ("vllm", "placement.fit.engines.vllm"),
    ("sglang", "placement.fit.engines.sglang"),
    ("tgi", "placement.fit.engines.tgi"),
    ("trtllm", "placement.fit.engines.trtllm"),
    ("ollama", "placement.fit.engines.ollama"),
    ("llamacpp", "placement.fit.engines.llamacpp"),
    ("other", "placement.fit.engines.other"),
)
KINDS: tuple[str, ...] = tuple(kind for kind, _ in ENGINES)


@cache
def engine(kind: str) -> EngineRule:
    """The engine of one kind (its module imported on first use); KeyError for an unknown kind."""
    modules = dict(ENGINES)
    if kind not in modules:
        raise KeyError(f"no engine of kind {kind!r}; kinds: {', '.join(KINDS)}")
    return cast("EngineRule", import_module(modules[kind]).ENGINE)


def util_request_engine() -> EngineRule:
    """The first engine, in recognition order, that starts on a util request gpuplan sizes: the
    engine of a probe seat whose gate must check its whole resident (the report's largest new
    seat)."""
    return next(found for found in engines() if found.util_request)


def engines() -> Iterator[EngineRule]:
    """Every engine, in recognition order (imports them all: for recognition and docs only)."""
    for kind in KINDS:
        yield engine(kind)


def recognise(
    argv: Sequence[str], image: str | None = None, declared: str | None = None
) -> EngineRule | None:
    """The engine a command line (and image) starts; `declared` is `x-gpuplan-engine: KIND`.

    None when no engine recognises it: a GPU service nobody recognises stays `unknown`.
    """
    if declared is not None:
        return engine(declared)
    for kind in KINDS:
        if kind == "other":
            continue
        found = engine(kind)
        if found.recognise(argv, image):
            return found
    return None


def worker_of(argv: Sequence[str]) -> EngineRule | None:
    """The engine whose worker processes run this command line (the same in every server of it:
    TensorRT-LLM's MPI pool workers), else None; `init` finds such a worker by its server's line."""
    for kind in KINDS:
        found = engine(kind)
        if found.worker(argv):
            return found
    return None


def process_engine(cmdline: str | None, declared: EngineSpec | None = None) -> EngineRule | None:
    """The engine a running process serves, for `snapshot` and `ledger` to show: its seat's
    declared kind where the seat names one (not `other`), else the engine its command line
    (/proc's, arguments split on whitespace) starts, else None."""
    if declared is not None and declared.kind != "other":
        return engine(declared.kind)
    if not cmdline:
        return None
    return recognise(cmdline.split())


def describe(spec: EngineSpec | None) -> dict[str, str | None]:
    """A VERDICT's `engine` object (DESIGN.md, Engines): kind, version (None where unknown)
    and behaviour; every key None where no engine was recognised (`spec` None)."""
    if spec is None:
        return {"kind": None, "version": None, "behaviour": None}
    return {
        "kind": spec.kind,
        "version": spec.version,
        "behaviour": engine(spec.kind).behaviour(spec),
    }


def spec_of(
    kind: str,
    fields: Mapping[str, object],
    *,
    version: str | None = None,
    profile: Profile | None = None,
) -> EngineSpec:
    """The catalogue `engine:` block a command line of `kind` starts with: the fields its flags
    set (its engine's `read_flags`), its version and a profile. pydantic's ValidationError for
    fields its kind does not take."""
    from seats.model import Engine as EngineSpec

    data: dict[str, object] = {"kind": engine(kind).kind, **fields}
    if version is not None:
        data["version"] = version
    if profile is not None:
        data["profile"] = profile
    return EngineSpec.model_validate(data)
