"""Compose's variable interpolation (`${VAR}`, `${VAR:-default}` …) and its `.env` files."""

from __future__ import annotations

import re
from collections.abc import Callable

from placement.check.compose.model import ComposeError


class MissingVariable(Exception):
    def __init__(self, name: str, message: str | None = None) -> None:
        super().__init__(name)
        self.name = name
        self.message = message


NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def interpolate(text: str, lookup: Callable[[str], str | None]) -> str:
    """`text` with compose's variable forms replaced; raises `MissingVariable` for an unset one."""
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
            match = NAME.match(text, i + 1)
            if match is None:
                out.append("$")
                i += 1
                continue
            value = lookup(match.group(0))
            if value is None:
                raise MissingVariable(match.group(0))
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
    match = NAME.match(body)
    if match is None:
        raise ValueError(f"'${{{body}}}' is not a variable name")
    name = match.group(0)
    rest = body[match.end() :]
    value = lookup(name)
    if rest == "":
        if value is None:
            raise MissingVariable(name)
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
            raise MissingVariable(name, interpolate(word, lookup) or None)
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
        if not sep or NAME.fullmatch(key) is None:
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
