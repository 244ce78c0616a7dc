"""A starter catalogue of one host from one snapshot, as `gpuplan init` writes it.

Every process becomes a running seat; every line of the YAML says, in a comment, where it came
from. Command lines come from anyone who can start a process: they are already masked by the
snapshot, values go through a YAML emitter, and comments carry no newline or control character.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import yaml
from pydantic import ValidationError

from inventory.attribution import server_line
from inventory.snapshot import Card, Snapshot, format_utc
from placement.fit.engines.base import FlagError, flag_value
from placement.fit.engines.registry import recognise
from seats.model import Seat as SeatSpec
from seats.units import MiB
from seats.units import format_bytes as b

# FACTS.md section 1: a fresh process on an idle H200 (driver 580) takes 1,276.8 MiB before a
# vLLM worker's gate reads free memory; rounded up to the MiB, the safe side.
DEFAULT_CUDA_CONTEXT_BYTES = 1277 * MiB
COMMENT_LIMIT = 160  # characters of a command line in a comment; the match holds it whole
NAME_LIMIT = 40
# Flags whose value names the model a server runs, in the order they are preferred.
_MODEL_FLAGS = ("--served-model-name", "--model", "--model-id", "--model-path", "--model_dir", "-m")
_INTERPRETERS = re.compile(r"^(python[0-9.]*|pypy[0-9.]*|node|java|bash|sh|uv|uvx|env)$")
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_REGEX_SPECIAL = frozenset(".^$*+?{}[]\\|()")


@dataclass
class _Group:
    """The processes of one command line: one seat, on every card it holds bytes on."""

    cmdline: str | None
    pids: list[int] = field(default_factory=list)
    per_card: dict[int, int] = field(default_factory=dict)  # card → Σ bytes on it
    recorded: set[str] = field(default_factory=set)  # seat names the snapshot already gives
    lines: list[tuple[int, int, int | None]] = field(default_factory=list)  # pid, card, bytes

    @property
    def unknown_bytes(self) -> bool:
        """True when NVML gave no bytes for one of its processes."""
        return any(used is None for _, _, used in self.lines)


@dataclass(frozen=True)
class Starter:
    """The catalogue's text, and what a reader should be told about it."""

    text: str
    seats: int
    warnings: tuple[str, ...]


