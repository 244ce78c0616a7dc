"""Compose's merge of one file over another, ported from compose-go's `override` package.

Source: compose-spec/compose-go at e70e961c3a3acebf0800b882f1afb3dbf1fb74a2, override/merge.go
(`MergeYaml` and its special rules) and override/uncity.go (`EnforceUnicity`): mappings merge key
by key, `command`/`entrypoint` are replaced, `environment`/`env_file`/`labels` become one sequence,
other sequences are appended, then a redefined entry (same variable, same mount target, same
device target, same profile) keeps its place and takes the later value. Only rules that touch
what compose reads for a service are ported; tests/placement/check/data/compose-go/ holds
compose-go's own tables that pin them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Path = tuple[str, ...]


class MergeError(ValueError):
    """Two files disagree in kind at one path (a mapping over a list): compose refuses it too."""


def _matches(path: Path, pattern: str) -> bool:
    parts = pattern.split(".")
    return len(parts) == len(path) and all(p in ("*", k) for p, k in zip(parts, path, strict=True))


def _text(value: object) -> str:
    # Go's %v: booleans lower case, everything else as written.
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _to_sequence(value: Any) -> list[Any]:
    """compose-go's convertIntoSequence: a mapping becomes sorted `KEY=value` (`KEY` for null)."""
    if isinstance(value, dict):
        seq: list[Any] = []
        for key, item in value.items():
            if item is None:
                seq.append(str(key))
            elif isinstance(item, list):
                seq.extend(f"{key}={_text(v)}" for v in item)
            else:
                seq.append(f"{key}={_text(item)}")
        return sorted(seq)
    if isinstance(value, list):
        return list(value)
    if isinstance(value, str):
        return [value]
    return []


def _to_mapping(value: Any, default: dict[str, Any] | None) -> dict[str, Any]:
    """compose-go's convertIntoMapping: a list of names becomes a mapping of them."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return {str(item): (dict(default) if default is not None else None) for item in value}
    return {}


def _sequence(base: Any, other: Any, _: Path) -> Any:
    return _to_sequence(base) + _to_sequence(other)


def _replace(_: Any, other: Any, __: Path) -> Any:
    return other


def _extra_hosts(base: Any, other: Any, _: Path) -> Any:
    right = _to_sequence(base)
    return right + [item for item in _to_sequence(other) if item not in right]


def _depends_on(base: Any, other: Any, path: Path) -> Any:
    default = {"condition": "service_started", "required": True}
    return _mappings(_to_mapping(base, default), _to_mapping(other, default), path)


def _networks(base: Any, other: Any, path: Path) -> Any:
    return _mappings(_to_mapping(base, None), _to_mapping(other, None), path)


def _build(base: Any, other: Any, path: Path) -> Any:
    def as_build(value: Any) -> dict[str, Any]:
        return {"context": value} if isinstance(value, str) else dict(value or {})

    return _mappings(as_build(base), as_build(other), path)


def _logging(base: Any, other: Any, path: Path) -> Any:
    # Options merge only when both name the same driver (or one names none).
    if "driver" in base and "driver" in other and base["driver"] != other["driver"]:
        return other
    return _mappings(dict(base), other, path)


Merger = Callable[[Any, Any, Path], Any]
_SPECIAL: tuple[tuple[str, Merger], ...] = (
    ("services.*.annotations", _sequence),
    ("services.*.build", _build),
    ("services.*.build.args", _sequence),
    ("services.*.build.additional_contexts", _sequence),
    ("services.*.build.labels", _sequence),
    ("services.*.build.extra_hosts", _extra_hosts),
    ("services.*.command", _replace),
    ("services.*.depends_on", _depends_on),
    ("services.*.deploy.labels", _sequence),
    ("services.*.dns", _sequence),
    ("services.*.dns_opt", _sequence),
    ("services.*.dns_search", _sequence),
    ("services.*.entrypoint", _replace),
    ("services.*.env_file", _sequence),
    ("services.*.label_file", _sequence),
    ("services.*.environment", _sequence),
    ("services.*.extra_hosts", _extra_hosts),
    ("services.*.healthcheck.test", _replace),
    ("services.*.labels", _sequence),
    ("services.*.logging", _logging),
    ("services.*.models", _networks),
    ("services.*.networks", _networks),
    ("services.*.sysctls", _sequence),
    ("services.*.tmpfs", _sequence),
    ("networks.*.labels", _sequence),
    ("volumes.*.labels", _sequence),
)


def merge_yaml(base: Any, other: Any, path: Path = ()) -> Any:
    """compose-go's MergeYaml: `other` over `base` at `path`."""
    for pattern, merger in _SPECIAL:
        if _matches(path, pattern):
            return merger(base, other, path)
    if other is None:
        return base
    if isinstance(base, dict):
        if not isinstance(other, dict):
            raise MergeError(f"cannot override {'.'.join(path)}: a mapping with a {_kind(other)}")
        return _mappings(dict(base), other, path)
    if isinstance(base, list):
        if not isinstance(other, list):
            raise MergeError(f"cannot override {'.'.join(path)}: a list with a {_kind(other)}")
        return base + other
    return other


