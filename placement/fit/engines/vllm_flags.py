"""vLLM's own reading of the flags that decide its memory: byte counts, util, LoRA, parallel sizes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TypeVar

from placement.fit.engines.argparse_flags import ArgparseReader, Option, is_option
from placement.fit.engines.base import FlagError, parse_util
from placement.fit.engines.vllm_options import RELEASES

# vLLM's human_readable_int: uppercase K/M/G/T binary, lowercase k/m/g/t decimal (a decimal
# number only with a decimal suffix), else a plain int. Anything else vLLM itself refuses.
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT]?)")
_DECIMAL_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY_SUFFIX = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_UNIT_WORD = re.compile(r"(?i)(?:[kmgt]i?b?|b|bytes?)")


def vllm_bytes(text: str) -> int:
    """Bytes as vLLM reads `--kv-cache-memory-bytes` (`8G` = 8 GiB, `8g` = 8·10⁹); ValueError otherwise."""
    value = text.strip()
    match = _HUMAN_INT.fullmatch(value)
    if match is None:
        spaced = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([A-Za-z]+)", value)
        raise ValueError(
            f"{text!r} is not a byte count vLLM can read"
            + (
                "; vLLM reads only K/M/G/T (binary) or k/m/g/t (decimal) right after the number: "
                f"write {spaced.group(1)}G for {spaced.group(1)} GiB, or the bytes as an int"
                if spaced is not None
                else ""
            )
        )
    number, suffix = match.group(1), match.group(2)
    if suffix in _DECIMAL_SUFFIX:
        # vLLM computes int(float(number) * mult); do the same so the bytes agree with it.
        return int(float(number) * _DECIMAL_SUFFIX[suffix])
    if "." in number:
        raise ValueError(
            f"{text!r}: vLLM allows decimals only with the decimal suffixes k/m/g/t"
            + (f"; write {number}{suffix.lower()} or a whole number of {suffix}" if suffix else "")
        )
    return int(number) * _BINARY_SUFFIX.get(suffix, 1)


_VALUE_FLAGS = {
    "--model",
    "--gpu-memory-utilization",
    "--kv-cache-memory-bytes",
    "--max-loras",
    "--max-lora-rank",
    "--port",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--data-parallel-size",
    "--max-model-len",
    "--kv-cache-dtype",
}
# vLLM's own flags by release (vllm_options.py), read as its FlexibleArgumentParser reads them:
# a unique prefix is the flag (the seed writes `--kv-cache-memory` for --kv-cache-memory-bytes).
READER = ArgparseReader("vLLM", RELEASES, flexible=True)


@dataclass
class Flags:
    """What `read_flags` found: the model, each value flag's last value, LoRA names."""

    model: str | None = None
    # flag → (value, as written)
    values: dict[str, tuple[str, str]] = field(default_factory=dict)
    lora_modules: list[str] = field(default_factory=list)
    lora_enabled: bool = False
    repeated: list[str] = field(default_factory=list)


Fail = Callable[[str, str], Exception]
T = TypeVar("T")


def read_flags(
    args: Sequence[str], allow_positional_model: bool, fail: Fail, version: str | None = None
) -> Flags:
    """The flags of a vLLM command line that decide its memory, as vLLM's argparse reads them
    for `version` (None: unknown, read with every release's flags); `fail(flag, why)` for a flag
    vLLM stops at (ambiguous or unknown)."""
    flags = Flags()
    if allow_positional_model and args and not is_option(args[0]):
        flags.model = args[0]
    try:
        options = READER.options(args, version)
    except FlagError as exc:
        raise fail(exc.flag, exc.why) from None
    for option in options:
        if option.name == "--enable-lora":
            flags.lora_enabled = True
        elif option.name == "--no-enable-lora":
            flags.lora_enabled = False
        if option.name == "--lora-modules":
            _read_lora_modules(args, option, flags, fail)
        elif option.name in _VALUE_FLAGS:
            _read_value(args, option, flags, fail)
    return flags


def _read_lora_modules(args: Sequence[str], option: Option, flags: Flags, fail: Fail) -> None:
    """`--lora-modules a=/p b=/q` or `--lora-modules='{"name": …}'`: every item up to the next flag."""
    items = [option.value] if option.value is not None else []
    i = option.index + 1
    while option.value is None and i < len(args) and not is_option(args[i]):
        items.append(args[i])
        i += 1
    if not items:
        raise fail(option.written, "needs at least one name=path or JSON value")
    flags.lora_modules.extend(_lora_name(item, fail) for item in items)


def _read_value(args: Sequence[str], option: Option, flags: Flags, fail: Fail) -> None:
    """One `--flag value` or `--flag=value`: its value, the last one winning."""
    i = option.index + 1
    if option.value is not None:
        value = option.value
    else:
        if i >= len(args) or (is_option(args[i]) and args[i] != "--"):
            raise fail(option.written, "needs a value")
        value, i = args[i], i + 1
    name = option.name
    if name == "--kv-cache-memory-bytes" and i < len(args) and _UNIT_WORD.fullmatch(args[i]):
        # `--kv-cache-memory 12 GB`: vLLM would read 12 bytes, then choke on "GB".
        raise fail(
            option.written,
            f"'{value} {args[i]}' is ambiguous: vLLM reads {value} as bytes and stops at "
            f"'{args[i]}'; write {value}G for {value} GiB, or the bytes as an int",
        )
    if name in flags.values:
        flags.repeated.append(name)
    flags.values[name] = (value, option.written)
    if name == "--model":
        flags.model = value


