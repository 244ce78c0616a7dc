"""Finding the vLLM server in a service's command, entrypoint or image; nothing is ever run.

A shell wrapper (`bash -c "…"`) is only split into words (shlex), never handed to a shell.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence

from placement.fit.engines.base import CONTINUATION as _CONTINUATION
from placement.fit.engines.base import image_version as tag_version
from placement.fit.engines.base import split_command

Expand = Callable[[str], str]
__all__ = ["IMAGES", "VERSION_TAG", "image_version", "split_command", "vllm_args"]

_SHELLS = {"sh", "bash", "dash", "ash", "zsh"}
_SHELL_OPERATORS = {"&&", "||", ";", "|", "&", ";;", "(", ")"}


def vllm_args(argv: Sequence[str], expand: Expand = str) -> tuple[list[str], bool] | None:
    """The arguments after `vllm serve` or `-m vllm.entrypoints.openai.api_server`, if any.

    The bool says whether a positional model may come first (`vllm serve MODEL`). `expand`
    turns a shell script's `$VAR` into the container's value (`bash -c "… $UTIL"`).
    """
    direct = _direct_args(argv)
    if direct is not None:
        return direct
    for i in range(len(argv)):
        if _is_shell_c(argv, i):
            found = _shell_args(expand(argv[i + 2]), expand)
            if found is not None:
                return found
    return None


def _direct_args(argv: Sequence[str]) -> tuple[list[str], bool] | None:
    for i, token in enumerate(argv):
        base = token.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(argv) and argv[i + 1] == "serve":
            return list(argv[i + 2 :]), True
        if token == "-m" and i + 1 < len(argv):
            module = argv[i + 1]
            if module == "vllm.entrypoints.openai.api_server":
                return list(argv[i + 2 :]), False
            if module == "vllm.entrypoints.cli.main" and argv[i + 2 : i + 3] == ["serve"]:
                return list(argv[i + 3 :]), True
    return None


def _is_shell_c(argv: Sequence[str], i: int) -> bool:
    return (
        argv[i].rsplit("/", 1)[-1] in _SHELLS
        and i + 2 < len(argv)
        and re.fullmatch(r"-[a-z]*c", argv[i + 1]) is not None
    )


def _shell_args(script: str, expand: Expand) -> tuple[list[str], bool] | None:
    """`bash -c "vllm serve …"`: split the string (never run it) and look inside."""
    try:
        lexer = shlex.shlex(_CONTINUATION.sub(" ", script), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        inner = list(lexer)
    except ValueError:
        return None
    found = vllm_args(inner, expand)
    if found is None:
        return None
    args, positional = found
    for j, arg in enumerate(args):
        if arg in _SHELL_OPERATORS:
            return args[:j], positional
    return args, positional


# vllm/vllm-openai tags its releases `v0.11.0` (and `v0.10.1.1`, `v0.8.5.post1`), with a
# suffix for variants (`v0.11.0-cu130`); `latest` and `nightly` name no version.
IMAGES = ("vllm/vllm-openai",)
VERSION_TAG = re.compile(r"v?(?P<version>\d+\.\d+(?:\.\d+)*(?:\.?post\d+|rc\d+)?)(?:[-+].*)?")


def image_version(image: str | None) -> tuple[bool, str | None]:
    """(is the vLLM image, its version when the tag is one): `vllm/vllm-openai:v0.11.0` → (True, '0.11.0')."""
    return tag_version(image, IMAGES, VERSION_TAG)
