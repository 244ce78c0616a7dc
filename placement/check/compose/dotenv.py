"""Env files (`.env` beside the compose file, a service's `env_file:`, an include's `env_file:`),
read as compose-go's `dotenv` package reads them.

Ported from github.com/compose-spec/compose-go at e70e961c (`dotenv/parser.go`, `expandVariables`
in `dotenv/godotenv.go`, `GetEnvFromFile` in `dotenv/env.go`):
- a statement is `KEY=VALUE` or `KEY: VALUE` (the parser's "yaml-style value declaration"), with an
  optional `export ` before it; a line holding only `KEY` takes KEY from the environment, if set
  there. A name is letters, digits, `_`, `.`, `-`, `[` and `]`, and holds no space;
- an unquoted value runs to the end of the line, where ` #` starts a comment (`U=0.3 # why`);
- a quoted value runs to its closing quote, over line breaks too, `\\"` or `\\'` not closing it,
  and what follows it on the line may be a comment (`U="0.3" # why`). A double-quoted value has its
  escapes read (`\\n`, `\\t`, `\\\\`, `\\$`, `\\0ddd` …) and is interpolated; a single-quoted one is
  kept as written;
- a value is interpolated with the lookup first (the environment) and then what the file (and the
  env files read before it) set, as compose-go does since it fixed "os.Env precedence resolving
  variables in .env file" (cli/options_test.go TestEnvVariablePrecedence): `FOO=foo`,
  `BAR=${FOO}` with FOO=zot in the shell gives BAR=zot.

An env file holds secrets (`HF_TOKEN=hf_…`), so an error names the file and the line, never the
line's content (DESIGN.md "Text from outside"). A file is read only when it is a regular file of at
most 256 KiB, opened without blocking: a FIFO, a socket or a device is refused, never waited on.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path

from placement.check.compose.interpolation import MissingVariable, substitute
from placement.check.compose.model import ComposeError

Lookup = Callable[[str], str | None]
MAX_ENV_FILE_BYTES = 256 * 1024

# compose-go parser.go isSpace: a space, not a line break.
_SPACE = frozenset("\t\v\f\r \x85\xa0")
# parser.go exportRegex `^export\s+` (RE2's \s: tab, newline, form feed, carriage return, space).
_EXPORT = re.compile(r"export[\t\n\f\r ]+")
# parser.go escapeSeqRegex: the escapes a double-quoted value reads.
_ESCAPE = re.compile(r'\\(?:[abcfnrtv$"\\]|0[0-9]{0,3})')
_ESCAPED = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    '"': '"',
    "\\": "\\",
}
_NAME_PUNCTUATION = frozenset("_.-[]")
BAD_NAME = (
    "a variable name holds a character compose does not accept (letters, digits and _ . - [ ] "
    "only; KEY=VALUE or KEY: VALUE)"
)


def read_env_file(
    path: Path, lookup: Lookup | None = None, known: Mapping[str, str] | None = None
) -> dict[str, str]:
    """An env file's values, or a ComposeError naming the file (and the line), never its text.

    `lookup` is what compose-go looks a variable up in first (the environment); `known` what was
    read before this file (a service's earlier env files), looked up after the file's own lines.
    """
    name = str(path)
    if os.path.realpath(path) == os.devnull:
        return {}  # `env_file: /dev/null`, a common placeholder: compose reads it as empty
    text = _read(path, name)
    return parse_env_file(text, name, lookup, known)


def read_dotenv(directory: Path, lookup: Lookup | None) -> dict[str, str]:
    """The project's `.env` in `directory`: read unless it is missing or a directory (compose-go
    cli/options.go WithDotEnv and GetEnvFromFile)."""
    path = directory / ".env"
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            return {}
    except FileNotFoundError:
        return {}
    except OSError:
        pass  # not missing: read, and refused with its reason
    return read_env_file(path, lookup)


def _read(path: Path, name: str) -> str:
    try:
        found = os.stat(path)
    except FileNotFoundError:
        raise ComposeError(name, None, None, "no such file") from None
    except OSError as exc:
        raise ComposeError(name, None, None, f"cannot be read: {exc.strerror}") from None
    _regular(found.st_mode, name)
    try:
        # O_NONBLOCK: a file swapped for a FIFO after the check above opens without waiting.
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ComposeError(name, None, None, f"cannot be read: {exc.strerror}") from None
    try:
        _regular(os.fstat(handle).st_mode, name)
        with os.fdopen(handle, "rb", closefd=False) as stream:
            raw = stream.read(MAX_ENV_FILE_BYTES + 1)
    except OSError as exc:
        raise ComposeError(name, None, None, f"cannot be read: {exc.strerror}") from None
    finally:
        os.close(handle)
    if len(raw) > MAX_ENV_FILE_BYTES:
        raise ComposeError(
            name,
            None,
            None,
            f"the file is over {MAX_ENV_FILE_BYTES // 1024} KiB; an env file is far smaller",
        )
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # godotenv.go: a UTF-8 byte order mark is skipped
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ComposeError(name, None, f"line {line}", "not UTF-8 text") from None
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise ComposeError(
            name, None, f"line {line}", "holds a NUL byte, which no environment variable can hold"
        )
    return text


def _regular(mode: int, name: str) -> None:
    if stat.S_ISDIR(mode):
        raise ComposeError(name, None, None, "is a directory, not an env file")
    if not stat.S_ISREG(mode):
        raise ComposeError(
            name, None, None, "is not a regular file (a FIFO, a socket or a device): not read"
        )


def parse_env_file(
    text: str, path: str, lookup: Lookup | None = None, known: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The values of an env file's text, as compose-go's dotenv parser reads them (see above).

    Errors are ComposeErrors naming `path` and the line, never the line's text.
    """
    values: dict[str, str] = {}

    def resolve(variable: str) -> str | None:
        # godotenv.go expandVariables: the lookup first, then what was read before.
        found = lookup(variable) if lookup is not None else None
        if found is None:
            found = values.get(variable)
        if found is None and known is not None:
            found = known.get(variable)
        return found

    reader = _Reader(text.removeprefix("\ufeff"), path)
    while (statement := reader.key()) is not None:
        key, inherited = statement
        if inherited:
            found = resolve(key)
            if found is not None:
                values[key] = found
            continue
        values[key] = reader.value(resolve)
    return values


