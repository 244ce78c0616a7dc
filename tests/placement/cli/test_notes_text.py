"""Warnings and nearest changes are notes in fit; their words are written once, at the edge."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from placement.cli.notes_text import NOTE_WRITERS, note_text, note_texts
from placement.cli.reasons_text import worded_json
from placement.fit.engines.note import Note, note
from placement.fit.verdict import Verdict

ROOT = Path(__file__).resolve().parents[3]


def _said_in_code() -> set[str]:
    """Every `note("…", …)` sentence name written in the package."""
    found: set[str] = set()
    for path in (ROOT / "placement").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "note"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found.add(str(node.args[0].value))
    return found


@pytest.mark.slow
def test_every_note_has_its_words_and_every_writer_a_note() -> None:
    said = _said_in_code()
    assert {"free", "kv_fixes", "nvml_v1", "below_floor"} <= said  # the scan sees the tree
    assert said == set(NOTE_WRITERS)


def test_a_nearest_change_says_its_card_and_bytes_once() -> None:
    free = note("free", short_bytes=729_808_896, card=1)
    assert note_text(free) == "free 696.00 MiB on card 1"
    # On a fleet, each card is named by its host (plan --explain over several hosts).
    fleet = Note(free.said, (*free.facts, ("on_host", "h3")))
    assert note_text(fleet) == "free 696.00 MiB on card h3:1"
    fixes = note(
        "kv_fixes",
        card=1,
        util="0.076",
        gate_refuses=1,
        max_model_len=40_960,
        kv_need_bytes=6_039_797_760,
        tokens=16_739,
    )
    assert note_text(fixes) == (
        "card 1: util ≥ 0.076 (card 1's gate refuses it), or kv_cache_memory ≥ 5.62 GiB "
        "(6,039,797,760 B), or --max-model-len ≤ 16,739"
    )
    none = note(
        "kv_fixes",
        card=2,
        util="",
        gate_refuses=0,
        max_model_len=8192,
        kv_need_bytes=2**30,
        tokens=0,
    )
    assert note_text(none) == (
        "card 2: no util holds 8,192 tokens on card 2, or kv_cache_memory ≥ 1.00 GiB "
        "(1,073,741,824 B)"
    )


def test_words_written_outside_fit_are_kept_and_a_renamed_note_renames_its_names() -> None:
    floor = note(
        "below_floor",
        seat="\x00seat\x00",
        resident_bytes=3 * 2**30,
        floor_bytes=3_387_949_056,
        parts=(("weights", None), ("KV", 2 * 2**30), ("cuda_context", 1_240_465_408)),
    )
    assert note_texts(["approved, not placed again", floor.renamed("\x00seat\x00", "new1")]) == [
        "approved, not placed again",
        "new1: declared resident 3.00 GiB is below the 3.16 GiB it holds with its KV cache pinned "
        "(no weights known + KV 2.00 GiB + cuda_context 1.16 GiB): judged at that; raise "
        "resident to 3,387,949,056 B",
    ]


def test_the_json_of_a_verdict_carries_notes_as_data_until_the_edge_writes_them() -> None:
    why = note(
        "kv_changed",
        kv_bytes=4 * 2**30,
        declared_kv_bytes=2 * 2**30,
        declared_bytes=10 * 2**30,
        resident_bytes=12 * 2**30,
    )
    verdict = Verdict(
        "refuse",
        "tts",
        "h",
        (1,),
        warnings=(note("judged_resident", seat="tts", resident_bytes=12 * 2**30, why=why), "plain"),
        nearest=(note("release", reserves=("a", "b")),),
    )
    data = verdict.to_json()
    assert data["nearest"] == [{"said": "release", "reserves": ["a", "b"]}]
    assert data["warnings"][0]["why"]["declared_kv_bytes"] == 2 * 2**30
    worded_json(data)
    assert data["nearest"] == ["release a, b"]
    assert data["warnings"] == [
        "tts judged with a resident of 12.00 GiB: declared 10.00 GiB − its declared KV cache "
        "2.00 GiB + the new 4.00 GiB",
        "plain",
    ]
