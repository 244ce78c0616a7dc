"""Compose's variable interpolation, ported from compose-go's `template` package.

compose-go substitutes "" for an unset variable (with a warning); `Substitution.missing` lists
those names so the reader can refuse them where gpuplan reads the value (DESIGN.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

Lookup = Callable[[str], str | None]

# compose-go's DefaultPattern, letter for letter: `$$`, `$NAME`, `${NAME[op]…}` or an invalid `${`.
_PATTERN = re.compile(
    r"\$(?i:(?P<escaped>\$)|(?P<named>[_a-z][_a-z0-9]*)"
    r"|\{(?:(?P<braced>[_a-z][_a-z0-9]*(?::?[-+?](.*))?)\}|(?P<invalid>)))"
)
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
