"""The `gpuplan` command line: a thin shell over the library (STYLE.md).

Each subcommand lives in `placement/cli/<name>.py` with `HELP`, `add_arguments(parser)`
and `run(args) -> int`; heavy imports (pulp, matplotlib, NVML) happen inside `run`, so
`gpuplan --help` stays fast. Only `GpuplanError` is caught; `--debug` shows its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from seats.errors import Exit, GpuplanError

# Order is the order `gpuplan --help` lists them in.
COMMANDS: tuple[str, ...] = (
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
    "schema",
)


def _module(name: str) -> ModuleType:
    """The command's module; a missing one is a broken install and fails loudly."""
    return importlib.import_module(f"placement.cli.{name.replace('-', '_')}")


def build_parser() -> argparse.ArgumentParser:
    """The whole argument parser, one subparser per command module."""
    parser = argparse.ArgumentParser(
        prog="gpuplan",
        description="GPU placement planner and capacity ledger: where does a seat go, "
        "will it start, and what did the cards hold this week.",
        epilog="Exit codes: 0 ok/pass, 1 refused, 2 bad input, 3 cannot decide.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of gpuplan errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `gpuplan` command and return its exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        return int(exc.code) if isinstance(exc.code, int) else Exit.BAD_INPUT
    if getattr(args, "_run", None) is None:
        parser.print_help(sys.stderr)
        return Exit.BAD_INPUT
    try:
        return int(args._run(args))
    except GpuplanError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except BrokenPipeError:
        # `gpuplan … | head`: the reader left; say nothing and leave quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return Exit.OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
