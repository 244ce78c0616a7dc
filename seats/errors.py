"""The error base class every gpuplan failure derives from, and the exit codes.

The CLI catches `GpuplanError` alone and exits with its `exit_code`; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """Exit codes of every `gpuplan` command (DESIGN.md, Commands)."""

    OK = 0
    REFUSED = 1
    BAD_INPUT = 2
    CANNOT_DECIDE = 3


class GpuplanError(Exception):
    """Base of our own errors; `exit_code` says how the CLI ends."""

    exit_code: Exit = Exit.BAD_INPUT


class BadInputError(GpuplanError):
    """Usage, catalogue, snapshot or compose file is wrong: exit 2."""

    exit_code = Exit.BAD_INPUT


class CannotDecideError(GpuplanError):
    """No NVML, a missing or foreign ledger, a stale snapshot: exit 3."""

    exit_code = Exit.CANNOT_DECIDE


class CatalogueError(BadInputError):
    """A catalogue that breaks a rule, with the file and the field path."""

    def __init__(self, path: str, loc: str, msg: str) -> None:
        self.path = path
        self.loc = loc
        self.msg = msg
        where = f"{path}: {loc}" if loc else path
        super().__init__(f"{where}: {msg}")
