"""`python -m bench [--quick] [--only NAME] [--refresh-docs]`: run every bench/bench_*.py and print.

Each module's `run() -> str` returns a Markdown section; bench.md keeps the latest of each, with
the machine, Python, date and commit it ran on. It is written to out/bench/ (ignored by git, so a
run leaves `git status` clean), or to docs/ with `--refresh-docs` (`make bench REFRESH_DOCS=1`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from bench import DEFAULT_OUT, OUT_ENV, QUICK_ENV, ROOT

DOCS = ROOT / "docs" / "bench.md"
MARK = re.compile(r"^<!-- bench: ([a-z0-9_]+) -->$", re.MULTILINE)
TITLE = "# gpuplan benchmarks"


def modules() -> list[str]:
    """Names of the bench modules present, without the `bench_` prefix, sorted."""
    return sorted(p.stem.removeprefix("bench_") for p in (ROOT / "bench").glob("bench_*.py"))


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str:
    """Short commit of the working tree, '+dirty' when it has uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def machine_line(quick: bool) -> str:
    """One line naming where and when a section ran."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"_Ran {now} on {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}, commit {git_commit()}"
        + (", `--quick`" if quick else "")
        + "._"
    )


def read_sections(path: Path) -> dict[str, str]:
    """The sections of an existing docs/bench.md, by module name."""
    if not path.exists():
        return {}
    text = path.read_text()
    found = list(MARK.finditer(text))
    sections: dict[str, str] = {}
    for i, mark in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        sections[mark.group(1)] = text[mark.end() : end].strip("\n")
    return sections


def write_sections(path: Path, sections: dict[str, str]) -> None:
    """docs/bench.md: a title, then each module's section in name order."""
    parts = [
        TITLE,
        "",
        "Written by `make bench` (`python -m bench`); each section says the machine it ran on. "
        "Re-run one with `python -m bench --only NAME`.",
        "",
    ]
    for name in sorted(sections):
        parts += [f"<!-- bench: {name} -->", sections[name].strip("\n"), ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts))


def main(argv: list[str] | None = None) -> int:
    """Run the benches; 0 when all ran, 1 when any failed (its section says how)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="skip the slowest parts (each section says what)"
    )
    parser.add_argument(
        "--only", metavar="NAME", action="append", help="run only this bench (repeatable)"
    )
    parser.add_argument("--no-write", action="store_true", help="print only; write no file")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--refresh-docs",
        action="store_true",
        help="write docs/bench.md and the figures it shows (the tracked copies)",
    )
    where.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        help=f"write bench.md and its figures into DIR (default {DEFAULT_OUT.relative_to(ROOT)})",
    )
    args = parser.parse_args(argv)
    names = modules()
    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            parser.error(f"no bench named {', '.join(unknown)}; there are: {', '.join(names)}")
        names = [n for n in names if n in args.only]
    if args.quick:
        os.environ[QUICK_ENV] = "1"
    target = DOCS if args.refresh_docs else (args.out or DEFAULT_OUT) / "bench.md"
    os.environ[OUT_ENV] = str(target.parent)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A first run elsewhere starts from the docs' sections, so its bench.md is whole.
    sections = read_sections(target if target.exists() else DOCS)
    failed = 0
    started = time.perf_counter()
    for name in names:
        print(f"bench {name} …", file=sys.stderr, flush=True)
        began = time.perf_counter()
        try:
            body = importlib.import_module(f"bench.bench_{name}").run()
        except Exception:
            failed += 1
            body = f"## {name}\n\nFAILED:\n\n```\n{traceback.format_exc()}```\n"
            traceback.print_exc()
        took = time.perf_counter() - began
        section = f"{body.strip()}\n\n{machine_line(args.quick)} _({took:.1f} s)_\n"
        print(section, flush=True)
        sections[name] = section
        if not args.no_write:
            # Written after every section, so a run stopped half-way keeps what it measured.
            write_sections(target, sections)
        print(f"bench {name}: {took:.1f} s", file=sys.stderr, flush=True)
    print(f"all benches: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if not args.no_write:
        print(f"wrote {target}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
