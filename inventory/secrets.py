"""Secrets out of command lines, before anything stores, matches, exports or shows them.

A command line comes from anyone who can start a process on the host. Masked (to `***`):
- the value after a flag whose name's last word (split at `-` and `_`, any case) is a secret
  word: `--api-key X`, `--api-key=X`, `--hf-token X`, `-password X`; not
  `--max-num-batched-tokens` (last word `tokens`) nor `--tokenizer`;
- the value of a `NAME=value` word whose NAME's last word is one: `HF_TOKEN=…`,
  `AWS_SECRET_ACCESS_KEY=…`; not `MAX_TOKENS=…`;
- the password of `scheme://user:password@host`.
Masking is idempotent: a masked line masks to itself.
"""

from __future__ import annotations

import re

MASK = "***"
SECRET_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pass",
        "auth",
        "credential",
        "credentials",
    }
)

# Cheap gate: a line with none of these substrings has nothing to mask.
_HINT = re.compile(r"key|token|secret|pass|auth|credential|://", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]+):([^\s@/]+)@")
_FLAG = re.compile(r"^(['\"]?-{1,2})([A-Za-z0-9][A-Za-z0-9_.-]*)(=(.*))?$", re.DOTALL)
_ASSIGNMENT = re.compile(r"^(['\"]?)([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$", re.DOTALL)
_QUOTES = "'\""


def is_secret_name(name: str) -> bool:
    """True when `name`'s last word (split at `-` and `_`) is a secret word, in any case."""
    return re.split(r"[-_]", name)[-1].lower() in SECRET_WORDS


def _masked_value(value: str) -> str:
    # Keep closing quotes (`--api-key "abc"` inside a bash -c string) so the line still reads.
    tail = len(value) - len(value.rstrip(_QUOTES))
    lead = len(value) - len(value.lstrip(_QUOTES))
    return value[:lead] + MASK + (value[len(value) - tail :] if tail else "")


def _mask_word(word: str, after_secret_flag: bool) -> tuple[str, bool]:
    """(the word masked, whether the next word is a secret flag's value)."""
    if after_secret_flag and not word.startswith("--"):
        return _masked_value(word), False
    flag = _FLAG.match(word)
    if flag:
        if not is_secret_name(flag.group(2)):
            return word, False
        if flag.group(3) is None:
            return word, True
        return f"{flag.group(1)}{flag.group(2)}={_masked_value(flag.group(4))}", False
    assignment = _ASSIGNMENT.match(word)
    if assignment and is_secret_name(assignment.group(2)):
        lead, name, value = assignment.groups()
        return f"{lead}{name}={_masked_value(value)}", False
    return word, False


def mask_cmdline(line: str) -> str:
    """`line` with every secret value replaced by `***` (see the module's rules)."""
    if not _HINT.search(line):
        return line
    line = _URL_PASSWORD.sub(rf"\1:{MASK}@", line)
    parts = re.split(r"(\s+)", line)
    pending = False
    for i in range(0, len(parts), 2):
        if parts[i]:
            parts[i], pending = _mask_word(parts[i], pending)
    return "".join(parts)
