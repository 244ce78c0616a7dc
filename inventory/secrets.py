"""Secrets out of command lines, before anything stores, matches, exports or shows them.

A command line comes from anyone who can start a process on the host. Masked (to `***`),
as DESIGN.md "Text from outside" lists them:
- the value after a flag whose name's last word (split at `-`, `_` and camelCase, any case) is a
  secret word: `--api-key X`, `--hf-token X`, `--hfToken X`, `-password X`; not
  `--max-num-batched-tokens` (last word `tokens`) nor `--tokenizer`;
- the value of a `NAME=value` wherever it stands in a word, when NAME's last word is one:
  `HF_TOKEN=…`, `--api-key=…`, `--env=HF_TOKEN=…`, `-eTOKEN=…`, `?token=…`; not `MAX_TOKENS=…`;
- the password of a URL's userinfo, whatever it holds (`/`, `@`), with an empty user
  (`redis://:PW@host`) or without a scheme (`user:PW@proxy:3128`);
- the value after an `Authorization:` (or secret-named) header and its scheme word
  (`Authorization: Bearer X`), and after any `Bearer`;
- the value of `-p X` (or `-pX`) once a `-u USER` came before it (mysql's spelling), or once
  `sshpass` came;
and beyond the last word (issue 32): a flag or NAME any of whose words is `key`, `keys`, `token`,
`secret`, `password`, `pwd`, `passphrase`, `auth`, `credential`, `sig` or `signature` (a word
ending in `password`, `passwd`, `passphrase` or `apikey` counts: `PGPASSWORD`), unless its last
word is a count or a size (`--max-num-batched-tokens`, `--key-size`): `--api-keys X`,
`--private-key-b64 X`, `SECRET_KEY_BASE=X`, `MYSQL_PWD=X`, `?sig=X`; the userinfo of a URL with
a scheme and no colon (`https://TOKEN@github.com`); the password of `-u user:PW` (curl), whose
`uid:gid` stays; `Authorization:Bearer X` without the space; and the value of a quoted key of
those names inside an argument (`--config '{"api_key": "X"}'`).
Masking is idempotent: a masked line masks to itself. It errs towards masking: a word that
only looks like a secret's value is masked too.
"""

from __future__ import annotations

import re
from functools import lru_cache

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
# Words that make a name secret wherever they stand in it, unless its last word is a count or a
# size (DESIGN.md "Text from outside", extended): `--api-keys`, `SECRET_KEY_BASE`, `MYSQL_PWD`.
ANY_WORDS = frozenset(
    {
        "key",
        "keys",
        "token",
        "secret",
        "password",
        "pwd",
        "passphrase",
        "auth",
        "credential",
        "sig",
        "signature",
    }
)
# A word that ends in one of these is that word run into a prefix (`PGPASSWORD`, `DBPASSWD`):
# an upper-case name gives no camelCase to split at.
_RUN_IN = ("password", "passwd", "passphrase", "apikey")
COUNT_WORDS = frozenset({"tokens", "len", "length", "size", "bytes", "num", "count"})
# Words an `Authorization:` header puts before its secret (RFC 9110 schemes, GitHub's `token`).
_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "negotiate", "apikey"})

# Cheap gate: a line with none of these has nothing to mask (`-p` for `-u USER -p X`, `-u` for
# curl's `-u user:PW`).
_HINT = re.compile(
    r"key|token|secret|pass|pwd|sig|auth|credential|bearer|@|(?:^|\s)['\"]?-[pu]|--user", re.I
)
_QUOTES = "'\""
# One word of a name: an acronym before a capitalised word (`HF` of `HFToken`), a capitalised
# or lower-case word, an acronym, digits.
_NAME_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_FLAG = re.compile(r"^['\"]?-{1,2}([A-Za-z0-9][A-Za-z0-9_.-]*)['\"]?$")
_NAME_BEFORE = re.compile(r"[A-Za-z0-9_.-]+$")
_PASSWORD_FLAG = re.compile(r"^['\"]?-p")
_HEADER = re.compile(r"^['\"]?([A-Za-z][A-Za-z0-9_-]*):$")
_USER_RUN_IN = re.compile(r"^['\"]?(?:-u|--user=)[^\s:=]+:")  # `-uadmin:PW`, `--user=admin:PW`
# A Docker image's digest (`image:tag@sha256:…`) is not a password after a user.
_DIGEST = re.compile(r"sha(?:256|384|512):", re.I)
# `Authorization:Bearer` or `X-Api-Key:VALUE` as one word: a header with its value run in.
_HEADER_RUN_IN = re.compile(r"^(['\"]?)([A-Za-z][A-Za-z0-9_-]*):(.+)$")
# A quoted key and its value inside an argument: `{"api_key": "X"}`, `{\"token\":\"X\"}`,
# `{'secret': 'X'}`, `{"key": 123}`.
_QUOTED_KEY = re.compile(
    r"""(?P<q>\\?["'])(?P<name>[A-Za-z0-9_.-]+)(?P=q)\s*:\s*"""
    r"""(?:(?P<v>\\?["'])(?P<string>.*?)(?P=v)|(?P<bare>[^\s,{}\[\]"'\\]+))"""
)
_UID_GID = re.compile(r"^[0-9]+:[0-9]+$")  # `docker run -u 1000:1000` is not a password


