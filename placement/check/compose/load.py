"""Loading a compose file: safe YAML, `.env` beside it, then each service read on its own.

One bad service does not hide the others: its error is kept beside their records.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from placement.check.compose.interpolation import parse_env_file
from placement.check.compose.model import ComposeError, ComposeFile, ComposeService
from placement.check.compose.services import MAX_ENV_FILE_BYTES, ServiceReader, read_text
from seats.errors import CatalogueError
from seats.loader import MAX_DOCUMENT_BYTES, read_yaml


def load_compose(
    path: str | Path,
    environ: Mapping[str, str],
    *,
    service: str | None = None,
    profiles: Collection[str] = (),
) -> ComposeFile:
    """Read the compose file at `path`: its GPU services (or `service` and what it depends on).

    Variables come from `environ` first, then from `.env` beside the file (compose's order).
    Services with `profiles:` are left out unless one of theirs is in `profiles` (or the
    service is named), as `docker compose up` does.
    """
    name = str(path)
    services = _services(name, _read_document(Path(path), name))
    dotenv = _dotenv(Path(path).parent / ".env")

    def lookup(variable: str) -> str | None:
        return environ.get(variable, dotenv.get(variable))

    chosen = _selection(name, services, service, set(profiles))
    found: list[ComposeService] = []
    errors: list[ComposeError] = []
    order: list[str] = []
    skipped: list[str] = []
    for label in chosen:
        body = services[label]
        try:
            if not isinstance(body, dict):
                raise ComposeError(name, label, None, "a service is a mapping (image:, command: …)")
            parsed = ServiceReader(name, label, body, lookup, Path(path).parent).read()
        except ComposeError as exc:
            errors.append(exc)
            order.append(label)
            continue
        if parsed is None:
            skipped.append(label)
        else:
            found.append(parsed)
            order.append(label)
    return ComposeFile(name, tuple(found), tuple(skipped), tuple(errors), tuple(order))


def _read_document(path: Path, name: str) -> Any:
    text = read_text(path, name, MAX_DOCUMENT_BYTES)
    try:
        return read_yaml(text, name)
    except CatalogueError as exc:
        raise ComposeError(name, None, None, exc.msg) from exc


def _services(name: str, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ComposeError(name, None, None, "a compose file is a mapping with `services:`")
    if "include" in data:
        raise ComposeError(
            name,
            None,
            "include",
            "include: is not merged yet; run `docker compose -f FILE config > merged.yaml` "
            "and check merged.yaml",
        )
    services = data.get("services")
    if not isinstance(services, dict) or not services:
        raise ComposeError(name, None, "services", "the file has no `services:` mapping to check")
    return {str(key): body for key, body in services.items()}


def _dotenv(env_path: Path) -> dict[str, str]:
    if not env_path.is_file():
        return {}
    return parse_env_file(read_text(env_path, str(env_path), MAX_ENV_FILE_BYTES), str(env_path))


def _selection(
    name: str, services: dict[str, Any], service: str | None, profiles: set[str]
) -> list[str]:
    """The services `docker compose up -d [S]` starts, in file order."""
    if service is None:
        return [label for label, body in services.items() if _enabled(body, profiles)]
    if service not in services:
        raise ComposeError(
            name, service, None, f"no such service (the file has {', '.join(services)})"
        )
    wanted = {service}
    todo = [service]
    while todo:
        for dependency in _depends_on(services[todo.pop()]):
            if dependency not in services:
                raise ComposeError(
                    name, service, "depends_on", f"{dependency!r} is not a service of the file"
                )
            if dependency not in wanted:
                wanted.add(dependency)
                todo.append(dependency)
    return [label for label in services if label in wanted]


def _enabled(body: Any, profiles: set[str]) -> bool:
    listed = body.get("profiles") if isinstance(body, dict) else None
    return not listed or bool(profiles & {str(p) for p in listed})


def _depends_on(body: Any) -> list[str]:
    raw = body.get("depends_on") if isinstance(body, dict) else None
    return [str(item) for item in raw] if isinstance(raw, dict | list) else []
