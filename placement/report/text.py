"""Outside text in the report: command lines and process names shown as text, never as markup."""

from __future__ import annotations

import re


def short(text: str, width: int = 70) -> str:
    """`text` cut to `width` characters, an ellipsis marking the cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def code_span(text: str) -> str:
    """Outside text as a Markdown code span: shown as text, never as markup.

    The fence is one backtick longer than the longest run inside, padded with a space when the
    text holds backticks (CommonMark strips one space each side); HTML's renderer reads it back.
    """
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"
