"""Fixtures of the placement tests: a CBC that never answers, for the deadline kill."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from placement import solvers


@pytest.fixture
def cbc_never_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """CBC's executable swapped for one that sleeps a minute and writes no answer.

    A real CBC on a small model may finish before the deadline kill is reached, and a hard model
    takes however long this machine takes: with this one the kill is the only way a solve ends
    in time, whatever the load. Were the kill missing, PuLP would find no answer after the
    minute and `solve` would raise, so a test that expects the kill fails rather than hangs.
    """
    cbc = tmp_path / "cbc"
    cbc.write_text("#!/bin/sh\nexec sleep 60\n", encoding="utf-8")
    cbc.chmod(cbc.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(solvers.pulp.PULP_CBC_CMD, "pulp_cbc_path", str(cbc))
    return cbc