def _is_space(char: str) -> bool:
    """Go's unicode.IsSpace."""
    return char in "\t\n\v\f\r \x85\xa0" or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def _rstrip(text: str) -> str:
    """Go's strings.TrimRightFunc(text, unicode.IsSpace)."""
    end = len(text)
    while end and _is_space(text[end - 1]):
        end -= 1
    return text[:end]


def _name_char(char: str) -> bool:
    """parser.go locateKeyName: a letter or a number (Go's unicode.IsLetter/IsNumber), _ . - [ ]."""
    return char in _NAME_PUNCTUATION or unicodedata.category(char)[0] in ("L", "N")


class _Reader:
    """parser.go's parser: a position in the text and the line it is on."""

    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.path = path
        self.at = 0
        self.line = 1

    def fail(self, line: int, msg: str) -> ComposeError:
        return ComposeError(self.path, None, f"line {line}", msg)

    def _statement(self) -> bool:
        """getStatementStart: past blank space and comment lines; False at the end of the text."""
        text = self.text
        while True:
            while self.at < len(text) and _is_space(text[self.at]):
                if text[self.at] == "\n":
                    self.line += 1
                self.at += 1
            if self.at >= len(text):
                return False
            if text[self.at] != "#":
                return True
            end = text.find("\n", self.at)
            if end < 0:
                self.at = len(text)
                return False
            self.at = end

    def key(self) -> tuple[str, bool] | None:
        """locateKeyName: the next statement's name, and whether it stands alone (inherited)."""
        if not self._statement():
            return None
        line = self.line
        if _EXPORT.match(self.text, self.at):
            self.at += len("export")
            self._skip_spaces()
        start = self.at
        end, offset, inherited = self._name_end(line)
        key = self.text[start:end]
        if inherited and " " not in key:
            self.line += 1
        key = _rstrip(key)
        if " " in key:
            raise self.fail(line, "a variable name holds a space")
        self.at = offset
        self._skip_spaces()
        return key, inherited

    def _skip_spaces(self) -> None:
        while self.at < len(self.text) and self.text[self.at] in _SPACE:
            self.at += 1

    def _name_end(self, line: int) -> tuple[int, int, bool]:
        """Where the name ends, where its value starts, and whether a line break ended it.

        With no `=`, `:` or line break before the end of the text, the name is empty and the
        rest is its value, as in compose-go."""
        for i in range(self.at, len(self.text)):
            char = self.text[i]
            if char in "=:\n":
                return i, i + 1, char == "\n"
            if char not in _SPACE and not _name_char(char):
                raise self.fail(line, BAD_NAME)
        return self.at, self.at, False

    def value(self, resolve: Lookup) -> str:
        """extractVarValue: the value after the name, unquoted or quoted."""
        text = self.text
        line = self.line
        quote = text[self.at] if self.at < len(text) and text[self.at] in "'\"" else ""
        if not quote:
            end = text.find("\n", self.at)
            raw = text[self.at :] if end < 0 else text[self.at : end]
            self.at = len(text) if end < 0 else end + 1
            self.line += 1
            return self._expand(_rstrip(raw.split(" #", 1)[0]), resolve, line)
        chars: list[str] = []
        escaped = False
        for i in range(self.at + 1, len(text)):
            char = text[i]
            if char == "\n":
                self.line += 1
            if char != quote:
                if not escaped and char == "\\":
                    escaped = True
                    continue
                if escaped:
                    escaped = False
                    chars.append("\\")
                chars.append(char)
                continue
            if escaped:
                escaped = False
                chars.append(char)
                continue
            self.at = i + 1
            value = "".join(chars)
            if quote == '"':
                value = self._expand(_unescape(value), resolve, line)
            return value
        raise self.fail(line, f"a value opened with {quote} is never closed")

    def _expand(self, value: str, resolve: Lookup, line: int) -> str:
        """expandVariables: compose's interpolation (an unset name reads as "")."""
        try:
            return substitute(value, resolve).text
        except MissingVariable as exc:
            detail = f": {exc.message}" if exc.message else ""
            raise self.fail(line, f"variable {exc.name} is not set{detail}") from None
        except ValueError:
            raise self.fail(line, "an invalid ${…} template (compose refuses it)") from None


def _unescape(value: str) -> str:
    """parser.go expandEscapes: a double-quoted value's escapes (`\\$` stays a literal `$`)."""

    def one(match: re.Match[str]) -> str:
        found = match.group(0)
        if found == "\\$":
            return "$$"  # read by the interpolation as a literal `$`
        if found.startswith("\\0"):
            # `\0ddd` is Go's octal `\ddd`: exactly three octal digits, at most 0o377.
            digits = found[2:]
            if len(digits) == 3 and set(digits) <= set("01234567") and int(digits, 8) <= 0o377:
                return chr(int(digits, 8))
            return found
        return _ESCAPED[found[1]]

    return _ESCAPE.sub(one, value)
