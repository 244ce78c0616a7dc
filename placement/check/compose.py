"""Read a docker compose file into the vLLM services it starts, as frozen records for `check`.

Nothing in the file is run: YAML is read safely, `${VAR}` is interpolated here, and command
strings are only split (shlex), never handed to a shell or to a compose binary.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from inventory.snapshot import Card
from seats.errors import BadInputError, CatalogueError
from seats.loader import MAX_DOCUMENT_BYTES, read_text_file, read_yaml

MAX_ENV_FILE_BYTES = 256 * 1024


class ComposeError(BadInputError):
    """A compose file that cannot be checked: names the file, the service and the argument."""

    def __init__(self, path: str, service: str | None, argument: str | None, msg: str) -> None:
        self.path = path
        self.service = service
        self.argument = argument
        self.msg = msg
        where = [path]
        if service is not None:
            where.append(f"service {service!r}")
        if argument:
            where.append(argument)
        super().__init__(f"{': '.join(where)}: {msg}")


@dataclass(frozen=True)
class ComposeService:
    """One compose service that runs vLLM, with the flags that decide its memory.

    `devices` are the host cards the container gets (indices or UUIDs as written; None when
    the file gives all cards or none); `visible` is CUDA_VISIBLE_DEVICES inside it, by
    position among those. `resolve_cards` turns both into NVML indices against a snapshot.
    """

    name: str
    path: str
    image: str | None
    version: str | None
    model: str | None
    argv: tuple[str, ...]
    util_text: str | None = None
    kv_cache_bytes: int | None = None
    max_loras: int | None = None
    max_lora_rank: int | None = None
    lora_modules: tuple[str, ...] = ()
    lora_enabled: bool = False
    runtime_lora: bool = False
    port: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    devices: tuple[str, ...] | None = None
    devices_from: str | None = None
    device_count: int | None = None
    visible: tuple[str, ...] | None = None
    seat: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def util(self) -> Decimal | None:
        """--gpu-memory-utilization as an exact decimal (validated at load)."""
        return Decimal(self.util_text) if self.util_text is not None else None

    @property
    def world_size(self) -> int:
        """Cards the service's engine uses: tensor × pipeline parallel."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def cmdline(self) -> str:
        """The command as one line, for matching against a catalogue seat's regex."""
        return " ".join(self.argv)

    @property
    def names_cards(self) -> bool:
        """True when the file says which cards the service gets."""
        return self.devices is not None or self.visible is not None or self.device_count is not None


@dataclass(frozen=True)
class ComposeFile:
    """The vLLM services of one compose file, and the names of the services that are not vLLM."""

    path: str
    services: tuple[ComposeService, ...]
    skipped: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# Interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}, ${VAR:+alt}, $VAR, $$


