"""The explanations of a crowded fleet, text and JSON, byte for byte as they were before refused
seats and cards were grouped (placement/plan/explain.py): the digests were taken at commit
65f7d1d, where each refused seat was judged on every card one by one, and taken again at 439d000,
whose tighter level bound changed the priority-0 bound (232 → 229) and its gap, and nothing else
(the two documents compared line by line)."""

from __future__ import annotations

import hashlib
import json

import pytest

from bench.bench_plan import synthetic_fleet
from placement.cli.notes_text import worded_notes
from placement.cli.plan_text import render_plan
from placement.plan.planner import plan

# (hosts, cards, running, new) → (refused seats, sha256 of --json --explain all, of the text).
BEFORE = {
    (16, 8, 75, 500): (
        22,
        "ec8c57f4a9e6bef8d42d7f7289b945829e8bdca1e68400fefc2a4b500edfc8ab",
        "9fe2ccba5a27b1c0533d353d01f9f3f3dbec7d8b65cb2d6d160f3250815542f7",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("size", sorted(BEFORE))
def test_crowded_explanations_are_todays_to_the_byte(size: tuple[int, int, int, int]) -> None:
    catalogue, snapshots, adds = synthetic_fleet(*size)
    result = plan(catalogue, snapshots, adds)
    # Notes in their words, as the edge prints them (the digest was taken when they were words).
    document = json.dumps(worded_notes(result.to_json("all")), sort_keys=True)
    text = render_plan(result, explain="all")
    refused, json_digest, text_digest = BEFORE[size]
    assert sum(1 for v in result.verdicts if not v.passed) == refused
    assert hashlib.sha256(document.encode()).hexdigest() == json_digest
    assert hashlib.sha256(text.encode()).hexdigest() == text_digest
