"""The one place a `--window` command opens the history it reads: the ledger's (`--ledger DB`) or
Prometheus's (`--prometheus URL`, with `--host-label`, basic auth and `--timeout` as every read).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from seats.errors import BadInputError

if TYPE_CHECKING:
    from inventory.history import History
    from placement.cli.sources import SourceOptions
    from placement.fit.week import SeatWindow


@contextmanager
def open_history(source: SourceOptions) -> Iterator[History]:
    """The history of `source`: Prometheus's when --prometheus is given (a --ledger beside it
    gives only the holds), else the ledger's, opened read-only for the `with` block.

    Exit 2 when neither is given; a ledger that is missing or not gpuplan's is exit 3, as is a
    Prometheus that does not answer (on its first query, which names the server).
    """
    if source.prometheus:
        from inventory.history.prometheus import PromClient, PrometheusHistory

        # Basic auth comes from the URL's userinfo, the environment or a netrc (reader.py).
        client = PromClient(source.prometheus, timeout=source.timeout)
        yield PrometheusHistory(client, host_label=source.host_label)
        return
    if not source.ledger:
        raise BadInputError("--window needs --ledger DB or --prometheus URL (a history)")
    from inventory.history.ledger import LedgerHistory
    from inventory.ledger.store import open_ledger

    with open_ledger(source.ledger, readonly=True) as ledger:
        yield LedgerHistory(ledger.connection)


def with_unknowns(history: object, window: SeatWindow) -> SeatWindow:
    """The window with what its history cannot know said as a warning, never guessed: a history
    without command lines (Prometheus) cannot see a redeploy with other flags, so no seat is
    rebased (`--no-rebase` asks for none)."""
    from dataclasses import replace

    from placement.fit.week.model import WindowWarning

    if getattr(history, "keeps_command_lines", True) or not window.rules.rebase:
        return window
    unknown = WindowWarning("command_lines", {"host": window.host.host})
    if unknown in window.warnings:
        return window
    return replace(window, warnings=(*window.warnings, unknown))