def comment_text(text: str, limit: int = COMMENT_LIMIT) -> str:
    """Text safe inside a YAML comment: one line, control and format characters escaped."""
    out = "".join(c if c.isprintable() else _char_escape(c) for c in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def _char_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def scalar(value: object) -> str:
    """One value as a YAML scalar on one line (strings through the emitter, quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if not isinstance(value, str):
        raise TypeError(f"no YAML scalar for {type(value).__name__}")
    if _PLAIN.fullmatch(value) and yaml.safe_load(value) == value:
        return value  # a name as a person writes it ("yes" or "1.5" would read as another type)
    # Single quotes keep a regex readable; anything unprintable takes double quotes and escapes.
    style = "'" if value.isprintable() else '"'
    text: str = yaml.safe_dump(value, default_style=style, width=2**30, allow_unicode=False)
    text = text.removesuffix("\n").removesuffix("\n...")
    if "\n" in text:  # never expected: the emitter folds only past `width`
        text = yaml.safe_dump(value, default_style='"', width=2**30, allow_unicode=False).strip()
    return text


def regex_literal(text: str) -> str:
    """A regex that matches `text` literally; unlike re.escape it leaves spaces and dashes alone."""
    out: list[str] = []
    for char in text:
        if char in _REGEX_SPECIAL:
            out.append("\\" + char)
        elif not char.isprintable():
            out.append(_char_escape(char))
        else:
            out.append(char)
    return "".join(out)


def anchored_match(cmdline: str, others: Iterable[str | None]) -> str:
    """`^cmdline$`, literal: it finds its own command line and none of `others` (re.search)."""
    literal = regex_literal(cmdline)
    rest = [other for other in others if other is not None and other != cmdline]
    for end in ("$", r"\Z"):  # `$` also matches before a final newline; `\Z` never does
        pattern = f"^{literal}{end}"
        compiled = re.compile(pattern)
        if compiled.search(cmdline) and not any(compiled.search(o) for o in rest):
            return pattern
    raise ValueError(f"no anchored regex tells {cmdline!r} from the host's other processes")


def _slug(text: str) -> str:
    text = text.rstrip("/").rsplit("/", 1)[-1]
    text = re.sub(r"\.(py|gguf|sh)$", "", text, flags=re.IGNORECASE)
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")
    return slug[:NAME_LIMIT].strip("-._")


def _flag(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """The value of the first of `names` (in their order of preference) that argv sets."""
    return next((v for name in names if (v := flag_value(argv, name)) is not None), None)


def base_name(argv: Sequence[str]) -> str:
    """A seat name from a command line: the model it serves, else its script or program."""
    program = _slug(argv[0]) if argv else ""
    # `-m` is llama.cpp's model, but Python's module: `python -m pkg` is named below.
    flags = _MODEL_FLAGS if not _INTERPRETERS.match(program) else _MODEL_FLAGS[:-1]
    model = _flag(argv, flags)
    if model is None and len(argv) > 2 and argv[1] == "serve" and not argv[2].startswith("-"):
        model = argv[2]  # `vllm serve MODEL`
    if model is not None and _slug(model):
        return _slug(model)
    words = [w for w in argv if "=" not in w or w.startswith("-")]  # not `HF_TOKEN=*** prog`
    module = False
    while words and (_INTERPRETERS.match(_slug(words[0])) or words[0].startswith("-")):
        module = words[0] == "-m"
        words = words[1:]
        if module:
            break
    for word in words:
        if not word.startswith("-") and _slug(word):
            # `python -m pkg.server` is named for its last part; a script for its file name.
            return _slug(word.rsplit(".", 1)[-1]) if module else _slug(word)
    return ""


def _unique_names(groups: Sequence[_Group], argvs: Sequence[list[str]]) -> list[str]:
    # A snapshot taken with a catalogue names each process's seat: keep that name, so the
    # processes it recorded stay attributed to it.
    bases = [
        next(iter(group.recorded))
        if len(group.recorded) == 1 and _PLAIN.fullmatch(next(iter(group.recorded)))
        else base_name(argv) or f"pid-{group.pids[0]}"
        for group, argv in zip(groups, argvs, strict=True)
    ]
    names: list[str] = []
    for i, base in enumerate(bases):
        name = base
        if bases.count(base) > 1:
            port = _flag(argvs[i], ("--port", "-p"))
            name = (
                f"{base}-{_slug(port)}" if port and _slug(port) else f"{base}-{groups[i].pids[0]}"
            )
        candidate, n = name, 2
        while candidate in names:
            candidate, n = f"{name}-{n}", n + 1
        names.append(candidate)
    return names


def _groups(cards: Sequence[Card]) -> list[_Group]:
    """One group per command line; processes without one (vanished) stay one group per pid."""
    groups: dict[object, _Group] = {}
    for card in cards:
        if not card.ok:
            continue
        for process in card.processes:
            # A process title (`VLLM::EngineCore`) is grouped, and matched, by its server's line.
            line = server_line(process)
            key: object = line if line is not None else ("pid", process.pid)
            group = groups.setdefault(key, _Group(cmdline=line))
            if process.pid not in group.pids:
                group.pids.append(process.pid)
            group.per_card[card.index] = group.per_card.get(card.index, 0) + (
                process.used_bytes or 0
            )
            if process.seat is not None:
                group.recorded.add(process.seat)
            group.lines.append((process.pid, card.index, process.used_bytes))
    return list(groups.values())


def _engine(argv: Sequence[str], seat: dict[str, object]) -> tuple[dict[str, object] | None, str]:
    """The engine fields a recogniser reads from the command line, and how they were found.

    Flags the catalogue would refuse beside the seat's bytes (a KV cache above the resident it
    held then) are left out, and the comment says why: the file must load as written.
    """
    found = recognise(argv)
    if found is None or found.kind == "other":
        return None, "no engine recognised by its command line"
    fields: dict[str, object] = {"kind": found.kind}
    try:
        fields.update(found.read_flags(argv))
    except FlagError as exc:
        return {"kind": found.kind}, f"recognised as {found.title}; its flags left out: {exc}"
    try:
        SeatSpec.model_validate({**seat, "engine": fields})
    except ValidationError as exc:
        message = str(exc.errors()[0].get("msg", "invalid"))
        return {"kind": found.kind}, f"recognised as {found.title}; its flags left out: {message}"
    return fields, f"recognised as {found.title} by its command line"


def _cards_lines(snapshot: Snapshot) -> tuple[list[str], list[str]]:
    ok = [card for card in snapshot.cards if card.ok]
    totals = {card.total_bytes for card in ok}
    lines = [f"    cards: {len(snapshot.cards)}  # NVML lists {len(snapshot.cards)} card(s)"]
    warnings: list[str] = []
    if len(totals) == 1 and None not in totals:
        total = next(iter(totals))
        assert total is not None
        names = sorted({comment_text(c.name or "unnamed") for c in ok})
        lines.append(
            f"    card_total: {total}  # NVML total of card(s) "
            f"{', '.join(str(c.index) for c in ok)} ({b(total)}, {', '.join(names)})"
        )
    elif len(totals) > 1:
        warnings.append("cards of different sizes: card_total left out")
    for card in snapshot.cards:
        if not card.ok:
            warning = f"card {card.index} was in error ({comment_text(card.error or '')}): its processes are unknown"
            warnings.append(warning)
    return lines, warnings


def starter_catalogue(
    snapshot: Snapshot,
    *,
    source: str,
    cuda_context_bytes: int,
    cuda_context_note: str,
) -> Starter:
    """The catalogue YAML of `snapshot`'s host with every process a running seat."""
    host = snapshot.host
    groups = _groups(snapshot.cards)
    argvs = [(group.cmdline or "").split() for group in groups]
    names = _unique_names(groups, argvs)
    cmdlines = [group.cmdline for group in groups]
    taken = format_utc(snapshot.taken_at)
    card_lines, warnings = _cards_lines(snapshot)
    out = [
        f"# gpuplan init: a starter catalogue of {comment_text(host)} from {comment_text(source)},",
        f"# taken {taken} (driver {comment_text(snapshot.driver or 'unknown')}). Every process then",
        "# running is a seat below; keep, rename or retire them, and add `planned` seats to place.",
        *(f"# warning: {comment_text(w)}" for w in warnings),
        "hosts:  # one host: the snapshot's",
        f"  {scalar(host)}:  # the snapshot's host",
        *card_lines,
        f"    cuda_context: {cuda_context_bytes // MiB} MiB  # {comment_text(cuda_context_note)}",
        "seats:  # every process on its cards, one seat per command line"
        if groups
        else "seats: []  # no process held memory on any card",
    ]
    for i, (group, argv, name) in enumerate(zip(groups, argvs, names, strict=True)):
        others = cmdlines[:i] + cmdlines[i + 1 :]
        out.extend(_seat_lines(group, argv, name, host, others, taken, warnings))
    return Starter("\n".join(out) + "\n", len(groups), tuple(warnings))


