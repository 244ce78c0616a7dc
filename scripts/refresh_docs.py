"""Run the command examples of README.md and docs/*.md; rewrite their shown output from real runs.

`python scripts/refresh_docs.py` rewrites the docs in place; `--check` only compares and exits 1
on a difference (tests/test_docs.py runs the same comparison).

What is run. Every fenced block whose info string is `console`: each line `$ gpuplan …` is a
command, the lines under it (up to the next `$ ` line or the fence) its shown output. A command
may start with `NAME=value` assignments (its environment), end with `2>&1` (stderr shown too,
interleaved; else only stdout is shown) and end with a comment `# exit N` (the exit code it must
return; none means 0); a trailing backslash continues it on the next line. Any other shell
syntax (pipes, redirections, other programs) is refused: such examples go in `sh` blocks.

How it is run. `gpuplan ARGS` runs as `sys.executable -m placement ARGS`, with PYTHONPATH the
repository root, in a fresh temporary folder per block that links every top-level entry of the
repository (so `seats/catalogue/fv-ml1.yaml` and `examples/*.yaml` resolve, and a file a command
writes lands in that folder); the commands of one block share it, in order. The environment is
only PATH, HOME, PYTHONPATH, LC_ALL=C.UTF-8, TZ=UTC and COLUMNS=100, so no GPUPLAN_* variable
of the caller leaks in.

How output is compared. Trailing spaces and trailing blank lines are stripped. A shown line that
is only `…` stands for any number of omitted lines (the shown parts must appear in order; the
first and last are anchored to the start and end unless a `…` comes before or after them).
VOLATILE lists the regular expressions replaced on both sides before comparing: solver and
command timings (`0.20 s`) and a hold's clock times (`14:33Z`). Everything else must be equal.

`sh`, `bash` and `shell` blocks are not run; their `gpuplan …` commands are parsed by the real
argument parser (a renamed flag fails), and their `make TARGET` names must be Makefile targets.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ELISION = "…"
REFRESH_HINT = "run `python scripts/refresh_docs.py` to rewrite the shown outputs from real runs, then read its diff"

# (pattern, replacement) applied to shown and real output alike before comparing.
VOLATILE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b\d+\.\d+ s\b"), "<seconds> s"),  # solver and command timings
    # A hold's times: when the example ran (with its date when it ends on the next day).
    (re.compile(r"\b(?:\d{4}-\d\d-\d\d )?\d\d:\d\dZ\b"), "<hh:mm>Z"),
)

_FENCE = re.compile(r"^(`{3,})\s*([\w-]*)")
_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELL_OPERATORS = ("|", "&", ";", "<", ">", "`", "$")
_RUN_INFOS = ("console",)
_PARSE_INFOS = ("sh", "bash", "shell")


class DocsError(Exception):
    """A console example that cannot be run as written (bad syntax, an unsupported command)."""


@dataclass(frozen=True)
class Example:
    """One `$ gpuplan …` line of a console block, where it stands, and what it shows."""

    path: Path
    block: int  # line index of the block's opening fence
    first: int  # line index of the `$ ` line
    last: int  # line index of its last continuation line
    end: int  # line index after its shown output
    text: str  # the command as written, continuations joined, `# exit N` removed
    env: tuple[tuple[str, str], ...]
    args: tuple[str, ...]
    merge_stderr: bool
    exit_code: int
    shown: tuple[str, ...]

    @property
    def where(self) -> str:
        """`README.md:123`, the command's line (1-based)."""
        return f"{_shown(self.path)}:{self.first + 1}"


@dataclass(frozen=True)
class Result:
    """What a command really printed and returned."""

    output: tuple[str, ...]
    exit_code: int


