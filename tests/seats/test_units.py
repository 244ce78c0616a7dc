"""Byte units: what people write parses to exact ints, what is ambiguous is refused with a fix.

DESIGN.md "Bytes": IEC binary units only; decimal GB/MB/kB and bare G/M are refused; a
fraction, a negative, a bool or (for a resident) zero is never read as a share.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seats.units import (
    BYTES_PATTERN,
    ByteSizeError,
    GiB,
    KiB,
    MiB,
    TiB,
    format_bytes,
    format_mib,
    parse_bytes,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (0, 0),
        (1024, 1024),
        ("1024", 1024),
        ("10740 MiB", 10_740 * MiB),
        ("93GiB", 93 * GiB),
        ("2 gib", 2 * GiB),
        ("512KiB", 512 * KiB),
        ("512 KiB", 512 * KiB),
        ("2 TiB", 2 * TiB),
        ("1.5 TiB", 3 * TiB // 2),
        ("  7 B ", 7),
        ("97871 MiB", 102_625_181_696),  # docs/facts.md §3: the fv-ml1 NVML total
        ("1183 MIB", 1183 * MiB),
    ],
)
def test_reads_ints_and_binary_units(text: object, expected: int) -> None:
    assert parse_bytes(text) == expected


def test_a_decimal_with_a_unit_rounds_down_to_whole_bytes() -> None:
    # 94.97 GiB is vLLM's printed CUDA total; accepted, floored.
    assert parse_bytes("94.97 GiB") == math.floor(94.97 * GiB)
    assert parse_bytes("0.5 KiB") == 512
    assert parse_bytes("1.9 B") == 1


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("47.1 GB", r"ambiguous unit 'GB'.*'47\.1 GiB'.*'47100 MiB'"),
        ("10 MB", r"ambiguous unit 'MB'.*'10 MiB'"),
        ("512kB", r"ambiguous unit 'kB'.*'512 KiB'"),
        ("93G", r"ambiguous unit 'G'.*'93 GiB'"),
        ("8 M", r"ambiguous unit 'M'.*'8 MiB'"),
        ("2 TB", r"ambiguous unit 'TB'.*'2 TiB'"),
        (0.4, r"looks like a fraction"),
        ("0.4", r"looks like a fraction"),
        (47.1, r"bare number 47\.1 has no unit"),
        ("47.1", r"has no unit; write an int of bytes or e\.g\. '47\.1 GiB'"),
        (-5, r"-5 is negative"),
        ("-5 MiB", r"negative"),
        (True, r"is a bool"),
        (None, r"got NoneType"),
        ([1, 2], r"got list"),
        ("ten MiB", r"cannot read 'ten MiB'"),
        ("1e9", r"unknown unit 'e'|cannot read"),
        ("5 PiB", r"unknown unit 'PiB'.*B, KiB, MiB, GiB or TiB"),
        ("9" * 100, r"too long"),
    ],
)
def test_refuses_with_a_message_naming_the_field(text: object, pattern: str) -> None:
    with pytest.raises(ByteSizeError) as caught:
        parse_bytes(text, "seats[2].resident")
    message = str(caught.value)
    assert message.startswith("seats[2].resident: ")
    assert re.search(pattern, message), message


def test_zero_is_refused_only_where_asked() -> None:
    assert parse_bytes("0 MiB") == 0
    with pytest.raises(ByteSizeError, match="more than 0 bytes"):
        parse_bytes("0 MiB", "resident", allow_zero=False)
    with pytest.raises(ByteSizeError, match="more than 0 bytes"):
        parse_bytes(0, "resident", allow_zero=False)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (None, "-"),
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.00 KiB"),
        (10_740 * MiB, "10.49 GiB"),
        (1871 * MiB, "1.83 GiB"),
        (101_972_967_424, "94.97 GiB"),
        (3 * TiB, "3.00 TiB"),
        (-2 * GiB, "-2.00 GiB"),
    ],
)
def test_format_bytes_prints_one_binary_unit(n: int | None, text: str) -> None:
    assert format_bytes(n) == text


def test_format_mib_is_nvidia_smi_style() -> None:
    assert format_mib(97_871 * MiB) == "97,871 MiB"
    assert format_mib(None) == "-"


def _unit_of(text: str) -> int:
    return {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB}[text.split()[-1]]


@given(st.integers(min_value=0, max_value=1024 * TiB))
def test_format_then_parse_round_trips_within_printed_precision(n: int) -> None:
    text = format_bytes(n)
    back = parse_bytes(text)
    # Two decimals of the printed unit, plus the byte lost by rounding down.
    assert abs(back - n) <= _unit_of(text) // 200 + 1, (n, text, back)


@given(st.integers(min_value=0, max_value=2**80))
def test_ints_and_digit_strings_are_exact(n: int) -> None:
    assert parse_bytes(n) == n
    if len(str(n)) <= 64:
        assert parse_bytes(str(n)) == n


_ANYTHING = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.binary()
    | st.decimals(allow_nan=True),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(), children, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.slow
@given(_ANYTHING)
def test_no_input_raises_anything_but_byte_size_error(value: Any) -> None:
    try:
        result = parse_bytes(value, "field")
    except ByteSizeError:
        return
    assert isinstance(result, int) and not isinstance(result, bool)
    assert result >= 0


_UNITS = st.sampled_from(["B", "KiB", "MiB", "GiB", "TiB", "kib", "GIB", "mib"])


@given(
    st.integers(min_value=0, max_value=10**6),
    st.one_of(st.none(), st.integers(min_value=0, max_value=999)),
    st.sampled_from(["", " ", "  "]),
    _UNITS,
)
def test_written_quantities_parse_and_match_the_schema_pattern(
    whole: int, fraction: int | None, space: str, unit: str
) -> None:
    number = f"{whole}.{fraction}" if fraction is not None else str(whole)
    text = f"{number}{space}{unit}"
    assert re.match(BYTES_PATTERN, text)
    assert parse_bytes(text) >= 0


@given(st.text(max_size=40))
def test_text_the_schema_pattern_refuses_is_refused_by_the_parser(text: str) -> None:
    # The JSON Schema must not be looser than the loader's parser about what a byte string is.
    if re.match(BYTES_PATTERN, text):
        return
    with pytest.raises(ByteSizeError):
        parse_bytes(text)
