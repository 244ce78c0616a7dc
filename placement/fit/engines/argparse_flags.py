"""Flags as Python's argparse reads them (3.11, 3.12), for the engines whose servers use it.

argparse's own rule (`ArgumentParser._parse_optional` and `_get_option_tuples`, allow_abbrev on
as vLLM and SGLang leave it): a word that is an option string is that option; `--name=value` is
`--name` with its value; otherwise every option string that starts with the word (the part
before `=`) is a candidate: exactly one is that option, several stop the server with "ambiguous
option: --x could match --a, --b", none with "unrecognized arguments". A word with a space, or
a negative number, is a value. The last of a repeated option wins. vLLM's FlexibleArgumentParser
turns `_` into `-` in a long option's name (up to its first `.`) before argparse sees it.

An engine keeps its option strings by release as data (`vllm_options.py`, `sglang_options.py`);
a version with no list of its own is read with the lists of the releases either side of it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from placement.fit.engines.base import FlagError


def changed(base: str, change: str) -> str:
    """A release's option strings written as its change from `base`: `drop WORD …` takes actions
    out, `after WORD NEW …` puts NEW actions after WORD (`^`: first), in `base`'s order."""
    words = base.split()
    ops: list[list[str]] = []
    for token in change.split():
        if token in ("drop", "after"):
            ops.append([token])
        else:
            ops[-1].append(token)
    for _, *rest in (op for op in ops if op[0] == "drop"):
        words = [w for w in words if w not in rest]
    for _, at, *new in (op for op in ops if op[0] == "after"):
        i = 0 if at == "^" else words.index(at) + 1
        words[i:i] = new
    return " ".join(words)


_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's _negative_number_matcher
_RELEASE = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?")


def release_key(text: str | None) -> tuple[int, int, int, int] | None:
    """'0.4.3.post4' → (0, 4, 3, 4); 'v0.11.0' → (0, 11, 0, 0); None or unreadable → None."""
    found = _RELEASE.match(text or "")
    if found is None:
        return None
    return tuple(int(part or 0) for part in found.groups())  # type: ignore[return-value]


@dataclass(frozen=True)
class OptionTable:
    """One release's option strings: `actions` holds each argparse action's strings."""

    engine: str  # as users write it: "vLLM"
    release: str
    actions: tuple[tuple[str, ...], ...]

    @classmethod
    def parse(cls, engine: str, release: str, text: str) -> OptionTable:
        """A table from its data: one action a word, aliases joined by `|`."""
        return cls(engine, release, tuple(tuple(word.split("|")) for word in text.split()))

    @cached_property
    def canonical(self) -> dict[str, str]:
        """Each option string → its action's first (long) string, the name gpuplan reads it by."""
        names: dict[str, str] = {}
        for strings in self.actions:
            first = next((s for s in strings if s.startswith("--")), strings[0])
            for string in strings:
                names[string] = first
        return names

    def candidates(self, word: str) -> list[str]:
        """The option strings argparse would take `word` (no `=` part) for, in its order."""
        if word in self.canonical:
            return [word]
        if word.startswith("--"):
            return [s for s in self.canonical if s.startswith(word)]
        # A single-dash word: an option of its first two characters (`-q8`), or a prefix.
        return [s for s in self.canonical if s == word[:2] or s.startswith(word)]


@dataclass(frozen=True)
class Option:
    """One option word of a command line as the engine reads it."""

    name: str  # the action's long name: `--kv-cache-memory-bytes`
    written: str  # as written, before `=`: `--kv-cache-memory`
    value: str | None  # the `=value` part, None where there is none
    index: int  # its position in the arguments


