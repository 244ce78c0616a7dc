"""Names from outside (seats, reserves, hosts, compose services) that no output line can forge.

A name is printed at the start of verdict lines (`PASS  seat → host:card`): one holding a newline,
a carriage return, an escape sequence or a bidirectional override could print a line of its own
(DESIGN.md "Text from outside"). Such names are bad input where they are read.
"""

from __future__ import annotations

import unicodedata

# Unicode's control (Cc), format (Cf: bidirectional overrides, zero-width marks) and line or
# paragraph separator (Zl, Zp) characters: each moves or hides what a terminal shows after it.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Zl", "Zp"})
_CONTROL_NAMES = {"\n": "a newline", "\r": "a carriage return", "\x1b": "an escape", "\t": "a tab"}


def unprintable(text: str) -> str | None:
    """The first character of `text` that could forge output, as `U+XXXX (NAME)`; None if none."""
    for char in text:
        if unicodedata.category(char) in _UNPRINTABLE:
            name = _CONTROL_NAMES.get(char) or unicodedata.name(char, "a control character")
            return f"U+{ord(char):04X} ({name})"
    return None


NAME_RULE = (
    "a name may not hold control characters, line breaks or bidirectional overrides "
    "(it could print a line of output of its own)"
)


def check_name(name: str) -> str:
    """`name` unchanged; ValueError when it holds a character that could forge a line of output."""
    bad = unprintable(name)
    if bad is not None:
        raise ValueError(f"{visible(name)} holds {bad}: {NAME_RULE}")
    return name


def escaped(text: str) -> str:
    """`text` with every character that could forge output written as an escape (`\\u000a`)."""
    if unprintable(text) is None:
        return text
    return "".join(
        f"\\u{ord(c):04x}" if unicodedata.category(c) in _UNPRINTABLE else c for c in text
    )


def visible(text: str) -> str:
    """`text` quoted, with every character that could forge output written as an escape."""
    return f"'{escaped(text)}'"


def shown_name(name: str) -> str:
    """`name` as it is when it cannot forge output, else `visible(name)` (a name read from a
    snapshot or a ledger, which no loader checked)."""
    return name if unprintable(name) is None else visible(name)
