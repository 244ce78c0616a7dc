"""The explanations of a crowded fleet, text and JSON, byte for byte as they were before refused
seats and cards were grouped (placement/plan/explain.py): the digests were taken at commit
65f7d1d, where each refused seat was judged on every card one by one."""

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
        "acdefae78699a703742d8a62269719a80d73e075b41695ea402189e2767153e3",
        "29064e01c9726eddcd8a2126282d70c4a43afde53f223a16309b6428be8c8bbc",
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
