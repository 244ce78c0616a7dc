"""Outside text in the report: command lines and process names shown as text, never as markup."""

from __future__ import annotations

import re

from seats.names import escaped


def short(text: str, width: int = 70) -> str:
    """`text` cut to `width` characters, an ellipsis marking the cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def code_span(text: str) -> str:
    """Outside text as a Markdown code span: shown as text, never as markup.

    The fence is one backtick longer than the longest run inside, padded with a space when the
    text holds backticks (CommonMark strips one space each side); HTML's renderer reads it back.
    """
    text = escaped(text)  # a newline or an escape sequence shown, never obeyed
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# A name that cannot be Markdown: a letter or digit, then letters, digits, `_ . @ + -`.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]*")


def name(text: str) -> str:
    """A name from outside (seat, host, reserve, hold user) as Markdown text.

    A plain name is shown as it is; anything else (`[x](javascript:…)<img onerror>`, a line
    break) inside a code span, so it reads as text in Markdown and in the HTML page.
    """
    return text if _PLAIN_NAME.fullmatch(text) else code_span(text)


def alt_text(text: str) -> str:
    """`text` for a Markdown image's alt: brackets, parentheses and markup characters escaped."""
    return re.sub(r"([\\`*_\[\]()<>!|])", r"\\\1", escaped(text))
