"""The project `docker compose up -d` would start: the files it reads, merged as compose-go merges them.

A single file is read with the override file docker finds beside it (`compose.override.yml` …),
several files (`-f A -f B`) in order and alone; `include:` and `extends:` are merged with
compose-go's rules (loader/include.go and loader/extends.go at e70e961c): paths relative to the
file that names them, an include's `project_directory` and `env_file`, the including file's own
definition over an included service. Nothing is run; only `include`/`extends` names are
interpolated here, the rest of each service when it is read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement.check.compose.dotenv import read_dotenv, read_env_file
from placement.check.compose.interpolation import MissingVariable, substitute
from placement.check.compose.merge import (
    MergeError,
    copy_tree,
    enforce_unicity,
    extend_service,
    merge_yaml,
)
from placement.check.compose.model import ComposeError
from seats.errors import CatalogueError
from seats.loader import MAX_DOCUMENT_BYTES, TAG_KEY, read_text_file, read_yaml
from seats.names import NAME_RULE, unprintable, visible

Lookup = Callable[[str], str | None]
MAX_FILES = 64  # includes and extends together: a project is a handful of files

# compose-go cli/options.go: DefaultFileNames and DefaultOverrideFileNames, in order of preference.
DEFAULT_FILES = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml")
OVERRIDE_FILES = (
    "compose.override.yml",
    "compose.override.yaml",
    "docker-compose.override.yml",
    "docker-compose.override.yaml",
)


@dataclass
class Project:
    """The merged services, where each came from, and what was merged (said in the output)."""

    files: list[str]
    directory: Path
    lookup: Lookup
    services: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    lookups: dict[str, Lookup] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def read_document(path: Path, name: str) -> Any:
    """A compose file's YAML (safe, size-capped), or a ComposeError naming it."""
    try:
        text = read_text_file(path, "a compose file", MAX_DOCUMENT_BYTES)
        return read_yaml(text, name, keep_tags=RESET_TAGS)
    except CatalogueError as exc:
        raise ComposeError(name, None, None, exc.msg) from exc


# compose-go loader/reset.go: `!reset` drops what the files before set at that path (and the
# value beside the tag); `!override` replaces it whole instead of merging.
RESET_TAGS = frozenset({"!reset", "!override"})


def strip_tags(value: Any, path: tuple[str, ...] = ()) -> tuple[Any, list[tuple[str, ...]]]:
    """`value` with its `!reset` entries dropped and `!override` values unwrapped, and the paths
    of both: what the files before set there is cleared before this file is merged."""
    cleared: list[tuple[str, ...]] = []
    if isinstance(value, dict):
        if TAG_KEY in value:
            tag, inner = value[TAG_KEY], value.get("value")
            inner, below = strip_tags(inner, path)
            return (_RESET if tag == "!reset" else inner), [path, *below]
        out: dict[str, Any] = {}
        for key, item in value.items():
            item, below = strip_tags(item, (*path, str(key)))
            cleared += below
            if item is not _RESET:
                out[key] = item
        return out, cleared
    if isinstance(value, list):
        items = []
        for i, item in enumerate(value):
            item, below = strip_tags(item, (*path, str(i)))
            cleared += [p for p in below if p != (*path, str(i))]
            if item is not _RESET:
                items.append(item)
        return items, cleared
    return value, cleared


_RESET = object()


def clear(services: dict[str, Any], paths: list[tuple[str, ...]], label: str | None = None) -> None:
    """Delete each `services.NAME.…` path of `paths` from `services` (only NAME = `label` if given)."""
    for path in paths:
        if len(path) < 2 or path[0] != "services" or (label is not None and path[1] != label):
            continue
        if len(path) == 2:
            services.pop(path[1], None)
            continue
        node = services.get(path[1])
        for key in path[2:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)