class _MissingVariable(Exception):
    def __init__(self, name: str, message: str | None = None) -> None:
        super().__init__(name)
        self.name = name
        self.message = message


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def interpolate(text: str, lookup: Callable[[str], str | None]) -> str:
    """`text` with compose's variable forms replaced; raises `_MissingVariable` for an unset one."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "$":
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "{":
            end = _closing_brace(text, i + 2)
            out.append(_expand(text[i + 2 : end], lookup))
            i = end + 1
        else:
            match = _NAME.match(text, i + 1)
            if match is None:
                out.append("$")
                i += 1
                continue
            value = lookup(match.group(0))
            if value is None:
                raise _MissingVariable(match.group(0))
            out.append(value)
            i = match.end()
    return "".join(out)


def _closing_brace(text: str, start: int) -> int:
    depth = 1
    i = start
    while i < len(text):
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unclosed '${{' in {text!r}")


def _expand(body: str, lookup: Callable[[str], str | None]) -> str:
    match = _NAME.match(body)
    if match is None:
        raise ValueError(f"'${{{body}}}' is not a variable name")
    name = match.group(0)
    rest = body[match.end() :]
    value = lookup(name)
    if rest == "":
        if value is None:
            raise _MissingVariable(name)
        return value
    for op in (":-", ":?", ":+", "-", "?", "+"):
        if rest.startswith(op):
            word = rest[len(op) :]
            break
    else:
        raise ValueError(f"'${{{body}}}' uses an operator compose does not know")
    unset_or_empty = value is None or (op.startswith(":") and value == "")
    if op in (":-", "-"):
        return interpolate(word, lookup) if unset_or_empty else str(value)
    if op in (":?", "?"):
        if unset_or_empty:
            raise _MissingVariable(name, interpolate(word, lookup) or None)
        return str(value)
    return "" if unset_or_empty else interpolate(word, lookup)


def parse_env_file(text: str, path: str) -> dict[str, str]:
    """KEY=VALUE lines of a compose `.env` file: `#` comments, `export`, quoted values."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or _NAME.fullmatch(key) is None:
            raise ComposeError(
                path, None, f"line {number}", f"expected KEY=VALUE, got {raw.strip()!r}"
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
            if raw.strip().split("=", 1)[1].strip()[0] == '"':
                value = value.replace("\\n", "\n").replace('\\"', '"')
        else:
            # An unquoted value ends at " #": compose treats the rest as a comment.
            hash_at = value.find(" #")
            if hash_at >= 0:
                value = value[:hash_at].rstrip()
        values[key] = value
    return values


# ---------------------------------------------------------------------------------------------
# vLLM's own reading of its flags


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
        hint = ""
        spaced = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([A-Za-z]+)", value)
        if spaced is not None:
            hint = (
                f"; vLLM reads only K/M/G/T (binary) or k/m/g/t (decimal) right after the number: "
                f"write {spaced.group(1)}G for {spaced.group(1)} GiB, or the bytes as an int"
            )
        raise ValueError(f"{text!r} is not a byte count vLLM can read{hint}")
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


def parse_util(text: str) -> str:
    """`--gpu-memory-utilization` text checked to be a number in (0, 1]; returned as written."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation as exc:
        raise ValueError(
            f"{text!r} is not a number; write a fraction in (0, 1], e.g. 0.11"
        ) from exc
    if not value.is_finite() or not 0 < value <= 1:
        raise ValueError(
            f"{text!r} is not in (0, 1]; vLLM's gate needs a share of the card, e.g. 0.11"
        )
    return text.strip()


_VALUE_FLAGS = {
    "--model",
    "--gpu-memory-utilization",
    "--kv-cache-memory-bytes",
    "--max-loras",
    "--max-lora-rank",
    "--port",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
}
# argparse accepts a unique prefix; the seed itself writes `--kv-cache-memory` (FACTS.md §2).
_ALIASES = {
    "--kv-cache-memory": "--kv-cache-memory-bytes",
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
}
_SHELLS = {"sh", "bash", "dash", "ash", "zsh"}
_SHELL_OPERATORS = {"&&", "||", ";", "|", "&", ";;", "(", ")"}


def _flag_name(token: str) -> str:
    name = token.split("=", 1)[0]
    if name.startswith("--"):
        # vLLM's FlexibleArgumentParser reads --foo_bar as --foo-bar.
        name = "--" + name[2:].replace("_", "-")
    return _ALIASES.get(name, name)


@dataclass
class _Flags:
    model: str | None = None
    values: dict[str, tuple[str, str]] = field(default_factory=dict)  # flag → (value, as written)
    lora_modules: list[str] = field(default_factory=list)
    lora_enabled: bool = False
    repeated: list[str] = field(default_factory=list)


def _read_flags(
    args: Sequence[str], allow_positional_model: bool, fail: Callable[[str, str], Exception]
) -> _Flags:
    flags = _Flags()
    i = 0
    if allow_positional_model and args and not args[0].startswith("-"):
        flags.model = args[0]
        i = 1
    while i < len(args):
        token = args[i]
        if not token.startswith("-"):
            i += 1
            continue
        name = _flag_name(token)
        inline = token.split("=", 1)[1] if "=" in token else None
        if name == "--enable-lora":
            flags.lora_enabled = True
        if name == "--lora-modules":
            items = [inline] if inline is not None else []
            i += 1
            while i < len(args) and not args[i].startswith("-"):
                items.append(args[i])
                i += 1
            if not items:
                raise fail("--lora-modules", "needs at least one name=path or JSON value")
            flags.lora_modules.extend(_lora_name(item, fail) for item in items)
            continue
        if name not in _VALUE_FLAGS:
            i += 1
            continue
        if inline is not None:
            value, i = inline, i + 1
        else:
            if i + 1 >= len(args) or (args[i + 1].startswith("--") and args[i + 1] != "--"):
                raise fail(token, "needs a value")
            value, i = args[i + 1], i + 2
        if name == "--kv-cache-memory-bytes" and i < len(args) and _UNIT_WORD.fullmatch(args[i]):
            # `--kv-cache-memory 12 GB`: vLLM would read 12 bytes, then choke on "GB".
            raise fail(
                token.split("=", 1)[0],
                f"'{value} {args[i]}' is ambiguous: vLLM reads {value} as bytes and stops at "
                f"'{args[i]}'; write {value}G for {value} GiB, or the bytes as an int",
            )
        if name in flags.values:
            flags.repeated.append(name)
        flags.values[name] = (value, token.split("=", 1)[0])
        if name == "--model":
            flags.model = value
    return flags


def _lora_name(item: str, fail: Callable[[str, str], Exception]) -> str:
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


# ---------------------------------------------------------------------------------------------
# Finding the vLLM command in a service


def _vllm_args(argv: Sequence[str]) -> tuple[list[str], bool] | None:
    """The arguments after `vllm serve` or `-m vllm.entrypoints.openai.api_server`, if any.

    The bool says whether a positional model may come first (`vllm serve MODEL`).
    """
    for i, token in enumerate(argv):
        base = token.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(argv) and argv[i + 1] == "serve":
            return list(argv[i + 2 :]), True
        if token == "-m" and i + 1 < len(argv):
            module = argv[i + 1]
            if module == "vllm.entrypoints.openai.api_server":
                return list(argv[i + 2 :]), False
            if (
                module == "vllm.entrypoints.cli.main"
                and i + 2 < len(argv)
                and argv[i + 2] == "serve"
            ):
                return list(argv[i + 3 :]), True
    for i, token in enumerate(argv):
        # `bash -c "vllm serve …"`: split the string (never run it) and look inside.
        if (
            token.rsplit("/", 1)[-1] in _SHELLS
            and i + 2 < len(argv)
            and re.fullmatch(r"-[a-z]*c", argv[i + 1])
        ):
            try:
                lexer = shlex.shlex(argv[i + 2], posix=True, punctuation_chars=True)
                lexer.whitespace_split = True
                inner = list(lexer)
            except ValueError:
                return None
            found = _vllm_args(inner)
            if found is not None:
                args, positional = found
                for j, arg in enumerate(args):
                    if arg in _SHELL_OPERATORS:
                        return args[:j], positional
                return args, positional
    return None


_VLLM_IMAGE = re.compile(
    r"^(?:[^/]+\.[^/]+/|[^/]+:\d+/)?(?:docker\.io/)?vllm/vllm-openai(?::(?P<tag>[^@]+))?(?:@.*)?$"
)
_VERSION_TAG = re.compile(r"^v?(\d+\.\d+(?:\.\d+)?)(?:$|[-+].*)")


def image_version(image: str | None) -> tuple[bool, str | None]:
    """(is the vLLM image, its version when the tag is one): `vllm/vllm-openai:v0.11.0` → (True, '0.11.0')."""
    if not image:
        return False, None
    match = _VLLM_IMAGE.match(image.strip())
    if match is None:
        return False, None
    tag = match.group("tag")
    if tag is None:
        return True, None
    version = _VERSION_TAG.match(tag)
    return True, version.group(1) if version else None


# ---------------------------------------------------------------------------------------------
# Loading


def load_compose(
    path: str | Path,
    environ: Mapping[str, str],
    *,
    service: str | None = None,
) -> ComposeFile:
    """Read the compose file at `path` and return its vLLM services (or only `service`).

    Variables come from `environ` first, then from `.env` beside the file (compose's order).
    """
    name = str(path)
    text = _read_text(Path(path), name, MAX_DOCUMENT_BYTES)
    try:
        data = read_yaml(text, name)
    except CatalogueError as exc:
        raise ComposeError(name, None, None, exc.msg) from exc
    if not isinstance(data, dict):
        raise ComposeError(name, None, None, "a compose file is a mapping with `services:`")
    services = data.get("services")
    if not isinstance(services, dict) or not services:
        raise ComposeError(name, None, "services", "the file has no `services:` mapping to check")
    env_path = Path(path).parent / ".env"
    dotenv = (
        parse_env_file(_read_text(env_path, str(env_path), MAX_ENV_FILE_BYTES), str(env_path))
        if env_path.is_file()
        else {}
    )

    def lookup(variable: str) -> str | None:
        return environ.get(variable, dotenv.get(variable))

    if service is not None and service not in services:
        raise ComposeError(
            name, service, None, f"no such service (the file has {', '.join(map(str, services))})"
        )
    found: list[ComposeService] = []
    skipped: list[str] = []
    for key, body in services.items():
        label = str(key)
        if service is not None and label != service:
            continue
        if not isinstance(body, dict):
            raise ComposeError(name, label, None, "a service is a mapping (image:, command: …)")
        reader = _ServiceReader(name, label, body, lookup, Path(path).parent)
        parsed = reader.read(required=service is not None)
        if parsed is None:
            skipped.append(label)
        else:
            found.append(parsed)
    return ComposeFile(path=name, services=tuple(found), skipped=tuple(skipped))


def _read_text(path: Path, name: str, limit: int) -> str:
    try:
        return read_text_file(path, "a compose file", limit)
    except CatalogueError as exc:
        raise ComposeError(name, None, None, exc.msg) from exc


class _ServiceReader:
    """Reads one service; every error names the file, the service and the argument."""

    def __init__(
        self,
        path: str,
        name: str,
        body: dict[str, Any],
        lookup: Callable[[str], str | None],
        directory: Path,
    ) -> None:
        self.path = path
        self.name = name
        self.body = body
        self.lookup = lookup
        self.directory = directory
        self.strict = True

    def fail(self, argument: str | None, msg: str) -> ComposeError:
        return ComposeError(self.path, self.name, argument, msg)

    def text(self, value: object, where: str) -> str:
        """A scalar as text, interpolated; an unset variable is an error in strict mode."""
        if isinstance(value, bool):
            raw = "true" if value else "false"
        elif isinstance(value, int | float | str):
            raw = str(value)
        else:
            raise self.fail(where, f"expected text, got {type(value).__name__}")
        try:
            return interpolate(raw, self.lookup)
        except _MissingVariable as missing:
            if not self.strict:
                return self._lenient(raw)
            detail = f": {missing.message}" if missing.message else ""
            raise self.fail(
                where,
                f"variable {missing.name} is not set and has no default{detail} "
                f"(set it in the environment or in .env, or write ${{{missing.name}:-value}})",
            ) from None
        except ValueError as exc:
            raise self.fail(where, str(exc)) from None

    def _lenient(self, raw: str) -> str:
        # Only used to decide whether a service runs vLLM: unset variables read as empty.
        try:
            return interpolate(raw, lambda v: self.lookup(v) or "")
        except (_MissingVariable, ValueError):
            return raw

    def argv(self, key: str) -> list[str]:
        value = self.body.get(key)
        if value is None:
            return []
        if isinstance(value, str):
            text = self.text(value, key)
            try:
                return shlex.split(text)
            except ValueError as exc:
                raise self.fail(key, f"cannot split the command: {exc}") from None
        if isinstance(value, list):
            return [self.text(item, f"{key}[{i}]") for i, item in enumerate(value)]
        raise self.fail(key, f"expected a string or a list, got {type(value).__name__}")

    def read(self, *, required: bool) -> ComposeService | None:
        # First pass lenient: a non-vLLM service with an unset variable is not ours to refuse.
        self.strict = False
        if self._find() is None and not required:
            return None
        self.strict = True
        found = self._find()
        if found is None:
            raise self.fail(
                None,
                "runs no vLLM server (no `vllm serve`, no api_server module, no vllm/vllm-openai image)",
            )
        image, argv, args, positional = found
        is_vllm_image, version = image_version(image)
        flags = _read_flags(args, positional, self.fail)
        environment = self.environment()
        notes = [f"{flag} is given more than once; vLLM uses the last" for flag in flags.repeated]
        util_text = None
        kv_bytes = None
        if "--gpu-memory-utilization" in flags.values:
            value, written = flags.values["--gpu-memory-utilization"]
            try:
                util_text = parse_util(value)
            except ValueError as exc:
                raise self.fail(written, str(exc)) from None
        if "--kv-cache-memory-bytes" in flags.values:
            value, written = flags.values["--kv-cache-memory-bytes"]
            try:
                kv_bytes = vllm_bytes(value)
            except ValueError as exc:
                raise self.fail(written, str(exc)) from None
            if kv_bytes <= 0:
                raise self.fail(
                    written, f"{value!r} is no memory at all; give the KV cache's bytes"
                )
        devices, devices_from, count = self.devices()
        visible_text = environment.get("CUDA_VISIBLE_DEVICES")
        nvidia = environment.get("NVIDIA_VISIBLE_DEVICES")
        if devices is None and count is None and nvidia is not None:
            listed = _device_list(nvidia)
            if listed is not None:
                devices, devices_from = listed, "environment NVIDIA_VISIBLE_DEVICES"
            elif nvidia.strip().lower() == "all":
                devices_from = "environment NVIDIA_VISIBLE_DEVICES=all"
                count = -1
            else:
                raise self.fail(
                    "environment NVIDIA_VISIBLE_DEVICES", f"{nvidia!r} gives the service no card"
                )
        visible = None
        if visible_text is not None:
            visible = _device_list(visible_text)
            if visible is None:
                raise self.fail(
                    "environment CUDA_VISIBLE_DEVICES",
                    f"{visible_text!r} gives the service no card",
                )
        if count is not None and count > 0 and devices is None:
            notes.append(
                f"{devices_from} asks for {count} card(s) by count, not by id: "
                "docker picks them, so the check assumes the first ones; pin them with device_ids"
            )
        seat = self.body.get("x-gpuplan-seat")
        return ComposeService(
            name=self.name,
            path=self.path,
            image=image,
            version=version if is_vllm_image else None,
            model=flags.model,
            argv=tuple(argv),
            util_text=util_text,
            kv_cache_bytes=kv_bytes,
            max_loras=self.int_flag(flags, "--max-loras", 1),
            max_lora_rank=self.int_flag(flags, "--max-lora-rank", 1),
            lora_modules=tuple(flags.lora_modules),
            lora_enabled=flags.lora_enabled or bool(flags.lora_modules),
            runtime_lora=environment.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "").strip().lower()
            in {"1", "true"},
            port=self.port(flags),
            tensor_parallel_size=self.int_flag(flags, "--tensor-parallel-size", 1) or 1,
            pipeline_parallel_size=self.int_flag(flags, "--pipeline-parallel-size", 1) or 1,
            devices=devices,
            devices_from=devices_from,
            device_count=count,
            visible=visible,
            seat=self.text(seat, "x-gpuplan-seat") if seat is not None else None,
            notes=tuple(notes),
        )

    def _find(self) -> tuple[str | None, list[str], list[str], bool] | None:
        image = (
            self.text(self.body["image"], "image") if self.body.get("image") is not None else None
        )
        entrypoint = self.argv("entrypoint")
        command = self.argv("command")
        argv = entrypoint + command
        found = _vllm_args(argv)
        if found is not None:
            return image, argv, found[0], found[1]
        if image_version(image)[0] and not entrypoint:
            # The image's own entrypoint is vLLM's server: `command:` holds only its arguments.
            return image, ["vllm", "serve", *command], command, True
        return None

    def int_flag(self, flags: _Flags, name: str, minimum: int) -> int | None:
        if name not in flags.values:
            return None
        value, written = flags.values[name]
        try:
            number = int(value)
        except ValueError:
            raise self.fail(written, f"{value!r} is not a whole number") from None
        if number < minimum:
            raise self.fail(written, f"{number} is below {minimum}")
        return number

    def port(self, flags: _Flags) -> int | None:
        number = self.int_flag(flags, "--port", 1)
        if number is not None and number > 65535:
            raise self.fail(flags.values["--port"][1], f"{number} is not a TCP port")
        return number

    def environment(self) -> dict[str, str]:
        values: dict[str, str] = {}
        for env_file in self.env_files():
            values.update(env_file)
        raw = self.body.get("environment")
        if raw is None:
            return values
        if isinstance(raw, dict):
            for key, value in raw.items():
                if value is None:
                    inherited = self.lookup(str(key))
                    if inherited is not None:
                        values[str(key)] = inherited
                else:
                    values[str(key)] = self.text(value, f"environment {key}")
        elif isinstance(raw, list):
            for i, item in enumerate(raw):
                entry = self.text(item, f"environment[{i}]")
                key, sep, value = entry.partition("=")
                if sep:
                    values[key] = value
                else:
                    inherited = self.lookup(key)
                    if inherited is not None:
                        values[key] = inherited
        else:
            raise self.fail(
                "environment", f"expected a list or a mapping, got {type(raw).__name__}"
            )
        return values

    def env_files(self) -> list[dict[str, str]]:
        raw = self.body.get("env_file")
        if raw is None:
            return []
        entries = raw if isinstance(raw, list) else [raw]
        out: list[dict[str, str]] = []
        for i, entry in enumerate(entries):
            required = True
            if isinstance(entry, dict):
                required = bool(entry.get("required", True))
                entry = entry.get("path")
            if not isinstance(entry, str):
                raise self.fail(f"env_file[{i}]", "expected a file path")
            target = self.directory / self.text(entry, f"env_file[{i}]")
            if not target.is_file():
                if required:
                    raise self.fail(f"env_file[{i}]", f"{target} does not exist")
                continue
            out.append(
                parse_env_file(_read_text(target, str(target), MAX_ENV_FILE_BYTES), str(target))
            )
        return out

    def devices(self) -> tuple[tuple[str, ...] | None, str | None, int | None]:
        """(device ids, where they were written, count) from deploy reservations or `gpus:`."""
        ids: list[str] = []
        where: str | None = None
        count: int | None = None
        requests: list[tuple[str, object]] = []
        deploy = self.body.get("deploy")
        if isinstance(deploy, dict):
            resources = deploy.get("resources")
            reservations = resources.get("reservations") if isinstance(resources, dict) else None
            listed = reservations.get("devices") if isinstance(reservations, dict) else None
            if listed is not None:
                if not isinstance(listed, list):
                    raise self.fail("deploy.resources.reservations.devices", "expected a list")
                requests.extend(
                    (f"deploy.resources.reservations.devices[{i}]", item)
                    for i, item in enumerate(listed)
                )
        gpus = self.body.get("gpus")
        if gpus is not None:
            if isinstance(gpus, str) and self.text(gpus, "gpus").strip().lower() == "all":
                return None, "gpus: all", -1
            if not isinstance(gpus, list):
                raise self.fail("gpus", "expected `all` or a list of device requests")
            requests.extend((f"gpus[{i}]", item) for i, item in enumerate(gpus))
        for at, item in requests:
            if not isinstance(item, dict):
                raise self.fail(at, "expected a mapping (driver, count, device_ids, capabilities)")
            capabilities = item.get("capabilities")
            if isinstance(capabilities, list) and "gpu" not in [str(c) for c in capabilities]:
                continue
            if item.get("device_ids") is not None:
                listed_ids = item["device_ids"]
                if not isinstance(listed_ids, list) or not listed_ids:
                    raise self.fail(f"{at}.device_ids", "expected a non-empty list of card ids")
                ids.extend(self.text(v, f"{at}.device_ids").strip() for v in listed_ids)
                where = f"{at}.device_ids"
            elif item.get("count") is not None:
                raw_count = self.text(item["count"], f"{at}.count").strip().lower()
                if raw_count == "all":
                    count, where = -1, f"{at}.count"
                elif raw_count.isdigit() and int(raw_count) > 0:
                    count, where = int(raw_count), f"{at}.count"
                else:
                    raise self.fail(
                        f"{at}.count", f"{raw_count!r} is neither a positive number nor all"
                    )
        if ids:
            return tuple(ids), where, None
        return None, where, count


def _device_list(text: str) -> tuple[str, ...] | None:
    """'0,1' → ('0', '1'); None for 'all', 'none', 'void' or empty (the caller decides)."""
    cleaned = text.strip()
    if cleaned.lower() in {"", "all", "none", "void", "-1"}:
        return None
    return tuple(part.strip() for part in cleaned.split(",") if part.strip())


def resolve_cards(service: ComposeService, host: str, cards: Sequence[Card]) -> tuple[int, ...]:
    """The NVML indices the service's engine will use on `host`, or `ComposeError` naming the card.

    Host cards come from device ids (or all cards); CUDA_VISIBLE_DEVICES picks among them by
    position; vLLM then takes the first tensor × pipeline parallel of what it sees.
    """
    indices = sorted(card.index for card in cards)
    by_uuid = {card.uuid: card.index for card in cards if card.uuid}
    span = f"cards 0–{indices[-1]}" if indices == list(range(len(indices))) else f"cards {indices}"

    def host_card(token: str, where: str) -> int:
        if token.isdigit():
            if int(token) not in indices:
                raise ComposeError(
                    service.path,
                    service.name,
                    where,
                    f"host {host} has {span}; there is no card {token}",
                )
            return int(token)
        if token in by_uuid:
            return by_uuid[token]
        raise ComposeError(
            service.path,
            service.name,
            where,
            f"host {host} has no card {token!r} (by index or UUID)",
        )

    if not service.names_cards:
        raise ComposeError(
            service.path,
            service.name,
            "deploy.resources.reservations.devices",
            "the service names no card; give device_ids, CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES",
        )
    if service.devices is not None:
        seen = [host_card(token, service.devices_from or "devices") for token in service.devices]
    elif service.device_count is not None and service.device_count > 0:
        if service.device_count > len(indices):
            raise ComposeError(
                service.path,
                service.name,
                service.devices_from,
                f"asks for {service.device_count} cards; host {host} has {len(indices)}",
            )
        seen = indices[: service.device_count]
    else:
        seen = indices
    if service.visible is not None:
        chosen: list[int] = []
        for token in service.visible:
            where = "environment CUDA_VISIBLE_DEVICES"
            if token.isdigit() and service.devices is None and service.device_count is None:
                # The container sees every card of the host: positions are host indices.
                chosen.append(host_card(token, where))
            elif token.isdigit():
                position = int(token)
                if position >= len(seen):
                    raise ComposeError(
                        service.path,
                        service.name,
                        where,
                        f"index {position} but the container sees {len(seen)} card(s) ({', '.join(map(str, seen))} on {host})",
                    )
                chosen.append(seen[position])
            else:
                card = host_card(token, where)
                if card not in seen:
                    raise ComposeError(
                        service.path,
                        service.name,
                        where,
                        f"{token!r} is not among the container's cards",
                    )
                chosen.append(card)
        seen = chosen
    if len(seen) < service.world_size:
        raise ComposeError(
            service.path,
            service.name,
            "--tensor-parallel-size",
            f"the engine needs {service.world_size} cards and the container sees {len(seen)}",
        )
    return tuple(seen[: service.world_size])