def _lora_name(item: str, fail: Fail) -> str:
    text = item.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise fail("--lora-modules", f"{item!r} is not valid JSON: {exc.msg}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
            raise fail("--lora-modules", f'{item!r} needs a JSON object with a "name"')
        return str(data["name"])
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise fail("--lora-modules", f"{item!r} is neither name=path nor a JSON object")
    return name


# --kv-cache-dtype values that store one byte per element where the model's dtype takes two.
_ONE_BYTE_KV = ("fp8", "int8")


def one_byte_kv(dtype: str | None) -> bool:
    """True for a --kv-cache-dtype (`fp8`, `fp8_e5m2`, `int8`) that halves the bytes per token
    of a profile learnt at the model's 16-bit dtype."""
    return dtype is not None and dtype.startswith(_ONE_BYTE_KV)


# The flags that decide a vLLM service's cards and memory, read by `read_sizes`.
UTIL_FLAG = "--gpu-memory-utilization"
KV_FLAG = "--kv-cache-memory-bytes"
_LORA_COUNTS = {"max_loras": "--max-loras", "max_lora_rank": "--max-lora-rank"}
_PARALLEL_COUNTS = {
    "tensor_parallel_size": "--tensor-parallel-size",
    "pipeline_parallel_size": "--pipeline-parallel-size",
    "data_parallel_size": "--data-parallel-size",
}


@dataclass(frozen=True)
class Sizes:
    """What a vLLM command line sets that decides its cards and memory, checked as vLLM reads it.

    Counts vLLM defaults (parallel sizes 1, no LoRA slots) are None where the line leaves them.
    """

    util_text: str | None = None
    kv_cache_bytes: int | None = None
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None
    port: int | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, name: str) -> int | None:
        """A count flag by its catalogue name (`tensor_parallel_size`), None where unset."""
        return self.counts.get(name)

    @property
    def engine_fields(self) -> tuple[tuple[str, object], ...]:
        """The catalogue engine fields it sets: util (a float keeps the decimal text:
        repr(float(Decimal("0.12"))) == "0.12") and the pinned KV cache."""
        fields: list[tuple[str, object]] = []
        if self.util_text is not None:
            fields.append(("gpu_memory_utilization", float(Decimal(self.util_text))))
        if self.kv_cache_bytes is not None:
            fields.append(("kv_cache_memory", self.kv_cache_bytes))
        return tuple(fields)


def read_sizes(flags: Flags, fail: Fail) -> Sizes:
    """The util, KV cache, counts, port, context length and KV dtype of read flags, checked in
    that order; `fail(flag as written, why)` for a value vLLM would refuse."""
    util, kv = _read(flags, UTIL_FLAG, parse_util, fail), _read(flags, KV_FLAG, _kv_bytes, fail)
    counts = _counts(flags, _LORA_COUNTS, fail)
    port = _port(flags, fail)
    counts.update(_counts(flags, _PARALLEL_COUNTS, fail))
    dtype = flags.values.get("--kv-cache-dtype")
    return Sizes(
        util_text=util,
        kv_cache_bytes=kv,
        max_model_len=_read(flags, "--max-model-len", _tokens, fail),
        kv_cache_dtype=dtype[0].strip().lower() if dtype is not None else None,
        port=port,
        counts=counts,
    )


def _counts(flags: Flags, names: dict[str, str], fail: Fail) -> dict[str, int]:
    """Each count flag given, by its catalogue name; at least 1."""
    found = {name: _read(flags, flag, _at_least_one, fail) for name, flag in names.items()}
    return {name: number for name, number in found.items() if number is not None}


def _read(flags: Flags, name: str, parse: Callable[[str], T | None], fail: Fail) -> T | None:
    """`parse` of a flag's last value (None where the flag is absent); its ValueError becomes
    `fail(the flag as written, why)`."""
    if name not in flags.values:
        return None
    value, written = flags.values[name]
    try:
        return parse(value)
    except ValueError as exc:
        raise fail(written, str(exc)) from None


def _at_least_one(
    value: str, read: Callable[[str], int] = int, what: str = "a whole number", nothing: str = ""
) -> int:
    """A count of at least 1 as `read` reads it; `what` it must be, `nothing` what 0 is."""
    try:
        number = read(value)
    except ValueError:
        raise ValueError(f"{value!r} is not {what}") from None
    if number < 1:
        raise ValueError(f"{value!r} is {nothing}" if nothing else f"{number} is below 1")
    return number


def _port(flags: Flags, fail: Fail) -> int | None:
    number = _read(flags, "--port", _at_least_one, fail)
    if number is not None and number > 65535:
        raise fail(flags.values["--port"][1], f"{number} is not a TCP port")
    return number


def _tokens(value: str) -> int | None:
    """--max-model-len as vLLM reads it (`32768`, `32k`, `32K`); -1 and `auto` leave it to vLLM."""
    if value.strip().lower() in {"-1", "auto"}:
        return None
    return _at_least_one(value, vllm_bytes, "a token count vLLM can read", "no tokens at all")


# The fewest bytes one token's KV takes in any model: its K and its V, one byte each (fp8, one
# head of one element, one layer). Below it vLLM cannot hold one block, let alone one request of
# max_model_len ("To serve at least one request … KV cache is needed", vllm/v1/core/
# kv_cache_utils.py `check_enough_kv_cache_memory`), and stops at start.
MIN_KV_BYTES = 2


def _kv_bytes(value: str) -> int:
    kv_bytes = vllm_bytes(value)
    if kv_bytes <= 0:
        raise ValueError(f"{value!r} is no memory at all; give the KV cache's bytes")
    if kv_bytes < MIN_KV_BYTES:
        raise ValueError(
            f"{value!r} is {kv_bytes} B, less than the K and V of one token of any model: vLLM "
            "holds no block of it and stops at start; give the KV cache's bytes (1536M, 8G)"
        )
    return kv_bytes
