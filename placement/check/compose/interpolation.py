"""Compose's variable interpolation, ported from compose-go's `template` package, and `.env` files.

compose-go substitutes "" for an unset variable (with a warning); `Substitution.missing` lists
those names so the reader can refuse them where gpuplan reads the value (DESIGN.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from placement.check.compose.model import ComposeError

Lookup = Callable[[str], str | None]

# compose-go's DefaultPattern, letter for letter: `$$`, `$NAME`, `${NAME[op]…}` or an invalid `${`.
_PATTERN = re.compile(
    r"\$(?i:(?P<escaped>\$)|(?P<named>[_a-z][_a-z0-9]*)"
    r"|\{(?:(?P<braced>[_a-z][_a-z0-9]*(?::?[-+?](.*))?)\}|(?P<invalid>)))"
)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = (":?", "?", ":-", "-", ":+", "+")


class MissingVariable(Exception):
    """`${VAR:?message}` (or `${VAR?…}`) with VAR unset: compose refuses the file; so do we.

    Also raised by `interpolate` for a plain unset variable (`required` False then).
    """

    def __init__(self, name: str, message: str | None = None, *, required: bool = True) -> None:
        super().__init__(name)
        self.name = name
        self.message = message
        self.required = required


@dataclass
class _Substituter:
    lookup: Lookup
    missing: list[str]

    def substitute(self, template: str) -> str:
        return _PATTERN.sub(self._replace, template)

    def _replace(self, match: re.Match[str]) -> str:
        substring = match.group(0)
        operator = _operator(substring)
        closing = _first_closing_brace(substring)
        rest = ""
        if closing > -1:
            substring, rest = substring[: closing + 1], substring[closing + 1 :]
        found = _PATTERN.match(substring)
        if found is None or found.group("invalid") is not None:
            raise ValueError(f"Invalid template: {match.string!r}")
        if found.group("escaped") is not None:
            return "$"
        name = found.group("named")
        if name is None:
            name = found.group("braced")
            applied = self._apply(name, operator)
            if applied is not None:
                return applied + self.substitute(rest)
        value = self.lookup(name)
        if value is None:
            self.missing.append(name)
            return ""
        return value

    def _apply(self, substitution: str, operator: str) -> str | None:
        """compose-go's substitution functions; None where `operator` is not in `substitution`."""
        if operator not in substitution:
            return None
        name, word = substitution.split(operator, 1)
        value = self.lookup(name)
        empty_counts = operator.startswith(":")
        absent = value is None or (empty_counts and value == "")
        if operator in (":?", "?"):
            if absent:
                raise MissingVariable(name, self.substitute(word) or None)
            return str(value)
        if operator in (":-", "-"):
            return self.substitute(word) if absent else str(value)
        return (value or "") if absent else self.substitute(word)


def _operator(template: str) -> str:
    """The operator that comes first in `template` (compose-go's getSubstitutionFunctionForTemplate)."""
    found = [(template.find(op), i, op) for i, op in enumerate(_OPERATORS) if op in template]
    return min(found)[2] if found else _OPERATORS[0]


def _first_closing_brace(text: str) -> int:
    """compose-go's getFirstBraceClosingIndex: counts every brace, skipping the character after `{`."""
    depth = 0
    i = 0
    while i < len(text):
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        if text[i] == "{":
            depth += 1
            i += 1
        i += 1
    return -1


@dataclass(frozen=True)
class Substitution:
    """The text compose makes of a value, and the unset variables it read as ""."""

    text: str
    missing: tuple[str, ...]


def substitute(template: str, lookup: Lookup) -> Substitution:
    """`template` as compose interpolates it; `MissingVariable` for `${VAR:?…}`, ValueError if invalid."""
    substituter = _Substituter(lookup, [])
    text = substituter.substitute(template)
    return Substitution(text, tuple(dict.fromkeys(substituter.missing)))


def interpolate(text: str, lookup: Lookup) -> str:
    """`text` interpolated, refusing any unset variable without a default (`MissingVariable`)."""
    result = substitute(text, lookup)
    if result.missing:
        raise MissingVariable(result.missing[0], required=False)
    return result.text


def parse_env_file(text: str, path: str, lookup: Lookup | None = None) -> dict[str, str]:
    """KEY=VALUE lines of a compose `.env` file: `#` comments, `export`, quoted values.

    An unquoted or double-quoted value is interpolated as compose-go's dotenv parser does
    (`expandVariables`): a name set on an earlier line of the file first, then `lookup` (the
    environment), so `DEVICE=${DEVICE:-cpu}` and `COMPOSE_PROFILES=${DOC_ENGINE},${DEVICE}`
    read as docker reads them; a single-quoted value is kept as written.
    """
    values: dict[str, str] = {}

    def earlier_then_environment(name: str) -> str | None:
        if name in values:
            return values[name]
        return lookup(name) if lookup is not None else None

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
        quote = value[0] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else ""
        if quote:
            value = value[1:-1]
            if quote == '"':
                value = value.replace("\\n", "\n").replace('\\"', '"')
        else:
            # An unquoted value ends at " #": compose treats the rest as a comment.
            hash_at = value.find(" #")
            if hash_at >= 0:
                value = value[:hash_at].rstrip()
        if quote != "'":
            value = _expand(value, earlier_then_environment, path, number)
        values[key] = value
    return values


def _expand(value: str, lookup: Lookup, path: str, number: int) -> str:
    """A `.env` value interpolated (an unset name reads as "", as in compose-go's dotenv)."""
    try:
        return substitute(value, lookup).text
    except MissingVariable as exc:
        raise ComposeError(
            path,
            None,
            f"line {number}",
            f"variable {exc.name} is not set: {exc.message or exc.name}",
        ) from None
    except ValueError as exc:
        raise ComposeError(path, None, f"line {number}", str(exc)) from None