@lru_cache(maxsize=4096)  # flag names repeat across a fleet's command lines
def is_secret_name(name: str) -> bool:
    """True when `name` (split at `-`, `_`, `.` and camelCase) names a secret: its last word is a
    secret word, or any of its words is one of `ANY_WORDS` and its last word no count or size."""
    words = [w.lower() for part in re.split(r"[-_.]", name) for w in _NAME_WORD.findall(part)]
    if not words:
        return False
    if words[-1] in SECRET_WORDS:
        return True
    if words[-1] in COUNT_WORDS:
        return False
    return any(word in ANY_WORDS or word.endswith(_RUN_IN) for word in words)


def _masked_value(value: str) -> str:
    # Keep closing quotes (`--api-key "abc"` inside a bash -c string) so the line still reads.
    tail = len(value) - len(value.rstrip(_QUOTES))
    lead = len(value) - len(value.lstrip(_QUOTES))
    if lead == len(value):
        return value  # quotes alone: nothing between them to hide
    return value[:lead] + MASK + (value[len(value) - tail :] if tail else "")


def _mask_assignment(word: str) -> str | None:
    """`word` with the value of its first secret `NAME=value` masked; None when it has none."""
    for equals in (i for i, c in enumerate(word) if c == "="):
        name = _NAME_BEFORE.search(word, 0, equals)
        if name is not None and is_secret_name(name.group().lstrip("-.")):
            return word[: equals + 1] + _masked_value(word[equals + 1 :])
    return None


def _mask_userinfo(word: str) -> str:
    """`word` with a URL's password masked: `scheme://user:PW@host`, `:PW@`, `user:PW@proxy`."""
    at = word.rfind("@")  # the last: a password may hold `@` itself
    if at < 0:
        return word
    scheme = word.find("://", 0, at)
    if scheme >= 0:
        start = scheme + 3
    else:
        # Without a scheme the userinfo starts the word, or a flag's or variable's value.
        equals = word.find("=", 0, at)
        colon = word.find(":", 0, at)
        start = equals + 1 if 0 <= equals < colon else 0
        while start < at and word[start] in _QUOTES:
            start += 1
        if _DIGEST.match(word, at + 1):
            return word
    colon = word.find(":", start, at)
    if colon < 0:
        # A token as a URL's user (`https://TOKEN@github.com`); `git@github.com:…` has no scheme.
        user = word[start:at]
        if scheme < 0 or not user or any(c in user for c in "/?#") or _DIGEST.match(word, at + 1):
            return word
        return word[:start] + MASK + word[at:]
    if "/" in word[start:colon] or colon + 1 == at:
        return word
    return word[: colon + 1] + MASK + word[at:]


def _mask_user_password(value: str) -> str:
    """curl's `-u user:PW`: the password masked; a `uid:gid` (docker's `-u`) stays."""
    colon = value.find(":")
    if colon < 0 or _UID_GID.match(value.strip(_QUOTES)):
        return value
    return value[: colon + 1] + _masked_value(value[colon + 1 :])


def _mask_quoted_keys(line: str) -> str:
    """`line` with the value of every quoted secret-named key masked (`{"api_key": "X"}`)."""

    def masked(found: re.Match[str]) -> str:
        if not is_secret_name(found["name"]):
            return found[0]
        if found["bare"] is not None:
            return found[0][: found.start("bare") - found.start()] + MASK
        if not found["string"]:
            return found[0]
        start, end = found.start("string") - found.start(), found.end("string") - found.start()
        return found[0][:start] + MASK + found[0][end:]

    return _QUOTED_KEY.sub(masked, line)


