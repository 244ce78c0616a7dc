"""The history `plan --window` and `ledger --window` replay: the one `--window` commands open
(`history_source.open_history`: the ledger's, or Prometheus's), each hour of raw moments read once
however many replays ask for it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from inventory.history.remembered import RememberedHistory


@contextmanager
def window_history(args: argparse.Namespace) -> Iterator[RememberedHistory]:
    """The history the command's sources name (rollups first where it keeps them), open while
    the block runs."""
    from placement.cli.history_source import open_history
    from placement.cli.sources import source_options

    with open_history(source_options(args)) as history:
        yield RememberedHistory(history)
