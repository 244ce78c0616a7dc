"""`learn`'s figure sources: the log reader hands up how each figure was worked out as data
(placement/fit/engines), and placement/cli/learn_text.py writes the words, the same in the
text and the JSON."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import pytest

from placement.cli import main as cli
from placement.cli.notes_text import note_text
from placement.fit.engines.note import Note
from placement.fit.engines.vllm_log import learn_profile, read_log
from tests.placement.fit.engines.test_vllm_log import V0_11, catalogue

CARD_TOTAL = 160 * 2**30  # 171,798,691,840 B


def test_a_worked_out_figure_is_data_until_the_edge() -> None:
    # vLLM 0.11 prints no split of its request: non_kv = ceil(util × total) − weights − KV bytes,
    # with the host's card_total; the per-token bytes are the KV bytes over the tokens.
    figures = read_log(V0_11.read_text(encoding="utf-8").splitlines())
    profile = learn_profile(figures, "log", declared_util=Decimal("0.9"), cuda_total=CARD_TOTAL)
    assert profile.non_kv is not None and profile.non_kv.how is not None
    assert profile.non_kv.line == ""
    assert dict(profile.non_kv.how.facts) == {
        "util": "0.9",
        "total_bytes": 171_798_691_840,
        "total_from": "host",
    }
    # 0.9 × 171,798,691,840 = 154,618,822,656 B, less 3.8844 GiB of weights and 102.56 GiB of KV.
    requested = math.ceil(Decimal("0.9") * CARD_TOTAL)
    assert profile.non_kv.value == requested - 4_170_842_741 - 110_122_961_469 == 40_325_018_446
    per_token = profile.kv_bytes_per_token
    assert per_token.how is not None and dict(per_token.how.facts) == {
        "kv_bytes": 110_122_961_469,
        "tokens": 840_160,
        "lines": (24, 25),
    }
    # Half a hundredth of a GiB over 840,160 tokens: 6.4 B, so within 7 B either way.
    precision = per_token.precision
    assert isinstance(precision, Note)
    assert dict(precision.facts) == {"slack_bytes": 7, "unit": "0.01 GiB"}
    assert note_text(precision) == (
        "within 7 B either way: the KV bytes are printed to 0.01 GiB (and vLLM counts tokens "
        "in whole blocks)"
    )


def test_learn_writes_each_source_once_in_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = catalogue(tmp_path, ", card_total: 160 GiB", ", gpu_memory_utilization: 0.9")
    argv = ["learn", "chat", "--vllm-log", str(V0_11), "--catalogue", path]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert cli.main([*argv, "--json"]) == 0
    sources = json.loads(capsys.readouterr().out)["sources"]
    non_kv = (
        "ceil(0.9 × 171,798,691,840 B, the host's card_total (NVML total)) − weights − KV bytes"
    )
    assert f"  non_kv: line 18: {non_kv} (as exact as its terms)\n" in text
    assert sources["non_kv"] == {
        "value": 40_325_018_446,
        "line": 18,
        "source": non_kv,
        "precision": "as exact as its terms",
    }
    per_token = "110,122,961,469 B ÷ 840,160 tokens (lines 24 and 25)"
    assert f"  kv_bytes_per_token: {per_token} (within 7 B either way" in text
    assert sources["kv_bytes_per_token"]["source"] == per_token
    # A negative CUDA graph figure is printed as the log gave it, and counted as none.
    assert "took -0.03 GiB (printed -0.03 GiB: none counted)\n" in text
    assert sources["cuda_graphs"]["value"] == 0
