"""Solver banners kept off stdout: HiGHS prints one on stdout even when told to be quiet.

`--json` output must stay one JSON document, so the banner goes to stderr while a solver runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr for the block (FACTS.md §4: PuLP's HiGHS, highspy)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
