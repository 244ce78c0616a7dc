"""A starter catalogue of one host from one snapshot, as `gpuplan init` writes it.

Every process becomes a running seat; every line of the YAML says, in a comment, where it came
from. Command lines come from anyone who can start a process: they are already masked by the
snapshot, values go through a YAML emitter, and comments carry no newline or control character.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import yaml
from pydantic import ValidationError

from inventory.attribution import is_title, server_line
from inventory.snapshot import Card, Process, Snapshot, format_utc
from placement.cli.notes_text import note_text
from placement.fit.engines.base import FlagError, HostFiles, ModelName, flag_value
from placement.fit.engines.registry import recognise, worker_of
from seats.model import Seat as SeatSpec
from seats.units import MiB
from seats.units import format_bytes as b

# docs/facts.md §1: a fresh process on an idle H200 (driver 580) takes 1,276.8 MiB before a
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
    # A worker whose line is the same in every server of its engine, with no server found
    # among its ancestors: its match would find every such worker of the host.
    lone_worker: bool = False

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


# What `init` reads of a host's files to name a seat after its model (an Ollama manifest): a
# folder's first files and a file's first bytes, no more.
LISTING_LIMIT = 1024
READ_LIMIT = 64 * 1024


class RootFiles:
    """The files below one root, read-only: `/proc/PID/root` is a process's own view of them
    (its container's), so a path on its command line is read where it points."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def read_text(self, path: str) -> str | None:
        """The first 64 KiB of the file as text (a manifest is about 1 KiB); None where it
        cannot be read."""
        try:
            with self._path(path).open("rb") as handle:
                return handle.read(READ_LIMIT).decode("utf-8", errors="replace")
        except OSError:
            return None

    def listing(self, folder: str) -> list[str]:
        """Files below `folder`, relative to it, sorted (at most LISTING_LIMIT of them)."""
        base = self._path(folder)
        found: list[str] = []
        for top, _, files in os.walk(base):
            for name in files:
                found.append(Path(top, name).relative_to(base).as_posix())
                if len(found) >= LISTING_LIMIT:
                    return sorted(found)
        return sorted(found)


def process_files(pid: int) -> HostFiles:
    """A running process's view of the files (its container's, where it runs in one)."""
    return RootFiles(f"/proc/{pid}/root")


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


def _literal_without(cmdline: str, volatile: Sequence[str]) -> str:
    """`cmdline` as a literal regex, each value of a `volatile` flag (`--port 41234`,
    `--port=41234`) a pattern of any such value instead."""
    words = cmdline.split(" ")
    out: list[str] = []
    after_flag = False
    for word in words:
        name, equals, value = word.partition("=")
        if after_flag and word:
            out.append("[0-9]+" if word.isdigit() else r"\S+")
        elif equals and name in volatile:
            out.append(regex_literal(name) + "=" + ("[0-9]+" if value.isdigit() else r"\S+"))
        else:
            out.append(regex_literal(word))
        after_flag = word in volatile
    return " ".join(out)


def anchored_match(cmdline: str, others: Iterable[str | None], volatile: Sequence[str] = ()) -> str:
    """`^cmdline$`, literal: it finds its own command line and none of `others` (re.search).

    The values of `volatile` flags (a port the engine picks at every start) are matched as any
    such value, so the seat is still found after a restart; where that would find another of
    `others` too, they are kept literal.
    """
    rest = [other for other in others if other is not None and other != cmdline]
    if volatile:
        loose = _literal_without(cmdline, volatile)
        for end in ("$", r"\Z"):
            compiled = re.compile(f"^{loose}{end}")
            if compiled.search(cmdline) and not any(compiled.search(o) for o in rest):
                return compiled.pattern
    literal = regex_literal(cmdline)
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
    if model is None:
        model = _served(argv)
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


def _served(argv: Sequence[str]) -> str | None:
    """The MODEL of `… serve MODEL`, wherever `serve` stands: `vllm serve X`, and the same seen
    through its interpreter (`/usr/bin/python3 /usr/local/bin/vllm serve X`, `python3 -m
    vllm.entrypoints.cli.main serve X`)."""
    for i, word in enumerate(argv[1:-1], start=1):
        if word == "serve" and not argv[i + 1].startswith("-"):
            return argv[i + 1]
    return None


@dataclass(frozen=True)
class _Name:
    """A seat's name, where it came from, and why it may not hold over a restart (None: it will)."""

    name: str
    how: str
    unstable: str | None = None


def _base(group: _Group, argv: list[str], files: HostFiles | None) -> _Name:
    # A snapshot taken with a catalogue names each process's seat: keep that name, so the
    # processes it recorded stay attributed to it.
    if len(group.recorded) == 1 and _PLAIN.fullmatch(next(iter(group.recorded))):
        return _Name(next(iter(group.recorded)), "as the snapshot names it")
    found = recognise(argv) if argv else None
    model: ModelName | None = found.model_name(argv, files) if found is not None else None
    if model is not None and _slug(model.name):
        return _Name(
            _slug(model.name),
            f"from {comment_text(note_text(model.how))}",
            None if model.stable else note_text(model.how),
        )
    name = base_name(argv)
    if name:
        return _Name(name, "from its command line")
    return _Name(f"pid-{group.pids[0]}", "from its pid", "named after its pid")


def _unique_names(
    groups: Sequence[_Group], argvs: Sequence[list[str]], files: Sequence[HostFiles | None]
) -> list[_Name]:
    bases = [_base(*each) for each in zip(groups, argvs, files, strict=True)]
    names: list[_Name] = []
    taken: set[str] = set()
    for i, base in enumerate(bases):
        found = base
        if sum(other.name == base.name for other in bases) > 1:
            found = _told_apart(base, groups[i], argvs[i])
        candidate, n = found.name, 2
        while candidate in taken:
            candidate, n = f"{found.name}-{n}", n + 1
        taken.add(candidate)
        names.append(_Name(candidate, found.how, found.unstable))
    return names


def _told_apart(base: _Name, group: _Group, argv: Sequence[str]) -> _Name:
    """A name shared by several command lines, told apart by its port; by its pid where the port
    is one its engine picks anew at every start (or there is none): a name that will not hold."""
    port = _flag(argv, ("--port", "-p"))
    found = recognise(argv) if argv else None
    volatile = found.volatile_flags(argv) if found is not None else ()
    if port and _slug(port) and "--port" not in volatile:
        return _Name(f"{base.name}-{_slug(port)}", base.how, base.unstable)
    why = "its port is picked anew at every start" if port else "it has no port"
    return _Name(
        f"{base.name}-{group.pids[0]}",
        base.how,
        f"told apart from its namesakes by its pid ({why})",
    )


def _groups(cards: Sequence[Card]) -> list[_Group]:
    """One group per command line; processes without one (vanished, or an empty line) stay one
    group per pid; a worker whose line every server of its engine shares is its server's."""
    groups: dict[object, _Group] = {}
    for card in cards:
        if not card.ok:
            continue
        for process in card.processes:
            line, lone = _group_line(process)
            key: object = line if line is not None else ("pid", process.pid)
            group = groups.setdefault(key, _Group(cmdline=line))
            group.lone_worker = group.lone_worker or lone
            if process.pid not in group.pids:
                group.pids.append(process.pid)
            group.per_card[card.index] = group.per_card.get(card.index, 0) + (
                process.used_bytes or 0
            )
            if process.seat is not None:
                group.recorded.add(process.seat)
            group.lines.append((process.pid, card.index, process.used_bytes))
    return list(groups.values())


def _group_line(process: Process) -> tuple[str | None, bool]:
    """The line a process is grouped and matched by, and whether it is a worker whose server was
    not found: a process title (`VLLM::EngineCore`) by its server's line; a worker of a line
    every server shares (TensorRT-LLM's `python -m mpi4py.futures.server`) by the nearest
    ancestor an engine recognises as its server; an empty line by none."""
    line = server_line(process)
    if line is None or not line.strip():
        return None, False
    if worker_of(line.split()) is None:
        return line, False
    for parent in process.parents:
        argv = parent.split()
        if argv and not is_title(parent) and worker_of(argv) is None and recognise(argv):
            return parent, False
    return line, True


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
    files_of: Callable[[int], HostFiles] | None = None,
) -> Starter:
    """The catalogue YAML of `snapshot`'s host with every process a running seat.

    `files_of(pid)`: the files a running process sees (`process_files`), where an engine names
    its model from its own store; None where the snapshot was taken elsewhere.
    """
    host = snapshot.host
    groups = _groups(snapshot.cards)
    argvs = [(group.cmdline or "").split() for group in groups]
    files = [files_of(group.pids[0]) if files_of is not None else None for group in groups]
    names = _unique_names(groups, argvs, files)
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
    unstable = [f"{n.name} ({n.unstable})" for n in names if n.unstable is not None]
    if unstable:
        warnings.append(
            "names init could not make stable, rename them before a restart moves them: "
            + "; ".join(unstable)
        )
    return Starter("\n".join(out) + "\n", len(groups), tuple(warnings))