class ArgparseReader:
    """One engine's option tables by release, and argparse's reading of a command line."""

    def __init__(
        self, engine: str, releases: Sequence[tuple[str, str]], *, flexible: bool = False
    ) -> None:
        self.engine = engine
        self.tables = tuple(OptionTable.parse(engine, rel, text) for rel, text in releases)
        # vLLM's FlexibleArgumentParser.parse_args, before argparse: `--foo_bar` is `--foo-bar`
        # (up to the first `.`), `--name.key value` is `--name` with a JSON value, and `-O3`,
        # `-O 3` are its own spellings of the compilation level.
        self.flexible = flexible

    def tables_for(self, version: str | None) -> tuple[OptionTable, ...]:
        """The table of the version's own release (same major.minor.patch); else the releases
        either side of it; every table for an unknown version."""
        key = release_key(version)
        if key is None:
            return self.tables
        keyed = [(release_key(t.release), t) for t in self.tables]
        same = [t for k, t in keyed if k is not None and k[:3] == key[:3]]
        if same:
            return (same[-1],)
        below = [t for k, t in keyed if k is not None and k < key]
        above = [t for k, t in keyed if k is not None and k > key]
        return tuple(([below[-1]] if below else []) + ([above[0]] if above else []))

    def _normal(self, word: str) -> str:
        if self.flexible and word.startswith("--"):
            return "--" + word[2:].replace("_", "-")
        return word

    def resolve(self, word: str, version: str | None) -> str:
        """The long name of the option `word` (no `=` part) is; FlagError for an ambiguous or
        unknown one, naming what it could match."""
        tables = self.tables_for(version)
        normal = self._normal(word)
        found: dict[str, list[str]] = {}  # long name → the option strings that gave it
        ambiguous: list[tuple[OptionTable, list[str]]] = []  # tables where it is ambiguous
        for table in tables:
            matches = table.candidates(normal)
            if len(matches) == 1:
                found.setdefault(table.canonical[matches[0]], []).append(table.release)
            elif matches:
                ambiguous.append((table, matches))
        if len(found) == 1:
            return next(iter(found))
        releases = " and ".join(t.release for t in tables)
        exact = (
            version is not None
            and len(tables) == 1
            and release_key(tables[0].release) == release_key(version)
        )
        could = ", ".join(sorted(found) or (ambiguous[-1][1] if ambiguous else []))
        # The message is its start, the engine and release the flags were read with, its end.
        raise FlagError(
            word,
            (
                f"{self.engine} {tables[0].release}"
                if exact
                else f"{self.engine} {version if version is not None else 'of no known version'} "
                f"(read with the flags of {releases})"
            ).join(
                ("ambiguous for ", f": it could match {could}")
                if found
                else (
                    "ambiguous: ",
                    f' stops at start with "ambiguous option: {word} could match {could}"',
                )
                if ambiguous
                else ("no flag of ", f': it stops at start with "unrecognized arguments: {word}"')
            ),
        )

    def _is_string(self, word: str, version: str | None) -> bool:
        normal = self._normal(word)
        return any(normal in table.canonical for table in self.tables_for(version))

    def options(self, args: Sequence[str], version: str | None) -> list[Option]:
        """Every option word of `args` in order, each resolved (`resolve`); values, a lone `-`
        and everything after `--` are left out."""
        found: list[Option] = []
        for index, word in enumerate(args):
            if word == "--":
                break
            if not is_option(word) or (self.flexible and word.startswith("-O")):
                continue
            name, sep, value = word.partition("=")
            explicit = value if sep else None
            if sep and self._is_string(word, version):
                name, explicit = word, None  # an option string holding `=` is itself
            if self.flexible and "." in name:
                name, explicit = name.split(".", 1)[0], None  # `--name.key`: a JSON value
            found.append(Option(self.resolve(name, version), name, explicit, index))
        return found


def is_option(word: str) -> bool:
    """True where argparse reads a word as an option: it starts with `-`, is not `-` alone, a
    negative number, or a word holding a space."""
    if not word.startswith("-") or word == "-":
        return False
    return _NEGATIVE.match(word) is None and " " not in word.partition("=")[0]
