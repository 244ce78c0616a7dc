"""stdout and stderr while a command runs: a reader that left, and output that could not be delivered.

A reader that leaves early (`gpuplan check … | head -1`) changes nothing about the exit code; an
output that could not be written at all (stdout closed with `>&-`, or full: `>/dev/full`) means a
verdict nobody saw, so it decides nothing: exit 3, and `check --ledger` records no hold
(DESIGN.md "Never yes by accident").
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO, cast

from seats.errors import CannotDecideError


class UndeliveredError(CannotDecideError):
    """What a command printed on stdout could not be written: it decided nothing (exit 3)."""

    def __init__(self, why: str, undone: str = "") -> None:
        super().__init__(
            f"stdout: the output could not be delivered ({why})" + (f"; {undone}" if undone else "")
        )


class Output:
    """A standard stream that drops what its reader left or could not take, and says which.

    `gone`: the reader left (a broken pipe). The command runs on to its end, so its exit code is
    its verdict's: a refusal whose reader left early still exits 1, and nothing prints a
    BrokenPipe traceback. `undelivered`: why the output could not be written at all (the stream
    was closed before gpuplan started, or a write failed: a full disk, an I/O error), else None.
    Either way the descriptor is pointed at /dev/null, so what is still buffered (flushed at
    exit) goes nowhere instead of failing again.
    """

    def __init__(self, stream: TextIO | None, fd: int) -> None:
        self.gone = False
        self.undelivered: str | None = None
        self._closed = stream is None
        if stream is None:
            # Closed before start (`>&-`): the descriptor is taken by /dev/null, so no file this
            # process opens later (a ledger, a report) lands on it and receives stray writes.
            _reserve(fd)
            # It lives as long as the command's output does: no context to close it in.
            stream = open(fd, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        self._stream = stream

    def write(self, text: str) -> int:
        if self._closed:
            if text and self.undelivered is None:
                self.undelivered = "it is closed"
            return len(text)
        if not self.gone and self.undelivered is None:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._leave()
            except OSError as exc:
                self._fail(exc)
        return len(text)

    def flush(self) -> None:
        if not self.gone and self.undelivered is None and not self._closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._leave()
            except OSError as exc:
                self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        self.undelivered = exc.strerror or type(exc).__name__
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


def _reserve(fd: int) -> None:
    """Open /dev/null on `fd` when nothing is open there."""
    try:
        os.fstat(fd)
    except OSError:
        devnull = os.open(os.devnull, os.O_RDWR)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)


@contextlib.contextmanager
def outputs_may_leave() -> Iterator[tuple[Output, Output]]:
    """stdout and stderr as `Output` streams while a command runs; flushed at its end."""
    saved = sys.stdout, sys.stderr
    out, err = Output(saved[0], 1), Output(saved[1], 2)
    sys.stdout, sys.stderr = cast(TextIO, out), cast(TextIO, err)
    try:
        yield out, err
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = saved


def deliver(undone: str) -> None:
    """Flush stdout now; UndeliveredError (exit 3) when what was printed could not be written.

    A command that records a decision (`check --ledger` and its hold) calls this before it
    commits, so a verdict nobody saw is never recorded; `undone` says what is not.
    """
    out = sys.stdout
    out.flush()
    if isinstance(out, Output) and out.undelivered is not None:
        raise UndeliveredError(out.undelivered, undone)


def leave(stream: TextIO | None) -> None:
    """Point `stream`'s descriptor at /dev/null (a reader left after the command's streams ended)."""
    if stream is not None:
        Output(stream, 1)._leave()
