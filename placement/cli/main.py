"""The `gpuplan` command line: a thin shell over the library (STYLE.md).

Each subcommand lives in `placement/cli/<name>.py` with `HELP`, `add_arguments(parser)`
and `run(args) -> int`; heavy imports (pulp, NVML) happen inside `run`, and a
named command imports its own module alone (a `check` in a deploy script runs on every
deploy). A `GpuplanError` exits with its code; anything else is a bug, said in one line with
exit 3. `--debug` adds the traceback and never changes the exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import os
import re
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import Any

# numpy's OpenBLAS starts a thread per core when numpy is first imported (0.17 against 0.07 s of
# CPU for `import numpy` on 2 cores); gpuplan multiplies no large matrices, so one thread serves.
# Set before anything imports numpy; a value the caller set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from inventory.secrets import mask_cmdline
from placement.cli.output import UndeliveredError, leave, outputs_may_leave
from seats.errors import Exit, GpuplanError

# Order is the order `gpuplan --help` lists them in.
COMMANDS: tuple[str, ...] = (
    "init",
    "plan",
    "check",
    "holds",
    "ledger",
    "snapshot",
    "compact",
    "report",
    "pack",
    "calibrate",
    "demo-ledger",
    "exporter",
    "alerts",
    "rules",
    "learn",
    "schema",
    "completion",
)


# Start-up makes ~28,000 objects that live as long as the process (modules, classes, pydantic
# validators). The cyclic collector would scan them over and over while they are made, and
# again at exit: ~30 ms of a `check`'s CPU. A process started as `gpuplan` (`entry`) collects
# nothing until its command's modules are imported, then freezes what is there, so later
# collections (and the one at exit) skip it; new objects are collected as always. `main()`
# called in-process (tests, a program embedding gpuplan) leaves the collector alone.
_START_UP = {"paused": False}


def _pause_collector() -> None:
    gc.disable()
    _START_UP["paused"] = True


def _start_up_done() -> None:
    if _START_UP["paused"]:
        _START_UP["paused"] = False
        gc.freeze()
        gc.enable()


def _module(name: str) -> ModuleType:
    """The command's module; a missing one is a broken install and fails loudly."""
    return importlib.import_module(f"placement.cli.{name.replace('-', '_')}")


class UsageError(SystemExit):
    """argparse refused the command line (exit 2); `message` is what it said."""

    def __init__(self, message: str) -> None:
        super().__init__(Exit.BAD_INPUT)
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse, saying what it refused in a `UsageError` (so `--json` can print it too)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A word like `-5m` is a value, not an unknown option, so `--max-age -5m` reaches the
        # option's own check ("negative") instead of "expected one argument". Python 3.13's
        # argparse reads negative numbers this way itself.
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        # argparse quotes the words it refused ("unrecognized arguments: --api-key sk-…"):
        # masked as a process's command line is, so a mistyped secret is never echoed.
        text = f"{self.prog}: error: {mask_cmdline(message)}"
        print(text, file=sys.stderr)
        raise UsageError(text)


def version() -> str:
    """The installed gpuplan's version (the source tree's when run uninstalled)."""
    # importlib.metadata costs ~30 ms to import: only `--version` pays it.
    from importlib import metadata

    try:
        return metadata.version("gpuplan")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class _Version(argparse.Action):
    """`--version`, reading the installed version only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"gpuplan {version()}")  # on stdout, as argparse's own version action
        parser.exit()


def named_command(words: Sequence[str]) -> str | None:
    """The command a command line runs, when it names one and asks for no top-level help.

    The only top-level options are flags (`--debug`, `--version`, `--help`), so the first
    word that is not an option is the command.
    """
    for word in words:
        if word in ("-h", "--help"):
            return None
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


_TOP_LEVEL = ("-h", "--help", "--debug", "--version")


def misplaced_option(words: Sequence[str]) -> str | None:
    """What to say when a command's option comes before the command (`gpuplan --catalogue F check`).

    argparse would take the option's value for the command ("invalid choice: 'F'").
    """
    for i, word in enumerate(words):
        if not word.startswith("-"):
            return None
        option = word.split("=", 1)[0]
        if option in _TOP_LEVEL:
            continue
        command = next((w for w in words[i + 1 :] if w in COMMANDS), "COMMAND")
        return (
            f"{option} is an option of a command, and options go after the command: "
            f"gpuplan {command} {option} …"
        )
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: one subparser per command module, or `only`'s alone.

    Without `only` every command module is imported (`gpuplan --help` lists them all with
    their HELP, and an unknown command is told every choice); a missing module fails loudly.
    """
    parser = _Parser(
        prog="gpuplan",
        description="GPU placement planner and capacity ledger: where does a seat go, "
        "will it start, and what did the cards hold this week.",
        epilog="Exit codes: 0 ok/pass, 1 refused, 2 bad input, 3 cannot decide.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of gpuplan errors")
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        module = _module(name)
        command = sub.add_parser(
            name, help=module.HELP, description=getattr(module, "DESCRIPTION", module.HELP)
        )
        command.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def _parse(parser: argparse.ArgumentParser, words: Sequence[str]) -> argparse.Namespace:
    """The parsed command line; an option before the command is a usage error saying so."""
    misplaced = misplaced_option(words)
    if misplaced is not None:
        parser.error(misplaced)
    return parser.parse_args(words)