def override_beside(path: Path) -> tuple[Path | None, list[str]]:
    """The override file `docker compose up -d` reads with `path`, and notes on what it did.

    Docker reads an override only beside the file it found itself (a default name, the first
    one present); a file given with `-f` is read alone.
    """
    directory = path.parent
    present = [name for name in OVERRIDE_FILES if (directory / name).is_file()]
    if not present:
        return None, []
    found = next((name for name in DEFAULT_FILES if (directory / name).is_file()), None)
    if found is None or (directory / found).resolve() != path.resolve():
        return None, [
            f"{directory / present[0]} is not merged: `docker compose up -d` reads it only with "
            f"{found or DEFAULT_FILES[0]}, and `docker compose -f {path}` does not read it"
        ]
    notes = [f"merged {directory / present[0]} over {path}, as `docker compose up -d` does"]
    if len(present) > 1:
        notes.append(f"several override files ({', '.join(present)}): docker uses {present[0]}")
    return directory / present[0], notes


def load_project(
    paths: Sequence[Path], environ: Mapping[str, str], *, find_override: bool
) -> Project:
    """Every file of the project merged in order, with includes and extends applied."""
    first = paths[0]
    files = list(paths)
    notes: list[str] = []
    if find_override and len(paths) == 1:
        extra, notes = override_beside(first)
        files += [extra] if extra is not None else []
    elif len(paths) > 1:
        flags = " ".join(f"-f {p}" for p in paths)
        notes = [
            f"merged {', '.join(map(str, paths[1:]))} over {first} in order, as `docker compose {flags}` does"
        ]
    directory = first.parent
    dotenv = read_dotenv(directory, environ.get)

    def lookup(variable: str) -> str | None:
        return environ.get(variable, dotenv.get(variable))

    project = Project([str(p) for p in files], directory, lookup, notes=notes)
    loader = _Loader(project)
    for path in files:
        loader.file(path, directory, lookup, chain=())
    return project


