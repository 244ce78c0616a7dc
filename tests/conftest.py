"""Shared fixtures: the embedded fv-ml1 example and paths to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from inventory.snapshot import Snapshot, load_snapshot
from seats.loader import load_catalogue
from seats.model import Catalogue

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "seats" / "catalogue"
FV_ML1_CATALOGUE = EXAMPLE / "fv-ml1.yaml"
FV_ML1_SNAPSHOT = EXAMPLE / "fv-ml1.snapshot.json"
FV_ML1_BEFORE_VOICES = EXAMPLE / "fv-ml1-before-voices.snapshot.json"


@pytest.fixture
def fv_ml1() -> Catalogue:
    """The fv-ml1 catalogue (docs/facts.md §3)."""
    return load_catalogue(FV_ML1_CATALOGUE)


@pytest.fixture
def fv_ml1_snapshot() -> Snapshot:
    """fv-ml1 after vllm-voices came up: card 0 has 1,871 MiB free."""
    return load_snapshot(FV_ML1_SNAPSHOT)


@pytest.fixture
def fv_ml1_before_voices() -> Snapshot:
    """fv-ml1 before vllm-voices: card 0 has 12,611 MiB free."""
    return load_snapshot(FV_ML1_BEFORE_VOICES)


def pytest_assertrepr_compare(op: str, left: object, right: object) -> list[str] | None:
    """Large byte strings that differ are told by size and first difference: pytest's own diff of
    two long byte strings is quadratic and can run for hours."""
    if op != "==" or not isinstance(left, bytes) or not isinstance(right, bytes):
        return None
    if max(len(left), len(right)) <= 4096:
        return None
    first = next(
        (i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b),
        min(len(left), len(right)),
    )
    return [f"{len(left):,} bytes == {len(right):,} bytes: they differ from byte {first:,}"]