def _kind(value: object) -> str:
    return "mapping" if isinstance(value, dict) else type(value).__name__


def _mappings(mapping: dict[str, Any], other: dict[str, Any], path: Path) -> dict[str, Any]:
    for key, value in other.items():
        if key not in mapping:
            mapping[key] = value
        else:
            mapping[key] = merge_yaml(mapping[key], value, (*path, str(key)))
    return mapping


def _key_value(entry: Any) -> str:
    return str(entry).split("=", 1)[0]


def _target(entry: Any) -> str:
    """A mount or device's target: `src:/dst[:ro]` → /dst; the long syntax's `target:`."""
    if isinstance(entry, dict):
        return str(entry.get("target", ""))
    parts = str(entry).split(":")
    return parts[0] if len(parts) == 1 else parts[1]


def _mount(default: str) -> Callable[[Any], str]:
    def index(entry: Any) -> str:
        if isinstance(entry, dict):
            if "target" in entry:
                return str(entry["target"])
            return f"{default}/{entry.get('source')}"
        return f"{default}/{entry}"

    return index


def _env_file(entry: Any) -> str:
    return str(entry.get("path", "")) if isinstance(entry, dict) else str(entry)


_UNIQUE: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("services.*.annotations", _key_value),
    ("services.*.build.args", _key_value),
    ("services.*.build.additional_contexts", _key_value),
    ("services.*.build.platform", _key_value),
    ("services.*.build.tags", _key_value),
    ("services.*.build.labels", _key_value),
    ("services.*.cap_add", _key_value),
    ("services.*.cap_drop", _key_value),
    ("services.*.devices", _target),
    ("services.*.deploy.labels", _key_value),
    ("services.*.dns", _key_value),
    ("services.*.dns_opt", _key_value),
    ("services.*.dns_search", _key_value),
    ("services.*.environment", _key_value),
    ("services.*.env_file", _env_file),
    ("services.*.labels", _key_value),
    ("services.*.links", _key_value),
    ("services.*.networks.*.aliases", _key_value),
    ("services.*.networks.*.link_local_ips", _key_value),
    ("services.*.configs", _mount("")),
    ("services.*.secrets", _mount("/run/secrets")),
    ("services.*.profiles", _key_value),
    ("services.*.sysctls", _key_value),
    ("services.*.tmpfs", _key_value),
    ("services.*.volumes", _target),
)


def enforce_unicity(value: Any, path: Path = ()) -> Any:
    """compose-go's EnforceUnicity: a redefined entry keeps its first place and its last value."""
    if isinstance(value, dict):
        return {key: enforce_unicity(item, (*path, str(key))) for key, item in value.items()}
    if isinstance(value, list):
        for pattern, index in _UNIQUE:
            if _matches(path, pattern):
                seq: list[Any] = []
                keys: dict[str, int] = {}
                for entry in value:
                    key = index(entry)
                    if key in keys:
                        seq[keys[key]] = entry
                    else:
                        keys[key] = len(seq)
                        seq.append(entry)
                return seq
    return value


def merge(base: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """One compose file over another, as `docker compose -f base -f other` merges them."""
    merged = merge_yaml(copy_tree(base), copy_tree(other))
    result: dict[str, Any] = enforce_unicity(merged)
    return result


def extend_service(base: dict[str, Any], service: dict[str, Any]) -> dict[str, Any]:
    """compose-go's ExtendService: the service's own keys over the service it extends."""
    merged: dict[str, Any] = merge_yaml(copy_tree(base), copy_tree(service), ("services", "x"))
    merged.pop("extends", None)
    result: dict[str, Any] = enforce_unicity({"services": {"x": merged}})["services"]["x"]
    return result


def copy_tree(value: Any) -> Any:
    """A copy of parsed YAML (mappings, lists, scalars) that merging can change in place."""
    if isinstance(value, dict):
        return {key: copy_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_tree(item) for item in value]
    return value
