"""A reason's words are written once, from its data: each number said once."""

from __future__ import annotations

import re

from placement.cli.check_text import reason_line
from placement.cli.reasons_text import reason_text, worded, worded_json
from placement.fit.verdict import Reason, facts

# The seed's refusal (docs/facts.md §2): util 0.12 on a 94.97 GiB card after its 1.16 GiB context.
GATE = Reason(
    "gate",
    0,
    12_236_756_091,
    11_983_126_528,
    253_629_563,
    host="fv-ml1",
    said="gate",
    facts=facts(
        engine="vLLM",
        cuda_context_bytes=1_240_465_408,
        util="0.12",
        cuda_total_bytes=101_972_967_424,
    ),
)


def test_the_seeds_gate_says_each_figure_once() -> None:
    line = reason_line(GATE)
    assert line == (
        "  card 0  gate        vLLM's gate: free 11.16 GiB after its 1.16 GiB CUDA context < "
        "util 0.12 × 94.97 GiB = 11.40 GiB, short 241.88 MiB"
    )
    for figure in ("11.16 GiB", "1.16 GiB", "94.97 GiB", "11.40 GiB", "241.88 MiB"):
        assert len(re.findall(r"(?<![\d.])" + re.escape(figure), line)) == 1, figure


def test_a_reason_without_its_figures_in_its_words_keeps_them_before_the_dash() -> None:
    reserve = Reason(
        "reserve",
        3,
        6 * 2**30,
        2 * 2**30,
        4 * 2**30,
        said="reserve",
        facts=facts(held_bytes=2**30, held_for=("flash-next",), reserves=("flash-next-hold",)),
    )
    assert reason_line(reserve) == (
        "  card 3  reserve     need 6.00 GiB  room 2.00 GiB  short 4.00 GiB  — "
        "1.00 GiB held for flash-next (flash-next-hold)"
    )


def test_the_json_of_a_reason_gets_its_words_at_the_edge_and_keeps_its_data() -> None:
    data = {"verdicts": [{"reasons": [GATE.to_json()]}]}
    assert data["verdicts"][0]["reasons"][0]["text"] == ""
    worded_json(data)
    reason = data["verdicts"][0]["reasons"][0]
    assert reason["text"] == reason_text(GATE)
    assert (reason["util"], reason["cuda_total_bytes"], reason["short_bytes"]) == (
        "0.12",
        101_972_967_424,
        253_629_563,
    )
    assert worded(GATE).text == reason_text(GATE)


def test_words_already_written_are_kept_and_a_renamed_reason_renames_its_facts() -> None:
    stale = Reason("error", None, None, None, None, "snapshot is 2 h old", "h")
    assert reason_text(stale) == "snapshot is 2 h old"
    blocked = Reason(
        "exclusive",
        1,
        None,
        None,
        None,
        said="blocked",
        facts=facts(seat="tts", priority=5),
        within=Reason(
            "exclusive",
            1,
            None,
            None,
            None,
            said="exclusive",
            facts=facts(seat="tts", holds=("(stand-in)",)),
        ),
    )
    assert reason_text(blocked.renamed("(stand-in)", "voices")) == (
        "would refuse tts (priority 5) there: tts is exclusive; card 1 holds voices"
    )
