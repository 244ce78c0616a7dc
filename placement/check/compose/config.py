"""vLLM's `--config FILE`: read when the file is mounted from beside the compose file.

vLLM reads the YAML's keys as its long flags; flags on the command line win over it.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from placement.check.compose.model import ComposeError
from seats.errors import CatalogueError
from seats.loader import read_text_file, read_yaml

MAX_CONFIG_BYTES = 256 * 1024


def host_path(container_path: str, volumes: object, directory: Path) -> Path | None:
    """The file beside the compose file that a bind mount puts at `container_path`, if any."""
    target = PurePosixPath(container_path)
    for source, mounted in _binds(volumes):
        if not source.startswith((".", "/")):
            continue  # a named volume, or a home directory: not beside the compose file
        mount = PurePosixPath(mounted)
        if target == mount or mount in target.parents:
            candidate = (directory / source / target.relative_to(mount)).resolve()
            if candidate.is_relative_to(directory.resolve()) and candidate.is_file():
                return candidate
    return None


def _binds(volumes: object) -> list[tuple[str, str]]:
    """(source, target) of each `volumes:` entry, short (`./a:/b:ro`) or long syntax."""
    out: list[tuple[str, str]] = []
    for entry in volumes if isinstance(volumes, list) else []:
        if isinstance(entry, str) and ":" in entry:
            source, target = entry.split(":", 2)[:2]
            out.append((source, target))
        elif isinstance(entry, dict) and entry.get("source") and entry.get("target"):
            out.append((str(entry["source"]), str(entry["target"])))
    return out


def config_args(path: Path, compose: str, service: str) -> list[str]:
    """The flags a vLLM config file gives, as command-line words (`--key value`, `--flag`)."""
    try:
        data = read_yaml(read_text_file(path, "a vLLM config file", MAX_CONFIG_BYTES), str(path))
    except CatalogueError as exc:
        raise ComposeError(compose, service, "--config", f"{path}: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ComposeError(compose, service, "--config", f"{path} is not a mapping of flags")
    args: list[str] = []
    for key, value in data.items():
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, int | float | str) and not isinstance(value, bool):
            args += [flag, str(value)]
    return args
