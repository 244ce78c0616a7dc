"""Byte quantities: parse what people write (`10740 MiB`, `93GiB`) into ints, and format ints back.

Every memory figure in gpuplan is an int of bytes. Input takes IEC binary units only;
decimal `GB`/`MB`/`kB` and bare `G`/`M` are refused because the seed log's "GB" were
really nvidia-smi MiB read as thousands (docs/facts.md §3) and that ambiguity cost real misses.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4

_BINARY: dict[str, int] = {"b": 1, "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB}
_DECIMAL_HINT: dict[str, str] = {
    "kb": "KiB",
    "mb": "MiB",
    "gb": "GiB",
    "tb": "TiB",
    "k": "KiB",
    "m": "MiB",
    "g": "GiB",
    "t": "TiB",
}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")
_MAX_INPUT_CHARS = 64


class ByteSizeError(ValueError):
    """A byte quantity that cannot be read; the message suggests the fix."""


def parse_bytes(value: object, field: str = "", *, allow_zero: bool = True) -> int:
    """Read `value` as an int of bytes, or raise `ByteSizeError` naming `field`.

    Accepts an int, a digit string, or a number with an IEC unit (any case, space
    optional). A decimal number with a unit is rounded down to whole bytes.
    """
    if isinstance(value, str):
        return _checked(_text_bytes(value, field), field, allow_zero)
    if isinstance(value, int) and not isinstance(value, bool):
        return _checked(value, field, allow_zero)
    raise ByteSizeError(_not_a_size(value, field))


def _not_a_size(value: object, field: str) -> str:
    """Why a value that is neither an int nor a string is not a byte size."""
    if isinstance(value, bool):
        return f"{_at(field)}{value!r} is a bool, not a byte size; write e.g. '10740 MiB'"
    if isinstance(value, float):
        if 0 < value < 1:
            return (
                f"{_at(field)}{value!r} looks like a fraction; a byte size is needed here "
                "(write e.g. '47100 MiB', not a share of the card)"
            )
        return f"{_at(field)}bare number {value!r} has no unit; write an int of bytes or e.g. '{value} GiB'"
    return f"{_at(field)}expected bytes as an int or e.g. '10740 MiB', got {type(value).__name__}"


def _text_bytes(value: str, field: str) -> int:
    """The bytes a string says (rounded down, sign unchecked), or `ByteSizeError`."""
    text = value.strip()
    if len(text) > _MAX_INPUT_CHARS:
        raise ByteSizeError(f"{_at(field)}{len(text)} characters is too long for a byte size")
    if text.startswith("-"):
        raise ByteSizeError(f"{_at(field)}{value!r} is negative; a byte size is 0 or more")
    match = _QUANTITY.match(text)
    if match is None:
        raise ByteSizeError(
            f"{_at(field)}cannot read {value!r} as bytes; write an int or e.g. '10740 MiB', '93 GiB'"
        )
    number, unit = match.group(1), match.group(2).lower()
    if unit in _DECIMAL_HINT:
        raise ByteSizeError(
            f"{_at(field)}{value!r} uses the ambiguous unit '{match.group(2)}'; "
            f"write binary units, e.g. '{number} {_DECIMAL_HINT[unit]}'{_smi_hint(number, unit)}"
        )
    if unit == "":
        return _unitless_bytes(value, number, field)
    if unit not in _BINARY:
        raise ByteSizeError(
            f"{_at(field)}unknown unit '{match.group(2)}' in {value!r}; use B, KiB, MiB, GiB or TiB"
        )
    try:
        amount = Decimal(number) * _BINARY[unit]
    except InvalidOperation as exc:  # cannot happen with the regex above; kept for safety
        raise ByteSizeError(f"{_at(field)}cannot read {value!r}") from exc
    return math.floor(amount)


def _unitless_bytes(value: str, number: str, field: str) -> int:
    """A number written without a unit: whole bytes, or a refusal that says what was meant."""
    if "." not in number:
        return int(number)
    if Decimal(number) < 1:
        raise ByteSizeError(
            f"{_at(field)}{value!r} looks like a fraction; a byte size is needed here "
            "(write e.g. '47100 MiB', not a share of the card)"
        )
    raise ByteSizeError(
        f"{_at(field)}{value!r} has no unit; write an int of bytes or e.g. '{number} GiB'"
    )


def _smi_hint(number: str, unit: str) -> str:
    # The seed's "47.1 GB" was nvidia-smi's 47,100 MiB read as thousands (docs/facts.md §3).
    if unit not in ("gb", "g"):
        return " (nvidia-smi prints MiB)"
    shown = format((Decimal(number) * 1000).normalize(), "f")
    return f", or '{shown} MiB' if the figure is nvidia-smi's MiB read as thousands"


BYTES_PATTERN = r"^\s*[0-9]+(\.[0-9]+)?\s*([Bb]|[KkMmGgTt][Ii][Bb])?\s*$"
"""What `parse_bytes` reads from a string, for JSON Schema (a fraction without a unit is refused later)."""


def _at(field: str) -> str:
    return f"{field}: " if field else ""


def _checked(n: int, field: str, allow_zero: bool) -> int:
    if n < 0:
        raise ByteSizeError(f"{_at(field)}{n} is negative; a byte size is 0 or more")
    if n == 0 and not allow_zero:
        raise ByteSizeError(f"{_at(field)}must be more than 0 bytes")
    return n


def format_bytes(n: int | None, *, precision: int = 2) -> str:
    """`10.49 GiB`: one binary unit, the largest that keeps the figure at or above 1."""
    if n is None:
        return "-"
    sign = "-" if n < 0 else ""
    magnitude = abs(n)
    for name, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if magnitude >= size:
            return f"{sign}{magnitude / size:.{precision}f} {name}"
    return f"{sign}{magnitude} B"


def format_mib(n: int | None) -> str:
    """`10,740 MiB`, as nvidia-smi shows memory; exact when `n` is whole MiB."""
    if n is None:
        return "-"
    return f"{n / MiB:,.0f} MiB"