class _Reader:
    """What the words read so far say about the next one."""

    def __init__(self) -> None:
        self.secret_next = False  # the next word is a secret flag's or header's value
        self.scheme_may_come = False  # ... and an `Authorization:` scheme word may come first
        self.user_next = False  # the next word is `-u`'s user
        self.user_seen = False  # a `-u USER` came: `-p` is a password

    def word(self, word: str) -> str:
        """`word` masked as what came before it says."""
        if self.secret_next and not word.startswith("--"):
            return self._value(word)
        self.secret_next = self.scheme_may_come = False
        if self.user_next:
            self.user_next = False
            if not word.startswith("-"):
                self.user_seen = True
                return _mask_user_password(_mask_userinfo(word))
        if word.strip(_QUOTES).rsplit("/", 1)[-1] == "sshpass":
            self.user_seen = True  # `sshpass -p PW ssh …`: its -p is a password
        word = _mask_userinfo(word)
        masked = _mask_assignment(word)
        if masked is not None:
            return masked
        flag = _FLAG.match(word)
        if self.user_seen and _PASSWORD_FLAG.match(word):
            return self._password(word, flag.group(1) if flag is not None else "")
        if flag is not None and is_secret_name(flag.group(1)):
            self.secret_next = True
        elif flag is not None:
            self._user(word, flag.group(1))
        elif _USER_RUN_IN.match(word):
            self.user_seen = True
            return _mask_user_password(word)  # `-uadmin:PW`, `--user=admin:PW`
        else:
            return self._header(word)
        return word

    def _value(self, word: str) -> str:
        """A secret flag's or header's value; an `Authorization:` scheme word stays."""
        if self.scheme_may_come and word.strip(_QUOTES).lower() in _SCHEMES:
            self.scheme_may_come = False
            return word
        self.secret_next = self.scheme_may_come = False
        return _masked_value(word)

    def _user(self, word: str, name: str) -> None:
        if name in ("u", "user"):
            self.user_next = True
        elif name.startswith("u") and word.lstrip(_QUOTES).startswith("-u"):
            self.user_seen = True  # `-uroot`

    def _header(self, word: str) -> str:
        """`word`, with a secret header's value masked where it runs in (`X-Api-Key:V`); a
        header whose value comes next marks that word secret."""
        header = _HEADER.match(word)
        if header is not None:
            name = header.group(1)
            self.secret_next = self.scheme_may_come = _secret_header(name)
            return word
        run_in = _HEADER_RUN_IN.match(word)
        if run_in is not None and _secret_header(run_in.group(2)):
            value = run_in.group(3)
            if value.strip(_QUOTES).lower() in _SCHEMES:
                self.secret_next = True  # `Authorization:Bearer X`: the value is the next word
                return word
            return word[: run_in.start(3)] + _masked_value(value)
        if word.strip(_QUOTES).lower() == "bearer":
            self.secret_next = True
        return word

    def _password(self, word: str, name: str) -> str:
        """`-p X` or `-pX` once `-u USER` came: mysql reads what runs in after `-p` as the
        password (`-pSECRET`, `-pwd0000`), so it is masked even where it spells a secret word;
        a flag that is one secret word (`-password X`, `-pwd X`) masks the next word too."""
        start = word.index("-p") + 2
        if start == len(word.rstrip(_QUOTES)):
            self.secret_next = True
            return word
        words = _NAME_WORD.findall(name)
        self.secret_next = len(words) == 1 and is_secret_name(name)
        return word[:start] + _masked_value(word[start:])  # `-pPASSWORD`, mysql's spelling


def _secret_header(name: str) -> bool:
    return name.lower() == "authorization" or is_secret_name(name)


# A process's line repeats in every snapshot that sees it (an imported week: 80,000 lines, a
# few dozen distinct): each distinct line is masked once.
@lru_cache(maxsize=4096)
def mask_cmdline(line: str) -> str:
    """`line` with every secret value replaced by `***` (see the module's rules)."""
    if not _HINT.search(line):
        return line
    parts = re.split(r"(\s+)", _mask_quoted_keys(line))
    reader = _Reader()
    for i in range(0, len(parts), 2):
        if parts[i]:
            parts[i] = reader.word(parts[i])
    return "".join(parts)