class _Loader:
    def __init__(self, project: Project) -> None:
        self.project = project
        self.read = 0
        # Files named by `extends.file` (their services and !reset/!override paths), read once
        # each however many services extend them.
        self.extended_files: dict[Path, tuple[dict[str, Any], list[tuple[str, ...]]]] = {}

    def document(self, path: Path, name: str, why: str | None) -> dict[str, Any]:
        self.read += 1
        if self.read > MAX_FILES:
            raise ComposeError(name, None, None, f"more than {MAX_FILES} files to merge")
        if not path.is_file():
            raise ComposeError(name, None, why, f"{path} does not exist" if why else "no such file")
        data = read_document(path, str(path))
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ComposeError(
                str(path), None, None, "a compose file is a mapping with `services:`"
            )
        return data

    def extends_file(self, path: Path, name: str) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
        """The services of a file that `extends.file` names (never changed by extending them),
        and its !reset/!override paths."""
        key = path.resolve()
        if key not in self.extended_files:
            data, cleared = strip_tags(self.document(path, name, "extends.file"))
            self.extended_files[key] = (_services_of(data, str(path)), cleared)
            self.project.files.append(str(path))
        return self.extended_files[key]

    def file(self, path: Path, workdir: Path, lookup: Lookup, chain: tuple[Path, ...]) -> None:
        """One file of the project (or of an include) merged over what is there.

        compose-go's order: its includes imported (its own definitions over theirs), then its
        extends applied, then the file merged over the files before it.
        """
        name = str(path)
        data, cleared = strip_tags(self.document(path, name, None))
        services = _services_of(data, name)
        origins = {label: name for label in services}
        for include in _list(data.get("include"), name, "include"):
            self.include(
                include, path, workdir, lookup, (*chain, path.resolve()), services, origins
            )
        self.extends(services, path, workdir, lookup, cleared)
        clear(self.project.services, cleared)
        for label, body in services.items():
            self.project.origins.setdefault(label, origins[label])
            self.put(label, body, name, ("services", label))

    def put(self, label: str, body: Any, name: str, where: tuple[str, ...]) -> None:
        """`body` merged over the service so far; compose-go's loader then enforces unicity
        after every file (loader.go: `override.Merge`, then `override.EnforceUnicity`)."""
        old = self.project.services.get(label)
        try:
            merged = body if old is None else merge_yaml(old, body, where)
        except MergeError as exc:
            raise ComposeError(name, label, None, str(exc)) from None
        self.project.services[label] = enforce_unicity(merged, where)

    def include(
        self,
        entry: Any,
        parent: Path,
        workdir: Path,
        lookup: Lookup,
        chain: tuple[Path, ...],
        services: dict[str, Any],
        origins: dict[str, str],
    ) -> None:
        """compose-go ApplyInclude: a sub-project with its own env, its services imported."""
        name = str(parent)
        if isinstance(entry, str):
            entry = {"path": entry}
        if not isinstance(entry, dict):
            raise ComposeError(name, None, "include", "an entry is a path or a mapping with path:")
        paths = _include_paths(entry, workdir, lookup, name)
        if paths[0].resolve() in chain:
            raise ComposeError(
                name, None, "include", f"include cycle: {paths[0]} is included again"
            )
        project_dir = paths[0].parent
        if entry.get("project_directory") is not None:
            project_dir = workdir / _text(entry["project_directory"], lookup, name, "include")
        values = _include_env(entry, workdir, project_dir, lookup, name)

        def inner(variable: str) -> str | None:
            # compose-go: the including project's environment wins over the include's env files.
            found = lookup(variable)
            return found if found is not None else values.get(variable)

        sub = Project([], project_dir, inner)
        loader = _Loader(sub)
        loader.read = self.read
        for path in paths:
            loader.file(path, project_dir, inner, chain)
        self.read = loader.read
        self.project.files += [str(p) for p in paths] + sub.files
        for label, body in sub.services.items():
            imported = _absolute(body, project_dir)
            if label in services:
                try:
                    imported = merge_yaml(imported, services[label], ("services", label))
                except MergeError as exc:
                    raise ComposeError(name, label, None, str(exc)) from None
            services[label] = imported
            origins[label] = sub.origins.get(label, str(paths[0]))
            self.project.lookups[label] = sub.lookups.get(label, inner)

    def extends(
        self,
        services: dict[str, Any],
        path: Path,
        workdir: Path,
        lookup: Lookup,
        cleared: list[tuple[str, ...]],
    ) -> None:
        """compose-go ApplyExtends: each service merged over the one it extends, recursively.

        `cleared` are the file's !reset/!override paths: a service's own apply to its base.
        """
        for label in list(services):
            services[label] = self.extended(services, label, path, workdir, lookup, (), cleared)

    def extended(
        self,
        services: dict[str, Any],
        label: str,
        path: Path,
        workdir: Path,
        lookup: Lookup,
        seen: tuple[tuple[str, str], ...],
        cleared: list[tuple[str, ...]],
    ) -> Any:
        name = str(path)
        body = services[label]
        if not isinstance(body, dict) or "extends" not in body:
            return body
        if (name, label) in seen:
            raise ComposeError(name, label, "extends", "extends cycle")
        ref, file = _extends_spec(body["extends"], lookup, name, label)
        base_services, base_path, base_dir, base_cleared = services, path, workdir, cleared
        if file is not None:
            base_path = workdir / _text(file, lookup, name, "extends.file")
            if not base_path.is_file():
                raise ComposeError(name, label, "extends.file", f"{base_path} does not exist")
            base_services, file_cleared = self.extends_file(base_path, name)
            # compose-go appends the base file's paths to the ones in force (`post`).
            base_cleared = [*cleared, *file_cleared]
            base_dir = base_path.parent
        if ref not in base_services:
            raise ComposeError(name, label, "extends", f"service {ref!r} not found in {base_path}")
        base = self.extended(
            base_services, ref, base_path, base_dir, lookup, (*seen, (name, label)), base_cleared
        )
        if not isinstance(base, dict):
            return {key: value for key, value in body.items() if key != "extends"}
        base = copy_tree(base)
        if file is not None:
            base = _absolute(base, base_dir)
        # compose-go applies the service's own !reset/!override paths to the base it extends.
        holder = {label: base}
        clear(holder, base_cleared, label)
        base = holder.get(label, {})
        try:
            return extend_service(base, body)
        except MergeError as exc:
            raise ComposeError(name, label, "extends", str(exc)) from None


def _include_paths(entry: dict[str, Any], workdir: Path, lookup: Lookup, name: str) -> list[Path]:
    raw_paths = _list(entry.get("path"), name, "include.path")
    if not raw_paths:
        raise ComposeError(name, None, "include", "an entry needs a path")
    paths = [workdir / _text(p, lookup, name, "include.path") for p in raw_paths]
    for path in paths:
        if not path.is_file():
            raise ComposeError(name, None, "include", f"{path} does not exist")
    return paths


