"""One compose service read into a `ComposeService`: its command, flags, environment and cards.

Every error names the file, the service and the field; nothing in the service is run.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from placement.check.compose.commands import image_version, vllm_args
from placement.check.compose.devices import Devices, device_list, read_devices
from placement.check.compose.flags import Flags, parse_util, read_flags, vllm_bytes
from placement.check.compose.interpolation import MissingVariable, interpolate, parse_env_file
from placement.check.compose.model import ComposeError, ComposeService
from seats.errors import CatalogueError
from seats.loader import read_text_file

MAX_ENV_FILE_BYTES = 256 * 1024

Found = tuple[str | None, list[str], list[str], bool]


def read_text(path: Path, name: str, limit: int) -> str:
    """A file's text, or a `ComposeError` naming it."""
    try:
        return read_text_file(path, "a compose file", limit)
    except CatalogueError as exc:
        raise ComposeError(name, None, None, exc.msg) from exc


class ServiceReader:
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
        except MissingVariable as missing:
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
        except (MissingVariable, ValueError):
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
        return self._service(found)

    def _service(self, found: Found) -> ComposeService:
        image, argv, args, positional = found
        is_vllm_image, version = image_version(image)
        flags = read_flags(args, positional, self.fail)
        environment = self.environment()
        notes = [f"{flag} is given more than once; vLLM uses the last" for flag in flags.repeated]
        devices, devices_from, count = self._cards(environment)
        visible = self._visible(environment)
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
            util_text=self._util(flags),
            kv_cache_bytes=self._kv_bytes(flags),
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

    def _util(self, flags: Flags) -> str | None:
        if "--gpu-memory-utilization" not in flags.values:
            return None
        value, written = flags.values["--gpu-memory-utilization"]
        try:
            return parse_util(value)
        except ValueError as exc:
            raise self.fail(written, str(exc)) from None

    def _kv_bytes(self, flags: Flags) -> int | None:
        if "--kv-cache-memory-bytes" not in flags.values:
            return None
        value, written = flags.values["--kv-cache-memory-bytes"]
        try:
            kv_bytes = vllm_bytes(value)
        except ValueError as exc:
            raise self.fail(written, str(exc)) from None
        if kv_bytes <= 0:
            raise self.fail(written, f"{value!r} is no memory at all; give the KV cache's bytes")
        return kv_bytes

    def _cards(self, environment: dict[str, str]) -> Devices:
        """Device requests, else NVIDIA_VISIBLE_DEVICES (the nvidia runtime's own variable)."""
        devices, devices_from, count = read_devices(self, self.body)
        nvidia = environment.get("NVIDIA_VISIBLE_DEVICES")
        if devices is not None or count is not None or nvidia is None:
            return devices, devices_from, count
        listed = device_list(nvidia)
        if listed is not None:
            return listed, "environment NVIDIA_VISIBLE_DEVICES", None
        if nvidia.strip().lower() == "all":
            return None, "environment NVIDIA_VISIBLE_DEVICES=all", -1
        raise self.fail(
            "environment NVIDIA_VISIBLE_DEVICES", f"{nvidia!r} gives the service no card"
        )

    def _visible(self, environment: dict[str, str]) -> tuple[str, ...] | None:
        visible_text = environment.get("CUDA_VISIBLE_DEVICES")
        if visible_text is None:
            return None
        visible = device_list(visible_text)
        if visible is None:
            raise self.fail(
                "environment CUDA_VISIBLE_DEVICES", f"{visible_text!r} gives the service no card"
            )
        return visible

    def _find(self) -> Found | None:
        image = (
            self.text(self.body["image"], "image") if self.body.get("image") is not None else None
        )
        entrypoint = self.argv("entrypoint")
        command = self.argv("command")
        argv = entrypoint + command
        found = vllm_args(argv)
        if found is not None:
            return image, argv, found[0], found[1]
        if image_version(image)[0] and not entrypoint:
            # The image's own entrypoint is vLLM's server: `command:` holds only its arguments.
            return image, ["vllm", "serve", *command], command, True
        return None

    def int_flag(self, flags: Flags, name: str, minimum: int) -> int | None:
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

    def port(self, flags: Flags) -> int | None:
        number = self.int_flag(flags, "--port", 1)
        if number is not None and number > 65535:
            raise self.fail(flags.values["--port"][1], f"{number} is not a TCP port")
        return number

    def environment(self) -> dict[str, str]:
        values: dict[str, str] = {}
        for env_file in self.env_files():
            values.update(env_file)
        for key, value in self._env_entries():
            if value is not None:
                values[key] = value
            elif (inherited := self.lookup(key)) is not None:
                # A bare `KEY` passes the variable through from where compose runs.
                values[key] = inherited
        return values

    def _env_entries(self) -> list[tuple[str, str | None]]:
        """`environment:` as (key, interpolated value or None for a bare key)."""
        raw = self.body.get("environment")
        if raw is None:
            return []
        if isinstance(raw, dict):
            return [
                (str(key), None if value is None else self.text(value, f"environment {key}"))
                for key, value in raw.items()
            ]
        if isinstance(raw, list):
            entries: list[tuple[str, str | None]] = []
            for i, item in enumerate(raw):
                key, sep, value = self.text(item, f"environment[{i}]").partition("=")
                entries.append((key, value if sep else None))
            return entries
        raise self.fail("environment", f"expected a list or a mapping, got {type(raw).__name__}")

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
                parse_env_file(read_text(target, str(target), MAX_ENV_FILE_BYTES), str(target))
            )
        return out