def _seat_lines(
    group: _Group,
    argv: Sequence[str],
    found: _Name,
    host: str,
    others: Sequence[str | None],
    taken: str,
    warnings: list[str],
) -> list[str]:
    name = found.name
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
        f"  - name: {scalar(name)}  # {found.how}"
        + (f"; not stable: {comment_text(found.unstable)}" if found.unstable else ""),
        f"    host: {scalar(host)}  # where it ran",
        f"    state: running  # running at {taken}",
        f"    gpus: [{', '.join(str(c) for c in cards)}]  # card(s) it held bytes on",
        f"    resident: {rounded} MiB  # {resident_note}",
    ]
    if group.cmdline is None:
        warnings.append(f"seat {name}: pid {pids} had no command line; no match, so not attributed")
        return lines
    engine_rule = recognise(argv) if argv else None
    volatile = engine_rule.volatile_flags(argv) if engine_rule is not None else ()
    match = anchored_match(group.cmdline, others, volatile)
    how = "its whole command line, anchored"
    if volatile and match != anchored_match(group.cmdline, others):
        how += f"; any {', '.join(volatile)} (its engine picks a new one at every start)"
    if group.lone_worker:
        how += "; a worker whose server was not among its parents: it finds every such worker"
        warnings.append(
            f"seat {name}: pid {pids} is a worker every server of its engine shares, and no "
            "server was found among its parents: its match finds every such worker of the host"
        )
    lines.append(f"    match: {scalar(match)}  # {comment_text(how)}")
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
