"""Solver banners kept off stdout: HiGHS prints one on stdout even when told to be quiet.

`--json` output must stay one JSON document, so while a solver runs fd 1 points elsewhere.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr for the block (FACTS.md §4: PuLP's HiGHS, highspy)."""
    with _stdout_to(2):
        yield


@contextmanager
def stdout_silenced() -> Iterator[None]:
    """Point file descriptor 1 at /dev/null for the block: a banner nobody needs to read."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        with _stdout_to(devnull):
            yield
    finally:
        os.close(devnull)


@contextmanager
def _stdout_to(fd: int) -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(fd, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
