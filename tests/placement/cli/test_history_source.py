"""The history a `--window` command reads: the ledger's or Prometheus's, from the source options."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from inventory.history.ledger import LedgerHistory
from inventory.history.prometheus import PrometheusHistory
from inventory.ledger.schema import LedgerError
from inventory.ledger.store import open_ledger
from placement.cli.history_source import open_history
from placement.cli.sources import SourceOptions
from seats.errors import BadInputError


def test_a_ledger_is_opened_read_only_for_the_block(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with open_ledger(path):
        pass
    source = SourceOptions(ledger=str(path))
    with open_history(source) as history:
        assert isinstance(history, LedgerHistory)
        start, end = datetime(2026, 9, 14, tzinfo=UTC), datetime(2026, 9, 21, tzinfo=UTC)
        assert list(history.moments("fv-ml1", start, end)) == []
        with pytest.raises(Exception, match="readonly"):
            history.connection.execute("CREATE TABLE x (y)")


def test_a_missing_ledger_is_exit_3_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    with (
        pytest.raises(LedgerError, match=f"ledger {path}"),
        open_history(SourceOptions(ledger=str(path))),
    ):
        pass
    assert not path.exists()


def test_prometheus_wins_over_a_ledger_of_holds(tmp_path: Path) -> None:
    source = SourceOptions(
        ledger=str(tmp_path / "holds.db"),
        prometheus="http://ops:s3cret@prom.example:9090/?x=1",
        host_label="node",
        timeout=7.5,
    )
    with open_history(source) as history:
        assert isinstance(history, PrometheusHistory)
        assert history.host_label == "node"
        assert history.client.timeout == 7.5
        assert history.client.base == "http://ops:s3cret@prom.example:9090/?x=1"
    assert not (tmp_path / "holds.db").exists()


def test_no_history_is_bad_input() -> None:
    with (
        pytest.raises(BadInputError, match="--window needs --ledger DB or --prometheus URL"),
        open_history(SourceOptions()),
    ):
        pass