def _shown(path: Path) -> str:
    """A path as messages show it: relative to the repository where it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def doc_paths(root: Path = ROOT) -> list[Path]:
    """README.md and every docs/*.md, in a fixed order."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def fenced_blocks(lines: Sequence[str]) -> Iterable[tuple[int, str, int]]:
    """(opening line index, info string, closing line index) of each fenced block."""
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, info = match.group(1), match.group(2)
        close = next(
            (j for j in range(i + 1, len(lines)) if lines[j].rstrip() == fence), len(lines)
        )
        yield i, info, close
        i = close + 1


def parse_command(text: str, where: str) -> tuple[dict[str, str], list[str], bool]:
    """(environment, gpuplan arguments, stderr shown?) of one console command line."""
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError as exc:
        raise DocsError(f"{where}: cannot split `{text}`: {exc}") from exc
    env: dict[str, str] = {}
    while tokens and _ASSIGN.match(tokens[0]):
        name, _, value = tokens.pop(0).partition("=")
        env[name] = value
    merge = bool(tokens) and tokens[-1] == "2>&1"
    if merge:
        tokens.pop()
    if not tokens or tokens[0] != "gpuplan":
        raise DocsError(
            f"{where}: a console block runs `gpuplan …` only; put `{text}` in a sh block"
        )
    bad = [t for t in tokens if t.startswith(_SHELL_OPERATORS)]
    if bad:
        raise DocsError(f"{where}: shell syntax {bad} in `{text}`; put it in a sh block")
    return env, tokens[1:], merge


def _command_lines(lines: Sequence[str], first: int, close: int, where: str) -> tuple[int, str]:
    """The last line index of the command at `first` and its text, continuations joined."""
    parts, last = [lines[first].rstrip()[2:]], first
    while parts[-1].endswith("\\"):
        last += 1
        if last >= close:
            raise DocsError(f"{where}: a continued command runs into the end of its block")
        parts[-1] = parts[-1][:-1].rstrip()
        parts.append(lines[last].strip().removeprefix("> "))
    return last, " ".join(parts)


def console_examples(path: Path) -> list[Example]:
    """Every command of every console block of one Markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Example] = []
    for start, info, close in fenced_blocks(lines):
        if info not in _RUN_INFOS:
            continue
        starts = [j for j in range(start + 1, close) if lines[j].startswith("$ ")]
        if not starts or starts[0] != start + 1:
            raise DocsError(f"{path.name}:{start + 2}: a console block starts with a `$ ` line")
        for k, first in enumerate(starts):
            where = f"{_shown(path)}:{first + 1}"
            last, text = _command_lines(lines, first, close, where)
            end = starts[k + 1] if k + 1 < len(starts) else close
            code = _EXIT.search(text)
            text = _EXIT.sub("", text) if code else text
            env, args, merge = parse_command(text, where)
            found.append(
                Example(
                    path, start, first, last, end, text, tuple(env.items()), tuple(args), merge,
                    int(code.group(1)) if code else 0, tuple(_clean(lines[last + 1 : end])),
                )
            )  # fmt: skip
    return found


def all_examples(root: Path = ROOT) -> list[Example]:
    """Every console example of the docs."""
    return [example for path in doc_paths(root) for example in console_examples(path)]


def _clean(lines: Iterable[str]) -> list[str]:
    """Trailing spaces off every line, trailing blank lines off the end."""
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def _normalise(lines: Iterable[str]) -> list[str]:
    """The lines with every VOLATILE part replaced."""
    out = []
    for line in lines:
        for pattern, replacement in VOLATILE:
            line = pattern.sub(replacement, line)
        out.append(line)
    return out


def _segments(shown: Sequence[str]) -> list[list[str]]:
    """The shown lines split at elision lines (an elision at either end gives an empty part)."""
    parts: list[list[str]] = [[]]
    for line in shown:
        if line.strip() == ELISION:
            parts.append([])
        else:
            parts[-1].append(line)
    return parts


def matches(shown: Sequence[str], real: Sequence[str]) -> bool:
    """Whether the real output is what the doc shows, elisions and VOLATILE parts allowed for."""
    want, got = _normalise(shown), _normalise(real)
    parts = _segments(want)
    if len(parts) == 1:
        return want == got
    head, *middle, tail = parts
    if got[: len(head)] != head or len(got) < len(head) + len(tail):
        return False
    if tail and got[len(got) - len(tail) :] != tail:
        return False
    pos, stop = len(head), len(got) - len(tail)
    for part in middle:
        found = _find(got, part, pos, stop)
        if found is None:
            return False
        pos = found + len(part)
    return True


def _find(lines: Sequence[str], part: Sequence[str], start: int, stop: int) -> int | None:
    """The first index i in [start, stop − len(part)] where `part` stands in `lines`."""
    for i in range(start, stop - len(part) + 1):
        if list(lines[i : i + len(part)]) == list(part):
            return i
    return None


def refreshed(shown: Sequence[str], real: Sequence[str]) -> list[str]:
    """What the doc should show now: the real output, keeping the doc's elisions.

    Each shown part keeps its length. The first and last parts are taken from the start and end
    of the real output; a middle part from where it still stands, else from the real line most
    like its first line (a reworded line is followed), after the part before it.
    """
    parts = _segments(shown)
    if len(parts) == 1:
        return list(real)
    head, *middle, tail = parts
    out: list[str] = list(real[: len(head)])
    pos, stop = len(head), len(real) - len(tail)
    for part in middle:
        out.append(ELISION)
        if not part:
            continue
        found = _find(_normalise(real), _normalise(part), pos, stop)
        if found is None:
            found = _most_like(real, part[0], pos, max(pos, stop - len(part)))
        out.extend(real[found : found + len(part)])
        pos = found + len(part)
    out.append(ELISION)
    out.extend(real[len(real) - len(tail) :] if tail else [])
    return out


def _most_like(lines: Sequence[str], line: str, start: int, stop: int) -> int:
    """The index in [start, stop] of the line most like `line`."""
    scores = [
        (difflib.SequenceMatcher(None, line, lines[i]).ratio(), -i)
        for i in range(start, min(stop, len(lines) - 1) + 1)
    ]
    return -max(scores)[1] if scores else start


def run_block(examples: Sequence[Example], root: Path = ROOT) -> list[Result]:
    """Run one block's commands in order, in a fresh folder that links the repository."""
    with tempfile.TemporaryDirectory(prefix="gpuplan-docs-") as folder:
        for entry in root.iterdir():
            if not entry.name.startswith(".") and entry.name != "out":
                (Path(folder) / entry.name).symlink_to(entry)
        return [_run(example, Path(folder), root) for example in examples]


def _run(example: Example, folder: Path, root: Path) -> Result:
    """One command, as `python -m placement`, with the small fixed environment."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(folder)),
        "PYTHONPATH": str(root),
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "COLUMNS": "100",
        **dict(example.env),
    }
    done = subprocess.run(
        [sys.executable, "-m", "placement", *example.args],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if example.merge_stderr else subprocess.DEVNULL,
        text=True,
        timeout=120,
        check=False,
    )
    return Result(tuple(_clean(done.stdout.splitlines())), done.returncode)


def run_all(examples: Sequence[Example], root: Path = ROOT) -> dict[Example, Result]:
    """Run every example, block by block, several blocks at once.

    A command's output depends only on the commands before it in its block (each block runs in
    a fresh folder), so a block whose commands begin another block's is not run again.
    """
    blocks: dict[tuple[Path, int], list[Example]] = {}
    for example in examples:
        blocks.setdefault((example.path, example.block), []).append(example)
    unique: dict[tuple[object, ...], list[Example]] = {}
    for block in sorted(blocks.values(), key=len, reverse=True):
        if not any(key[: len(block)] == _commands_of(block) for key in unique):
            unique[_commands_of(block)] = block
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        runs = dict(
            zip(unique, pool.map(lambda b: run_block(b, root), unique.values()), strict=True)
        )
    results: dict[Example, Result] = {}
    for block in blocks.values():
        key = next(k for k in runs if k[: len(block)] == _commands_of(block))
        results.update(zip(block, runs[key], strict=False))
    return results


def _commands_of(block: Sequence[Example]) -> tuple[object, ...]:
    """What a block runs, in order: equal for blocks whose outputs must be equal."""
    return tuple((ex.env, ex.args, ex.merge_stderr) for ex in block)


def difference(example: Example, result: Result) -> str | None:
    """Why the doc and the real run differ (a diff and the exit codes), or None."""
    problems = []
    if result.exit_code != example.exit_code:
        problems.append(f"exit code {result.exit_code}, the doc says {example.exit_code}")
    if not matches(example.shown, result.output):
        diff = difflib.unified_diff(
            list(example.shown), list(result.output), "shown in the doc", "real output", lineterm=""
        )
        problems.append("output differs:\n" + "\n".join(diff))
    if not problems:
        return None
    return f"{example.where}: $ gpuplan {shlex.join(example.args)}\n" + "\n".join(problems)


def rewrite(path: Path, results: dict[Example, Result]) -> bool:
    """Write each command's real output and exit code into `path`; True when it changed."""
    lines = path.read_text(encoding="utf-8").splitlines()
    ours = sorted((ex for ex in results if ex.path == path), key=lambda ex: ex.first, reverse=True)
    for example in ours:
        result = results[example]
        output = list(example.shown) if matches(example.shown, result.output) else None
        output = output if output is not None else refreshed(example.shown, result.output)
        last = _EXIT.sub("", lines[example.last].rstrip())
        if result.exit_code:
            last += f"   # exit {result.exit_code}"
        following = lines[example.last + 1 : example.end]
        trailing = [""] if following and not following[-1].strip() else []
        lines[example.last : example.end] = [last, *output, *trailing]
    text = "\n".join(lines) + "\n"
    if text == path.read_text(encoding="utf-8"):
        return False
    path.write_text(text, encoding="utf-8")
    return True


def _commands_in(line: str) -> Iterable[list[str]]:
    """The `gpuplan …` and `make …` commands of one shell line, as argument lists."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    i = 0
    while i < len(tokens):
        if tokens[i].split("/")[-1] in ("gpuplan", "make"):
            j = i + 1
            while j < len(tokens) and not set(tokens[j]) <= set("|&;<>()"):
                j += 1
            args = tokens[i:j]
            if j < len(tokens) and tokens[j].startswith(">") and args and args[-1].isdigit():
                args.pop()  # `2>/dev/null`: the 2 belongs to the redirection
            yield args
            i = j
        i += 1


def _shell_lines(lines: Sequence[str], start: int, close: int) -> Iterable[tuple[int, str]]:
    """(line index, text) of each shell line of a block, continuations joined, comments dropped."""
    j = start + 1
    while j < close:
        first, text = j, lines[j].removeprefix("$ ")
        while text.rstrip().endswith("\\") and j + 1 < close:
            j += 1
            text = text.rstrip()[:-1] + " " + lines[j].strip()
        j += 1
        code = text.split(" #", 1)[0] if not text.lstrip().startswith("#") else ""
        if code.strip():
            yield first, code


def parse_problems(root: Path = ROOT) -> list[str]:
    """Each sh-block `gpuplan` command the parser refuses and each `make` target missing."""
    from placement.cli.main import build_parser  # the real parser, not a copy of it

    targets = set(re.findall(r"^([\w-]+):", (root / "Makefile").read_text(), re.MULTILINE))
    problems = []
    for path in doc_paths(root):
        lines = path.read_text(encoding="utf-8").splitlines()
        for start, info, close in fenced_blocks(lines):
            if info not in _PARSE_INFOS:
                continue
            for index, code in _shell_lines(lines, start, close):
                where = f"{_shown(path)}:{index + 1}"
                for args in _commands_in(code):
                    problem = _check_args(args, targets, build_parser)
                    if problem:
                        problems.append(f"{where}: `{' '.join(args)}`: {problem}")
    return problems


def _check_args(
    args: list[str], targets: set[str], build: Callable[[], argparse.ArgumentParser]
) -> str | None:
    """Why a `make` or `gpuplan` command of a sh block would not parse, or None."""
    if args[0].endswith("make"):
        missing = [
            t for t in args[1:] if "=" not in t and not t.startswith("-") and t not in targets
        ]
        return f"no Makefile target {missing}" if missing else None
    parser = build()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(args[1:])
    except SystemExit as exc:
        return None if exc.code == 0 else err.getvalue().strip().splitlines()[-1]
    return None


_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\n]+)`")
_REPO_PATH = re.compile(
    r"^(?:seats|inventory|placement|scripts|bench|tests|examples|docs)/[\w./-]*$"
)


def _prose(lines: Sequence[str]) -> list[tuple[int, str]]:
    """(line index, text) of the lines outside fenced blocks."""
    inside = {j for start, _, close in fenced_blocks(lines) for j in range(start, close + 1)}
    return [(j, line) for j, line in enumerate(lines) if j not in inside]


def anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces as `-`."""
    text = heading.lstrip("#").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def link_problems(root: Path = ROOT) -> list[str]:
    """Relative links whose file or heading is missing, and repository paths in `code` that are not."""
    anchors = {
        path: {anchor(line) for _, line in _prose(path.read_text(encoding="utf-8").splitlines()) if line.startswith("#")}
        for path in doc_paths(root)
    }  # fmt: skip
    problems = []
    for path in doc_paths(root):
        for index, line in _prose(path.read_text(encoding="utf-8").splitlines()):
            where = f"{_shown(path)}:{index + 1}"
            for target in _LINK.findall(line):
                problem = _link_problem(path, target, anchors)
                if problem:
                    problems.append(f"{where}: link {target}: {problem}")
            for code in _CODE.findall(line):
                for word in code.split():
                    if _REPO_PATH.match(word) and not (root / word).exists():
                        problems.append(f"{where}: `{word}` is not in the repository")
    return problems


def _link_problem(doc: Path, target: str, anchors: dict[Path, set[str]]) -> str | None:
    """Why a relative link of `doc` leads nowhere, or None (web links are not followed)."""
    if re.match(r"^[a-z]+:", target):
        return None
    file, _, fragment = target.partition("#")
    linked = (doc.parent / file).resolve() if file else doc
    if not linked.exists():
        return "no such file"
    if fragment and linked.suffix == ".md" and fragment not in anchors.get(linked, set()):
        return f"no heading #{fragment} in {linked.name}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite the docs' shown outputs (default) or only compare them (`--check`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a difference")
    args = parser.parse_args(argv)
    examples = all_examples()
    results = run_all(examples)
    differences = [d for ex in examples if (d := difference(ex, results[ex]))]
    problems = parse_problems() + link_problems()
    for text in [*differences, *problems]:
        print(text, end="\n\n")
    if args.check:
        print(
            f"{len(examples)} examples run, {len(differences)} differ; {len(problems)} other problems"
        )
        return 1 if differences or problems else 0
    changed = [p for p in doc_paths() if rewrite(p, results)]
    names = ", ".join(_shown(p) for p in changed) or "nothing"
    print(f"{len(examples)} examples run; rewrote {names}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
