"""One compose service read into a `ComposeService`: its command, flags, environment and cards.

Every error names the file, the service and the field; nothing in the service is run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from placement.check.compose.config import config_args, host_path
from placement.check.compose.devices import Devices, asks_for_gpu, device_list, read_devices
from placement.check.compose.dotenv import read_env_file
from placement.check.compose.interpolation import MissingVariable, substitute
from placement.check.compose.model import ComposeError, ComposeService
from placement.fit.engines.base import EngineRule, FlagError, ServerArgs, split_command
from placement.fit.engines.note import Said
from placement.fit.engines.registry import KINDS, engines, recognise
from placement.fit.engines.registry import engine as registry_engine

# An engine whose service is read flag by flag, its image, and where its arguments are.
Found = tuple[EngineRule, str | None, ServerArgs]
# The variables read from every service (its cards); its engine adds its own (`variables`).
_READ_VARIABLES = frozenset({"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"})


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
        # The env files' values, read once however often the environment is asked for.
        self._env_files: list[dict[str, str]] | None = None
        self._read_variables = _READ_VARIABLES

    def fail(self, argument: str | None, msg: str) -> ComposeError:
        return ComposeError(self.path, self.name, argument, msg)

    def text(self, value: object, where: str, *, strict: bool | None = None) -> str:
        """A scalar as text, interpolated; an unset variable is an error where gpuplan reads it."""
        if isinstance(value, bool):
            raw = "true" if value else "false"
        elif isinstance(value, int | float | str):
            raw = str(value)
        else:
            raise self.fail(where, f"expected text, got {type(value).__name__}")
        try:
            result = substitute(raw, self.lookup)
        except MissingVariable as missing:
            detail = f": {missing.message}" if missing.message else ""
            raise self.fail(where, f"required variable {missing.name} is not set{detail}") from None
        except ValueError as exc:
            raise self.fail(where, str(exc)) from None
        if result.missing and (self.strict if strict is None else strict):
            name = result.missing[0]
            raise self.fail(
                where,
                f"variable {name} is not set and has no default "
                f"(set it in the environment or in .env, or write ${{{name}:-value}})",
            )
        return result.text

    def scan(self, value: object, where: str) -> None:
        """Interpolate every value of the service: `${VAR:?…}` and bad templates refuse it anywhere."""
        if isinstance(value, dict):
            for key, item in value.items():
                self.scan(item, f"{where}.{key}" if where else str(key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self.scan(item, f"{where}[{i}]")
        elif isinstance(value, str):
            self.text(value, where, strict=False)

    def argv(self, key: str) -> list[str]:
        value = self.body.get(key)
        if value is None:
            return []
        if isinstance(value, str):
            text = self.text(value, key)
            try:
                return split_command(text)
            except ValueError as exc:
                raise self.fail(key, f"cannot split the command: {exc}") from None
        if isinstance(value, list):
            return [self.text(item, f"{key}[{i}]") for i, item in enumerate(value)]
        raise self.fail(key, f"expected a string or a list, got {type(value).__name__}")

    def read(self) -> ComposeService | None:
        """The service as gpuplan judges it; None when it asks for no GPU and runs no engine
        whose arguments are read flag by flag (`server_args`)."""
        self.scan(self.body, "")
        if not asks_for_gpu(self.body):
            # Not ours to refuse: an unset variable here is compose's "" (lenient).
            self.strict = False
            if self._find(self._declared_engine()) is None:
                return None
        self.strict = True
        engine = self._declared_engine()
        return self._service(self._find(engine), engine)

    def _declared_engine(self) -> str | None:
        raw = self.body.get("x-gpuplan-engine")
        if raw is None:
            return None
        engine = self.text(raw, "x-gpuplan-engine").strip().lower()
        if engine not in KINDS:
            raise self.fail(
                "x-gpuplan-engine", f"{engine!r} is no engine kind; kinds: {', '.join(KINDS)}"
            )
        return engine

    def _service(self, found: Found | None, engine: str | None) -> ComposeService:
        if found is None:
            return self._other(self.environment(), engine)
        rule, image, where = found
        self._read_variables = _READ_VARIABLES | set(rule.variables)
        environment = self.environment()
        version = rule.version_of(image)
        args, unknown = list(where.args), None
        flag = rule.config_flag
        if flag is not None and (flag in args or any(a.startswith(flag + "=") for a in args)):
            args, unknown = self._with_config(rule, flag, args, where.positional)
        read = rule.read_service(args, where.positional, environment, version, self.fail)
        notes: list[Said] = list(read.notes)
        devices, devices_from, count = self._cards(environment)
        if count is not None and count > 0 and devices is None:
            notes.append(
                f"{devices_from} asks for {count} card(s) by count, not by id: "
                "docker picks them, so the check assumes the first ones; pin them with device_ids"
            )
        return ComposeService(
            name=self.name,
            path=self.path,
            image=image,
            version=version,
            model=read.model,
            argv=where.argv,
            util_text=read.util_text,
            kv_cache_bytes=read.kv_cache_bytes,
            max_loras=read.count("max_loras"),
            max_lora_rank=read.count("max_lora_rank"),
            lora_modules=read.lora_modules,
            lora_enabled=read.lora_enabled,
            runtime_lora=read.runtime_lora,
            port=read.port,
            tensor_parallel_size=read.count("tensor_parallel_size") or 1,
            pipeline_parallel_size=read.count("pipeline_parallel_size") or 1,
            data_parallel_size=read.count("data_parallel_size") or 1,
            max_model_len=read.max_model_len,
            kv_cache_dtype=read.kv_cache_dtype,
            engine_fields=read.engine_fields,
            devices=devices,
            devices_from=devices_from,
            device_count=count,
            visible=self._visible(environment),
            seat=self._seat(),
            engine=rule.kind,
            notes=tuple(notes),
            replicas=self._replicas(),
            depends_on=self.depends_on(),
            unknown=unknown,
        )

    def _other(self, environment: dict[str, str], declared: str | None) -> ComposeService:
        """A GPU service read whole: its cards, seat and engine (recognised by command or image,
        or declared), with the engine fields its flags set; its resident only a catalogue seat
        can say."""
        devices, devices_from, count = self._cards(environment)
        raw = self.body.get("image")
        image = self.text(raw, "image") if raw is not None else None
        argv = self.argv("entrypoint") + self.argv("command")
        found = recognise(argv, image, declared)
        if found is not None and found.util_request:
            # Its arguments were looked for (`server_args`) and not found (a wrapper script):
            # unknown.
            found = None
        version = found.version_of(image) if found is not None else None
        fields: dict[str, object] = {}
        cards: int | None = 1
        cards_from = None
        if found is not None:
            try:
                # Its engine's own parser, once for each answer (DESIGN.md, Engines: flags as
                # the engine's own parser reads them; a flag or value it stops at is bad input).
                fields = found.read_flags(argv, environment, version)
                cards = found.cards_of(argv, environment, version)
                cards_from = found.cards_flag(argv, environment, version)
            except FlagError as exc:
                raise self.fail(exc.flag, exc.why) from None
        return ComposeService(
            name=self.name,
            path=self.path,
            image=image,
            version=version,
            model=None,
            argv=tuple(argv),
            engine_fields=tuple(sorted(fields.items())),
            tensor_parallel_size=cards or 1,
            all_cards=cards is None,
            cards_from=cards_from,
            devices=devices,
            devices_from=devices_from,
            device_count=count,
            visible=self._visible(environment),
            seat=self._seat(),
            engine=found.kind if found is not None else None,
            replicas=self._replicas(),
            depends_on=self.depends_on(),
        )

    def _seat(self) -> str | None:
        seat = self.body.get("x-gpuplan-seat")
        return self.text(seat, "x-gpuplan-seat") if seat is not None else None

    def _with_config(
        self, rule: EngineRule, flag: str, args: list[str], positional: bool
    ) -> tuple[list[str], str | None]:
        """Its engine's config flag (`--config FILE`): the file's flags put before the command
        line's (which win), or why unknown."""
        at = next(i for i, a in enumerate(args) if a == flag or a.startswith(flag + "="))
        if "=" in args[at]:
            target, rest = args[at].split("=", 1)[1], args[:at] + args[at + 1 :]
        elif at + 1 < len(args):
            target, rest = args[at + 1], args[:at] + args[at + 2 :]
        else:
            raise self.fail(flag, "needs a value")
        found = host_path(target, self.body.get("volumes"), self.directory)
        if found is None:
            return rest, (
                f"its {rule.title} {flag} {target} is not mounted from beside the compose file, "
                "so its util, KV cache and parallel size are unknown"
            )
        # `vllm serve MODEL …`: the model stays first; the file's flags go before the command line's.
        head = 1 if positional and rest and not rest[0].startswith("-") else 0
        return rest[:head] + config_args(found, self.path, self.name) + rest[head:], None

    def _replicas(self) -> int:
        deploy = self.body.get("deploy")
        raw = deploy.get("replicas") if isinstance(deploy, dict) else None
        where = "deploy.replicas"
        if raw is None:
            raw, where = self.body.get("scale"), "scale"
        if raw is None:
            return 1
        text = self.text(raw, where).strip()
        if not text.isdigit():
            raise self.fail(where, f"{text!r} is not a whole number of replicas")
        return int(text)

    def depends_on(self) -> tuple[str, ...]:
        """The services `docker compose up -d` starts with this one (list or mapping form)."""
        raw = self.body.get("depends_on")
        if raw is None:
            return ()
        if isinstance(raw, dict | list):
            return tuple(str(name) for name in raw)
        raise self.fail("depends_on", "expected a list or a mapping of service names")

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

    def _find(self, engine: str | None) -> Found | None:
        image = (
            self.text(self.body["image"], "image") if self.body.get("image") is not None else None
        )
        entrypoint = self.argv("entrypoint")
        command = self.argv("command")
        argv = entrypoint + command
        # A declared engine alone is asked; else each engine, in recognition order.
        for rule in (registry_engine(engine),) if engine is not None else engines():
            where = rule.server_args(
                argv,
                image,
                command,
                entrypoint=bool(entrypoint),
                declared=engine is not None,
                expand=self._expand,
            )
            if where is not None:
                return rule, image, where
        return None  # read whole by its own module (`_other`), or no engine

    def _expand(self, script: str) -> str:
        """A `bash -c` script's `$VAR` as the shell reads it: from the container's environment."""
        environment = self.environment()
        try:
            return substitute(script, lambda name: environment.get(name)).text
        except (MissingVariable, ValueError):
            return script

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
                (str(key), None if value is None else self._env_value(str(key), value))
                for key, value in raw.items()
            ]
        if isinstance(raw, list):
            entries: list[tuple[str, str | None]] = []
            for i, item in enumerate(raw):
                key = str(item).split("=", 1)[0]
                text = self._env_value(key, item, f"environment[{i}]")
                _, sep, value = text.partition("=")
                entries.append((key, value if sep else None))
            return entries
        raise self.fail("environment", f"expected a list or a mapping, got {type(raw).__name__}")

    def _env_value(self, key: str, value: object, where: str | None = None) -> str:
        # Only the visible-devices variables are read: elsewhere an unset variable is compose's "".
        strict = self.strict and key in self._read_variables
        return self.text(value, where or f"environment {key}", strict=strict)

    def env_files(self) -> list[dict[str, str]]:
        """Each `env_file:` entry's values, in order, read as compose-go reads them
        (types/project.go WithServicesEnvironmentResolved): a value is interpolated from the
        project's environment, then the service's `environment:`, then what the files before set.
        A file that cannot be read or parsed is an error of this service naming the file and the
        line, never its content."""
        if self._env_files is not None:
            return self._env_files
        raw = self.body.get("env_file")
        if raw is None:
            return []
        entries = raw if isinstance(raw, list) else [raw]
        environment: dict[str, str] = {}
        for key, value in self._env_entries():
            if value is not None:
                environment[key] = value

        def resolve(variable: str) -> str | None:
            found = self.lookup(variable)
            return found if found is not None else environment.get(variable)

        out: list[dict[str, str]] = []
        known: dict[str, str] = {}
        for i, entry in enumerate(entries):
            where = f"env_file[{i}]"
            target = self._env_file(entry, where)
            if target is None:
                continue
            try:
                values = read_env_file(target, resolve, known)
            except ComposeError as exc:
                raise self.fail(where, str(exc)) from None
            known.update(values)
            out.append(values)
        self._env_files = out
        return out

    def _env_file(self, entry: object, where: str) -> Path | None:
        """The file an `env_file:` entry names; None for a missing one that is not required
        (compose-go types/project.go loadEnvFile skips only a missing file, nothing else)."""
        required = True
        if isinstance(entry, dict):
            required = bool(entry.get("required", True))
            entry = entry.get("path")
        if not isinstance(entry, str):
            raise self.fail(where, "expected a file path")
        target = self.directory / self.text(entry, where)
        if not required:
            try:
                os.stat(target)
            except FileNotFoundError:
                return None
            except OSError:
                pass  # not missing: read, and refused with its reason
        return target
