"""The `gpuplan` command line: a thin shell over the library (STYLE.md).

Each subcommand lives in `placement/cli/<name>.py` with `HELP`, `add_arguments(parser)`
and `run(args) -> int`; heavy imports (pulp, NVML) happen inside `run`, and a
named command imports its own module alone (a `check` in a deploy script runs on every
deploy). Only `GpuplanError` is caught; `--debug` shows its traceback.
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
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any, TextIO, cast

from inventory.secrets import mask_cmdline
from seats.errors import Exit, GpuplanError

# Order is the order `gpuplan --help` lists them in.
COMMANDS: tuple[str, ...] = (
    "init",
    "plan",
    "check",
    "holds",
    "ledger",
    "snapshot",
    "report",
    "pack",
    "calibrate",
    "demo-ledger",
    "exporter",
    "alerts",
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


class _ReaderGone:
    """A stream that drops what is written once its reader has left (`gpuplan check … | head -1`).

    The command runs on to its end, so its exit code is its verdict's: a refusal whose reader
    left early still exits 1 (DESIGN.md "Never yes by accident"), and nothing prints a
    BrokenPipe traceback. The stream's descriptor is pointed at /dev/null, so what is still
    buffered (flushed at exit) goes nowhere instead of failing again.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._leave()

    def _leave(self) -> None:
        self.gone = True
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):
            return  # not a file (a test's capture): dropping is enough
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)
        with contextlib.suppress(OSError):
            self._stream.flush()  # what was buffered, now into /dev/null

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def _outputs_may_leave() -> Iterator[None]:
    """stdout and stderr as `_ReaderGone` streams while a command runs; flushed at its end."""
    saved = sys.stdout, sys.stderr
    out, err = _ReaderGone(saved[0]), _ReaderGone(saved[1])
    sys.stdout, sys.stderr = cast(TextIO, out), cast(TextIO, err)
    try:
        yield
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = saved


def json_error(exit_code: int, message: str) -> str:
    """DESIGN.md's error object, printed on stdout when `--json` is on the command line."""
    return json.dumps({"schema": 1, "error": {"exit": exit_code, "message": message}}, indent=2)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `gpuplan` command and return its exit code, whatever happens to its output."""
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        with _outputs_may_leave():
            return _main(words)
    except BrokenPipeError:
        # Written past the streams above (a stream kept from before): the command stopped
        # before its verdict, so nothing was decided. Never 0: `| head -1 && deploy` must not
        # deploy. The descriptor goes to /dev/null so the flush at exit fails no more.
        _ReaderGone(sys.stdout)._leave()
        return Exit.CANNOT_DECIDE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


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
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        if wants_json:
            print(json_error(int(exc.exit_code), str(exc)))
        return int(exc.exit_code)


def entry() -> None:
    """Console-script entry point."""
    _pause_collector()
    sys.exit(main())