def _include_env(
    entry: dict[str, Any], workdir: Path, project_dir: Path, lookup: Lookup, name: str
) -> dict[str, str]:
    """An include's env files (`.env` in its project directory when it names none)."""
    env_files = [
        workdir / _text(f, lookup, name, "include.env_file")
        for f in _list(entry.get("env_file"), name, "include.env_file")
        if f != "/dev/null"
    ]
    if not env_files and (project_dir / ".env").is_file():
        env_files = [project_dir / ".env"]
    values: dict[str, str] = {}
    for env_file in env_files:
        # compose-go dotenv/env.go GetEnvFromFile: the environment first, then the files before.
        try:
            values.update(read_env_file(env_file, lookup, values))
        except ComposeError as exc:
            raise ComposeError(name, None, "include.env_file", str(exc)) from None
    return values


def _extends_spec(spec: Any, lookup: Lookup, name: str, label: str) -> tuple[str, Any]:
    """(service, file or None) of an `extends:` (a name, or a mapping with service: and file:)."""
    if isinstance(spec, str):
        return _text(spec, lookup, name, "extends"), None
    if isinstance(spec, dict) and spec.get("service") is not None:
        return _text(spec["service"], lookup, name, "extends.service"), spec.get("file")
    raise ComposeError(name, label, "extends", "needs `service:` (and optionally `file:`)")


def _services_of(data: dict[str, Any], name: str) -> dict[str, Any]:
    services = data.get("services")
    if services is None:
        return {}
    if not isinstance(services, dict):
        raise ComposeError(name, None, "services", "services: is a mapping of services")
    for key in services:
        # A service name starts verdict lines (`PASS  name …`): one holding a line break or an
        # escape sequence could print a verdict of its own (DESIGN.md "Text from outside").
        bad = unprintable(str(key))
        if bad is not None:
            raise ComposeError(
                name, None, f"services.{visible(str(key))}", f"holds {bad}: {NAME_RULE}"
            )
    return {str(key): body if body is not None else {} for key, body in services.items()}


def _list(value: Any, name: str, where: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return [value]
    raise ComposeError(name, None, where, "expected a list")


def _text(value: Any, lookup: Lookup, name: str, where: str) -> str:
    if not isinstance(value, str | int | float):
        raise ComposeError(name, None, where, "expected text")
    try:
        result = substitute(str(value), lookup)
    except MissingVariable as missing:
        raise ComposeError(
            name, None, where, f"required variable {missing.name} is not set"
        ) from None
    except ValueError as exc:
        raise ComposeError(name, None, where, str(exc)) from None
    if result.missing:
        raise ComposeError(name, None, where, f"variable {result.missing[0]} is not set")
    return result.text


def _relative(text: str) -> bool:
    return not text.startswith(("/", "$", "~"))


def _absolute(body: Any, directory: Path) -> Any:
    """compose-go ResolveRelativePaths for what gpuplan reads: env files and bind mount sources."""
    if not isinstance(body, dict):
        return body
    env_file = body.get("env_file")
    if isinstance(env_file, str | list):
        entries = env_file if isinstance(env_file, list) else [env_file]
        body["env_file"] = [_absolute_env_file(entry, directory) for entry in entries]
    volumes = body.get("volumes")
    if isinstance(volumes, list):
        body["volumes"] = [_absolute_volume(volume, directory) for volume in volumes]
    return body


def _absolute_env_file(entry: Any, directory: Path) -> Any:
    if isinstance(entry, str) and _relative(entry):
        return str(directory / entry)
    if isinstance(entry, dict) and isinstance(entry.get("path"), str) and _relative(entry["path"]):
        return {**entry, "path": str(directory / entry["path"])}
    return entry


def _absolute_volume(volume: Any, directory: Path) -> Any:
    if isinstance(volume, str) and volume.startswith("."):
        source, sep, rest = volume.partition(":")
        return f"{directory / source}{sep}{rest}"
    if isinstance(volume, dict) and str(volume.get("source", "")).startswith("."):
        return {**volume, "source": str(directory / str(volume["source"]))}
    return volume
