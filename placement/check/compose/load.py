"""Loading a compose file: safe YAML, `.env` beside it, then each service read on its own."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

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
) -> ComposeFile:
    """Read the compose file at `path` and return its vLLM services (or only `service`).

    Variables come from `environ` first, then from `.env` beside the file (compose's order).
    """
    name = str(path)
    text = read_text(Path(path), name, MAX_DOCUMENT_BYTES)
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
        parse_env_file(read_text(env_path, str(env_path), MAX_ENV_FILE_BYTES), str(env_path))
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
        reader = ServiceReader(name, label, body, lookup, Path(path).parent)
        parsed = reader.read(required=service is not None)
        if parsed is None:
            skipped.append(label)
        else:
            found.append(parsed)
    return ComposeFile(path=name, services=tuple(found), skipped=tuple(skipped))