def _seat_lines(
    group: _Group,
    argv: Sequence[str],
    name: str,
    host: str,
    others: Sequence[str | None],
    taken: str,
    warnings: list[str],
) -> list[str]:
    cards = sorted(group.per_card)
    resident = max(group.per_card.values())
    rounded = max(1, -(-resident // MiB))
    command = "(no command line: the process was gone, or in another PID namespace)"
    if group.cmdline is not None:
        command = comment_text(group.cmdline)
    pids = ", ".join(str(pid) for pid in group.pids)
    lines = ["", f"  # pid {pids}: {command}"]
    for pid, card, used in group.lines:
        figure = "NVML gave no bytes" if used is None else f"{used} B ({b(used)})"
        lines.append(f"  #   pid {pid} on card {card}: {figure}")
    where = "largest on one card, " if len(cards) > 1 else ""
    resident_note = f"{resident} B, {where}rounded up to a MiB"
    if group.unknown_bytes or resident == 0:
        resident_note = "NVML gave no bytes for it: 1 MiB stands in; set the real figure"
        warnings.append(f"seat {name}: NVML gave no bytes for pid {pids}; resident is 1 MiB")
    lines += [
        f"  - name: {scalar(name)}  # {'as the snapshot names it' if name in group.recorded else 'from its command line'}",
        f"    host: {scalar(host)}  # where it ran",
        f"    state: running  # running at {taken}",
        f"    gpus: [{', '.join(str(c) for c in cards)}]  # card(s) it held bytes on",
        f"    resident: {rounded} MiB  # {resident_note}",
    ]
    if group.cmdline is None:
        warnings.append(f"seat {name}: pid {pids} had no command line; no match, so not attributed")
        return lines
    match = anchored_match(group.cmdline, others)
    lines.append(f"    match: {scalar(match)}  # its whole command line, anchored")
    seat = {
        "name": name,
        "host": host,
        "state": "running",
        "gpus": cards,
        "resident": rounded * MiB,
    }
    engine, how = _engine(argv, seat)
    if engine is not None:
        lines.append(f"    engine:  # {comment_text(how)}")
        for key, value in engine.items():
            note = "its engine" if key == "kind" else "read from its flags"
            lines.append(f"      {key}: {scalar(value)}  # {note}")
    else:
        lines.append(f"    # engine: none; {how} (kind other: no gate)")
    return lines
