"""The profile arithmetic in plain ints, free of the catalogue model: vLLM's request, its KV
leftover and the resident a profile implies (DESIGN.md "vLLM's second refusal").

`fit.engines` and `fit.kv` use it; so does scripts/kv_profile_proof.py on a GPU machine
that has no pydantic.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction


def request_bytes(util: Decimal, cuda_total: int) -> int:
    """ceil(util × cuda_total) in exact arithmetic: what vLLM asks the card to have free."""
    product = Fraction(util) * cuda_total
    return -(-product.numerator // product.denominator)


def leftover_kv_bytes(requested: int, weights: int, non_kv: int) -> int:
    """The KV cache vLLM sizes from its request: what the weights and non-KV bytes leave."""
    return requested - weights - non_kv


def resident_bytes(
    *, weights: int, non_kv: int, kv: int, cuda_context: int, cuda_graphs: int = 0
) -> int:
    """weights + non_kv + KV bytes (none when negative) + cuda_graphs + cuda_context: a seat's
    bytes on a card. The CUDA graphs of vLLM before 0.21 lie outside its request, so they are
    counted here and never in `leftover_kv_bytes`."""
    return weights + non_kv + max(0, kv) + cuda_graphs + cuda_context
