"""Loading a compose project: its files merged (project.py), then each service read on its own.

One bad service does not hide the others: its error is kept beside their records.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from placement.check.compose.model import ComposeError, ComposeFile, ComposeService
from placement.check.compose.project import load_project
from placement.check.compose.services import ServiceReader


def load_compose(
    path: str | Path | Sequence[str | Path],
    environ: Mapping[str, str],
    *,
    service: str | None = None,
    profiles: Collection[str] = (),
) -> ComposeFile:
    """Read the project at `path`: its GPU services (or `service` and what it depends on).

    One file is read as `docker compose up -d` reads it, with the override file beside it; a
    list of files as `docker compose -f A -f B` reads them, merged in order and alone.
    Variables come from `environ` first, then from `.env` beside the (first) file (compose's
    order). Services with `profiles:` are left out unless one of theirs is in `profiles` (or,
    with none given, in COMPOSE_PROFILES) or the service is named, as `docker compose up` does.
    """
    several = not isinstance(path, str | Path)
    paths = [Path(p) for p in path] if not isinstance(path, str | Path) else [Path(path)]
    if not paths:
        raise ComposeError("-", None, None, "no compose file given")
    name = str(paths[0])
    project = load_project(paths, environ, find_override=not several)
    if not project.services:
        raise ComposeError(name, None, "services", "the file has no `services:` mapping to check")
    services = project.services
    chosen = _selection(name, services, service, _profiles(profiles, project.lookup))
    found: list[ComposeService] = []
    errors: list[ComposeError] = []
    order: list[str] = []
    skipped: list[str] = []
    for label, body in services.items():
        origin = project.origins.get(label, name)
        lookup = project.lookups.get(label, project.lookup)
        reader = ServiceReader(origin, label, body, lookup, project.directory)
        try:
            if label not in chosen:
                _interpolate_left_out(reader)
                continue
            if not isinstance(body, dict):
                raise ComposeError(
                    origin, label, None, "a service is a mapping (image:, command: …)"
                )
            parsed = reader.read()
        except ComposeError as exc:
            if exc.service != label:
                # Every error of a service is its own, whatever file it names (an env file's).
                exc = ComposeError(exc.path, label, exc.argument, exc.msg)
            errors.append(exc)
            order.append(label)
            continue
        if parsed is None:
            skipped.append(label)
        else:
            found.append(parsed)
            order.append(label)
    return ComposeFile(
        name,
        tuple(found),
        tuple(skipped),
        tuple(errors),
        tuple(order),
        files=tuple(dict.fromkeys(project.files)),
        notes=tuple(project.notes),
    )


def _interpolate_left_out(reader: ServiceReader) -> None:
    """A service not started is still interpolated: docker compose reads every service of the
    file before it applies profiles or picks the services named, so `${VAR:?message}` with VAR
    unset in a profiled service refuses `docker compose up -d` for all of them."""
    try:
        reader.scan(reader.body, "")
    except ComposeError as exc:
        raise ComposeError(
            exc.path,
            exc.service,
            exc.argument,
            f"{exc.msg} (the service is not started, but docker compose interpolates every "
            "service of the file before it applies profiles, and refuses the whole file)",
        ) from None


def _profiles(given: Collection[str], lookup: Callable[[str], str | None]) -> set[str]:
    """--profile, else COMPOSE_PROFILES (environment, then .env), as compose-go's WithDefaultProfiles.

    compose-go splits the variable as it is, unset read as "": with neither, the one profile
    enabled is "" (NVIDIA's RAG blueprint starts its default services with `profiles: ["", …]`).
    """
    if given:
        return set(given)
    listed = lookup("COMPOSE_PROFILES") or ""
    return {part.strip() for part in listed.split(",")}


def _selection(
    name: str, services: dict[str, Any], service: str | None, profiles: set[str]
) -> list[str]:
    """The services `docker compose up -d [S]` starts, in file order."""
    if service is None:
        chosen = [label for label, body in services.items() if _enabled(body, profiles)]
        if not chosen:
            raise ComposeError(name, None, "profiles", _none_selected(services, profiles))
        return chosen
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


def _none_selected(services: dict[str, Any], profiles: set[str]) -> str:
    """docker compose up -d refuses a project whose every service is behind a profile not
    enabled ("no service selected"); say which profiles would start what."""
    enabled = ", ".join(sorted(p for p in profiles if p)) or "none"
    behind = "; ".join(
        f"{label}: {', '.join(map(str, body.get('profiles') or ()))}"
        for label, body in services.items()
        if isinstance(body, dict)
    )
    return (
        f"no service selected, as `docker compose up -d` says: every service is behind a profile "
        f"not enabled (enabled: {enabled}; {behind}); name one with --profile or COMPOSE_PROFILES"
    )


def _enabled(body: Any, profiles: set[str]) -> bool:
    listed = body.get("profiles") if isinstance(body, dict) else None
    # "*" enables every profile (compose-go types.Project.WithProfiles).
    return not listed or "*" in profiles or bool(profiles & {str(p) for p in listed})


def _depends_on(body: Any) -> list[str]:
    raw = body.get("depends_on") if isinstance(body, dict) else None
    return [str(item) for item in raw] if isinstance(raw, dict | list) else []
