"""The CLI's one renderer: table styles, byte figures, and the words of each rule's figures."""

from __future__ import annotations

import pytest

from placement.cli.check_text import reason_line
from placement.cli.plan_text import _reason_line
from placement.cli.render import b, gib, reason_figures, table
from placement.fit.verdict import Reason
from seats.units import GiB, MiB


def test_bytes_use_one_binary_unit_and_a_dash_for_unknown() -> None:
    assert b(10_740 * MiB) == "10.49 GiB"
    assert b(0) == "0 B"
    assert b(-344 * MiB) == "-344.00 MiB"
    assert b(None) == "-"
    assert gib(93 * GiB + GiB // 2) == "93.50"
    assert gib(None) == "-"


def test_plain_table_pads_headers_and_aligns_each_column() -> None:
    text = table([[0, "1.83 GiB"], [10, "94.97 GiB"]], ["card", "free"], ["left", "right"])
    assert text.splitlines() == [
        "card         free",
        "0        1.83 GiB",
        "10      94.97 GiB",
    ]


def test_ruled_table_has_a_rule_under_the_headers() -> None:
    text = table([[0, "a"]], ["card", "x"], ["right", "left"], style="ruled")
    assert text.splitlines() == ["  card  x", "------  ---", "     0  a"]


def test_tight_table_is_as_wide_as_its_cells_without_trailing_blanks() -> None:
    text = table([["3", "94.97 GiB", ""]], ["card", "free", "held"], ["left"] * 3, style="tight")
    assert text.splitlines() == ["card  free       held", "3     94.97 GiB"]


def test_cells_are_shown_as_written_not_reparsed_as_numbers() -> None:
    assert table([["0.10"]], ["util"], ["right"]).splitlines()[1].strip() == "0.10"


def _reason(rule: str, need: int | None = 6 * GiB, room: int | None = GiB) -> Reason:
    short = None if need is None or room is None else need - room
    return Reason(rule, 1, need, room, short, f"the {rule} text", "fv-ml1")  # type: ignore[arg-type]


def test_the_gate_compares_what_vllm_requests_with_what_is_free() -> None:
    assert reason_figures(_reason("gate")) == "requested 6.00 GiB  free 1.00 GiB  short 5.00 GiB"


@pytest.mark.parametrize("rule", ["room", "reserve"])
def test_other_rules_compare_need_with_room(rule: str) -> None:
    assert reason_figures(_reason(rule)) == "need 6.00 GiB  room 1.00 GiB  short 5.00 GiB"


def test_a_rule_without_bytes_has_no_figures() -> None:
    assert reason_figures(_reason("exclusive", None, None)) is None
    assert reason_figures(_reason("room", 6 * GiB, None)) is None


@pytest.mark.parametrize("rule", ["room", "gate"])
def test_plan_and_check_say_the_same_figures_for_the_same_rule(rule: str) -> None:
    reason = _reason(rule)
    figures = reason_figures(reason)
    assert figures is not None
    assert _reason_line(reason, multi_host=False) == f"  card 1   {rule:<9} {figures}"
    assert reason_line(reason) == f"  card 1  {rule:<11} {figures}  — the {rule} text"


def test_a_rule_without_figures_is_said_by_its_text_in_both() -> None:
    reason = _reason("exclusive", None, None)
    assert _reason_line(reason, multi_host=False) == "  card 1   exclusive the exclusive text"
    assert reason_line(reason) == "  card 1  exclusive   — the exclusive text"


def test_check_lines_up_the_figures_after_kv_capacity() -> None:
    # The rule column fits "kv_capacity" (11): a gate line's figures start where its do.
    gate = reason_line(_reason("gate"))
    kv = reason_line(_reason("kv_capacity", None, None))
    assert gate.index("requested") == len("  card 1  kv_capacity ")
    assert kv.startswith("  card 1  kv_capacity — ")