def json_error(exit_code: int, message: str) -> str:
    """DESIGN.md's error object, printed on stdout when `--json` is on the command line."""
    return json.dumps({"schema": 1, "error": {"exit": exit_code, "message": message}}, indent=2)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `gpuplan` command and return its exit code, whatever happens to its output."""
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        with outputs_may_leave() as (out, _):
            code = _main(words)
    except BrokenPipeError:
        # Written past the streams above (a stream kept from before): the command stopped
        # before its verdict, so nothing was decided. Never 0: `| head -1 && deploy` must not
        # deploy. The descriptor goes to /dev/null so the flush at exit fails no more.
        leave(sys.stdout)
        return Exit.CANNOT_DECIDE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if out.undelivered is not None and code in (Exit.OK, Exit.REFUSED):
        # A verdict nobody saw decides nothing (DESIGN.md "Never yes by accident"): never 0,
        # and not the 1 of a refusal someone read. (`check --ledger` said so before it
        # committed, and recorded nothing: `output.deliver`.)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            print(f"error: {UndeliveredError(out.undelivered)}", file=sys.stderr)
        return Exit.CANNOT_DECIDE
    return code


def _main(words: list[str]) -> int:
    wants_json = "--json" in words
    parser = build_parser(named_command(words))
    _start_up_done()
    try:
        args = _parse(parser, words)
    except UsageError as exc:
        if wants_json:
            print(json_error(Exit.BAD_INPUT, exc.message))
        return Exit.BAD_INPUT
    except SystemExit as exc:  # --help and --version exit 0
        return int(exc.code) if isinstance(exc.code, int) else Exit.BAD_INPUT
    if getattr(args, "_run", None) is None:
        parser.print_help(sys.stderr)
        return Exit.BAD_INPUT
    return _run(args, wants_json)


def _run(args: argparse.Namespace, wants_json: bool) -> int:
    try:
        return int(args._run(args))
    except GpuplanError as exc:
        return _failed(args, wants_json, int(exc.exit_code), str(exc))
    except Exception as exc:
        # A bug, not an input: still one line and "cannot decide", never a traceback whose
        # exit 1 would read as a refusal (DESIGN.md "Never yes by accident"). The line names
        # where, not what: an exception's text may quote a file's content.
        return _failed(args, wants_json, Exit.CANNOT_DECIDE, _bug(exc))


def _bug(exc: Exception) -> str:
    """`internal error (a bug in gpuplan): KeyError at placement/check/deploy.py:120; …`."""
    where = ""
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        last = frames[-1]
        where = f" at {os.path.relpath(last.filename, root)}:{last.lineno}"
    return (
        f"internal error (a bug in gpuplan): {type(exc).__name__}{where}; "
        "--debug shows the traceback"
    )


def _failed(args: argparse.Namespace, wants_json: bool, exit_code: int, message: str) -> int:
    """Say `message` (and with --debug its traceback first) and return `exit_code` unchanged."""
    if getattr(args, "debug", False):
        traceback.print_exc()  # what is printed changes, never the exit code
    print(f"error: {message}", file=sys.stderr)
    if wants_json:
        print(json_error(exit_code, message))
    return exit_code


def entry() -> None:
    """Console-script entry point."""
    _pause_collector()
    sys.exit(main())
