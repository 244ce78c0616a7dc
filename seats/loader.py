"""Read a catalogue file: safe YAML with size and alias caps, then validation with errors that point.

Reading and validating are separate steps (STYLE.md): `read_yaml` turns text into plain
data and refuses anything a YAML file should not do to us; `load_catalogue` validates the
data with the pydantic model and then the cross-field rules of `seats.rules`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from seats.errors import CatalogueError
from seats.model import Catalogue
from seats.names import shown_name
from seats.rules import check_rules

MAX_DOCUMENT_BYTES = 1024 * 1024
# A billion-laughs document is small on disk and huge once aliases are expanded:
# count the expanded nodes and scalar characters, and stop long before memory suffers.
MAX_EXPANDED_NODES = 200_000


class _DepthCapped(yaml.composer.Composer):
    """PyYAML's composer with a nesting cap; duplicate keys are refused on the node graph.

    Duplicates are found by `_check_nodes` before construction, where the field path is
    known and a merge key (`<<: *base`) can still be told from a repeated key.
    """

    _path = "<catalogue>"
    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        # PyYAML composes recursively: without this cap `[[[[…` thousands deep spends
        # seconds unwinding a RecursionError instead of failing at once.
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise CatalogueError(
                    self._path, "", f"the document nests deeper than {MAX_DEPTH} levels"
                )
            return super().compose_node(parent, index)  # type: ignore[no-untyped-call]
        finally:
            self._depth -= 1


class _PureLoader(_DepthCapped, yaml.SafeLoader):
    """The safe loader in pure Python, for a PyYAML built without libyaml."""


if yaml.__with_libyaml__:
    from yaml.cyaml import CParser  # type: ignore[attr-defined]

    class _CLoader(_DepthCapped, CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """libyaml's parser (C, iterative) under PyYAML's composer, constructor and resolver.

        About 6x faster than the pure-Python scanner on a fleet's catalogue. The events
        are composed in Python, so the nesting cap and the alias checks hold as before
        (libyaml's own composer recurses in C, where no cap could stop it).
        """

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)  # type: ignore[no-untyped-call]
            yaml.resolver.Resolver.__init__(self)  # type: ignore[no-untyped-call]
            yaml.composer.Composer.__init__(self)  # type: ignore[no-untyped-call]

    _UniqueKeyLoader: Any = _CLoader
else:  # pragma: no cover - PyYAML wheels ship libyaml
    _UniqueKeyLoader = _PureLoader


def _check_nodes(node: yaml.Node, path: str) -> None:
    """Walk the node graph as if aliases were copies, before anything is constructed.

    Refuses past the size caps (aliases are followed lazily, so a bomb stops after
    MAX_EXPANDED_NODES steps, not after expanding) and past MAX_DEPTH (which an alias
    that contains itself reaches at once), and names the first duplicate key by its
    field path, which the constructor alone cannot know.
    """
    nodes = 0
    chars = 0
    # Each entry carries (node, depth, its key or index, its parent's entry): the field
    # path is rebuilt only when an error needs it, so the walk stays linear.
    root: _Entry = (node, 0, None, None)
    stack: list[_Entry] = [root]
    while stack:
        entry = stack.pop()
        current, depth, _, _ = entry
        nodes += 1
        if nodes > MAX_EXPANDED_NODES or chars > MAX_DOCUMENT_BYTES:
            raise CatalogueError(
                path,
                "",
                "the document expands past 1 MiB through YAML aliases; refusing to read it",
            )
        if depth > MAX_DEPTH:
            raise CatalogueError(
                path,
                format_loc(_loc_of(entry)[:MAX_DEPTH_SHOWN]) + "…",
                f"the document nests deeper than {MAX_DEPTH} levels (or an alias contains itself)",
            )
        if isinstance(current, yaml.ScalarNode):
            chars += len(str(current.value))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(
                (item, depth + 1, i, entry) for i, item in reversed(list(enumerate(current.value)))
            )
        elif isinstance(current, yaml.MappingNode):
            seen: dict[tuple[str, str], int] = {}
            children: list[_Entry] = []
            for key, value in current.value:
                if isinstance(key, yaml.ScalarNode):
                    ident = (str(key.tag), str(key.value))
                    if ident in seen:
                        raise CatalogueError(
                            path,
                            format_loc((*_loc_of(entry), str(key.value))),
                            f"duplicate key {key.value!r} at line {key.start_mark.line + 1} "
                            f"(first at line {seen[ident]}); YAML would silently keep the last",
                        )
                    seen[ident] = key.start_mark.line + 1
                    children.append((value, depth + 1, str(key.value), entry))
                else:
                    children.append((key, depth + 1, "?", entry))
                    children.append((value, depth + 1, "?", entry))
            stack.extend(reversed(children))


_Entry = tuple[yaml.Node, int, "int | str | None", "Any"]
MAX_DEPTH = 64
MAX_DEPTH_SHOWN = 6


def _loc_of(entry: _Entry) -> tuple[int | str, ...]:
    parts: list[int | str] = []
    current: _Entry | None = entry
    while current is not None:
        if current[2] is not None:
            parts.append(current[2])
        current = current[3]
    return tuple(reversed(parts))


# `keep_tags`: a node tagged so is read as {TAG_KEY: tag, "value": its plain value}. The key holds a
# NUL, which no YAML document read here may (control characters are refused), so it is never data.
TAG_KEY = "\x00tag"


def _keep_tagged(node: yaml.Node, tags: frozenset[str]) -> yaml.Node:
    """`node` with every node tagged with one of `tags` wrapped as a TAG_KEY mapping."""
    if isinstance(node, yaml.SequenceNode):
        node.value = [_keep_tagged(item, tags) for item in node.value]
    elif isinstance(node, yaml.MappingNode):
        node.value = [(key, _keep_tagged(value, tags)) for key, value in node.value]
    if node.tag not in tags:
        return node
    tag = node.tag
    if isinstance(node, yaml.ScalarNode):
        node.tag = "tag:yaml.org,2002:null" if node.value == "" else "tag:yaml.org,2002:str"
    else:
        node.tag = "tag:yaml.org,2002:" + ("seq" if isinstance(node, yaml.SequenceNode) else "map")
    text = "tag:yaml.org,2002:str"
    return yaml.MappingNode(
        "tag:yaml.org,2002:map",
        [
            (yaml.ScalarNode(text, TAG_KEY), yaml.ScalarNode(text, tag)),
            (yaml.ScalarNode(text, "value"), node),
        ],
    )


def read_yaml(text: str, path: str, keep_tags: frozenset[str] = frozenset()) -> Any:
    """Plain data from YAML `text`, refusing tags (but `keep_tags`), duplicate keys and oversized
    documents."""
    if len(text.encode("utf-8", errors="replace")) > MAX_DOCUMENT_BYTES:
        raise CatalogueError(path, "", "the file is over 1 MiB; a catalogue is far smaller")
    try:
        # The pure-Python reader checks for control characters as soon as it is built.
        loader = _UniqueKeyLoader(text)
    except yaml.reader.ReaderError as exc:
        raise _unreadable(exc, text, path) from exc
    loader._path = path
    try:
        node = loader.get_single_node()  # type: ignore[no-untyped-call]
        if node is None:
            return None
        _check_nodes(node, path)
        if keep_tags:
            node = _keep_tagged(node, keep_tags)
        return loader.construct_document(node)  # type: ignore[no-untyped-call]
    except CatalogueError:
        raise
    except RecursionError as exc:
        # PyYAML composes and constructs recursively: `[[[[…` thousands deep ends here.
        raise CatalogueError(path, "", "the document nests too deeply to be a catalogue") from exc
    except yaml.reader.ReaderError as exc:
        # libyaml's reader meets a control character only when it parses up to it.
        raise _unreadable(exc, text, path) from exc
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):
            # libyaml's scanner looks ahead past our composer's cap and stops at its own.
            raise CatalogueError(
                path, "", f"the document nests deeper than {MAX_DEPTH} levels"
            ) from exc
        raise _refusal(exc, path) from exc
    finally:
        loader.dispose()  # type: ignore[no-untyped-call]


def _unreadable(exc: yaml.reader.ReaderError, text: str, path: str) -> CatalogueError:
    """A control character, at its offset in characters (libyaml counts UTF-8 bytes)."""
    position = exc.position
    if _UniqueKeyLoader is not _PureLoader:
        position = len(text.encode("utf-8")[:position].decode("utf-8", errors="ignore"))
    return CatalogueError(
        path, "", f"not YAML text: control character #x{exc.character:04x} at offset {position}"
    )


def _refusal(exc: yaml.YAMLError, path: str) -> CatalogueError:
    """What PyYAML's error means for a catalogue, in words that say how to fix it."""
    if isinstance(exc, yaml.composer.ComposerError):
        if exc.problem and "another document" in exc.problem:
            return CatalogueError(
                path, "", f"a catalogue is one YAML document; found a second {_mark(exc)}"
            )
        return CatalogueError(path, "", f"not valid YAML: {_describe(exc)}")
    if isinstance(exc, yaml.constructor.ConstructorError):
        # A python tag (!!python/object/apply:…) lands here: the safe loader never constructs it.
        problem = str(exc.problem or "")
        if "tag" in problem:
            shown = problem.split("tag ", 1)[-1].replace("tag:yaml.org,2002:", "!!")
            return CatalogueError(
                path,
                "",
                f"the tag {shown} is not allowed {_mark(exc)}: a catalogue is plain data, "
                "read with the safe loader, which never runs code",
            )
        return CatalogueError(path, "", f"not plain YAML data: {problem} {_mark(exc)}".strip())
    return CatalogueError(path, "", f"not valid YAML: {_describe(exc)}")


def _mark(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark
    return f"(line {mark.line + 1})" if mark is not None else ""


def _describe(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        return f"{exc.problem or exc.context} {_mark(exc)}".strip()
    return str(exc)


def format_loc(loc: tuple[int | str, ...]) -> str:
    """('seats', 2, 'resident') → 'seats[2].resident'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            part = shown_name(part)  # a mapping key may be itself the bad name
            out += f".{part}" if out else part
    return out


def _message(error: Any) -> str:
    msg = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    if error["type"] == "extra_forbidden":
        msg = "unknown key (check its spelling against `gpuplan schema`)"
    elif error["type"] == "missing":
        msg = "required key is missing"
    return msg


def _pydantic_loc(error: Any) -> tuple[int | str, ...]:
    # pydantic appends the union member or validator name to loc ("int", "function-before[...]");
    # those are not fields, so drop them.
    loc = []
    for part in error["loc"]:
        if isinstance(part, str) and ("[" in part or part in {"int", "str", "tuple[int, ...]"}):
            continue
        loc.append("for" if part == "for_" else part)
    return tuple(loc)


def parse_catalogue(data: Any, path: str) -> Catalogue:
    """Validate plain data as a catalogue; the first error becomes a `CatalogueError`."""
    if data is None:
        raise CatalogueError(path, "", "the file is empty; a catalogue needs at least `hosts:`")
    if not isinstance(data, dict):
        raise CatalogueError(
            path, "", f"a catalogue is a mapping with `hosts:`, got {type(data).__name__}"
        )
    try:
        catalogue = Catalogue.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        # A union reports once per member for one field; count fields, not members.
        locs = {_pydantic_loc(error) for error in errors} - {_pydantic_loc(first)}
        more = f" (and {len(locs)} more)" if locs else ""
        raise CatalogueError(
            path, format_loc(_pydantic_loc(first)), _message(first) + more
        ) from exc
    check_rules(catalogue, path)
    return catalogue


def read_text_file(path: str | Path, what: str, limit: int = MAX_DOCUMENT_BYTES) -> str:
    """The UTF-8 text of a small input file (a catalogue, a seat file, a compose file).

    Errors are `CatalogueError`s naming the file; `what` says what the file should be.
    """
    name = str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except FileNotFoundError as exc:
        raise CatalogueError(name, "", "no such file") from exc
    except OSError as exc:
        raise CatalogueError(name, "", f"cannot read: {exc.strerror}") from exc
    if len(raw) > limit:
        size = f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"
        raise CatalogueError(name, "", f"the file is over {size}; {what} is far smaller")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CatalogueError(name, "", "not UTF-8 text") from exc


def load_catalogue(path: str | Path) -> Catalogue:
    """Read and validate the catalogue at `path`."""
    name = str(path)
    return parse_catalogue(read_yaml(read_text_file(path, "a catalogue"), name), name)
