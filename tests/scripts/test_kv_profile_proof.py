"""scripts/kv_profile_proof.py without a GPU: its pure parts, and that its code path needs neither
pydantic nor pulp (the GPU machine has neither)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kv_profile_proof.py"
MIB = 2**20
GIB = 2**30


def _load() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("kv_profile_proof", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("kv_profile_proof", module)
    spec.loader.exec_module(module)
    return module


proof = _load()


def test_its_imports_and_the_nvml_door_need_no_pydantic_nor_pulp() -> None:
    code = (
        "import sys, runpy; sys.modules['pydantic'] = None; sys.modules['pulp'] = None; "
        f"sys.path.insert(0, {str(SCRIPT.parent)!r}); sys.argv = ['x', '--help']; "
        "import inventory.nvml; "
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "--kv-cache-memory" in done.stdout and "--util" in done.stdout


def test_the_kv_cache_is_the_pin_or_the_requests_leftover() -> None:
    weights, non_kv = 7600 * MIB, int(Decimal("1.32") * GIB)
    assert proof.kv_bytes(weights, non_kv, pinned=2 * GIB, util=None, cuda_total=1) == 2 * GIB
    total = 101_972_967_424  # fv-ml1's CUDA total (docs/facts.md §3)
    # ceil(0.11 × 101,972,967,424) = 11,217,026,417, less the weights and non-KV bytes.
    found = proof.kv_bytes(weights, non_kv, pinned=None, util=Decimal("0.11"), cuda_total=total)
    assert found == 11_217_026_417 - weights - non_kv


def test_the_child_allocates_in_vllms_order_with_non_kv_freed_to_the_cache() -> None:
    assert proof.steps(3, 2, 1) == [
        ("weights", "keep", 3),
        ("non_kv", "transient", 2),
        ("KV cache", "keep", 1),
    ]


def test_each_part_is_the_growth_its_step_caused_and_the_total_is_the_sum() -> None:
    plan = proof.steps(100 * MIB, 20 * MIB, 50 * MIB)
    readings = [500 * MIB, 602 * MIB, 622 * MIB, 672 * MIB]
    parts = proof.parts_from(plan, readings)
    assert [(p.predicted_bytes, p.observed_bytes) for p in parts] == [
        (500 * MIB, 500 * MIB),
        (100 * MIB, 102 * MIB),
        (20 * MIB, 20 * MIB),
        (50 * MIB, 50 * MIB),
    ]
    total = proof.total_part(parts)
    assert total.predicted_bytes == 670 * MIB and total.observed_bytes == 672 * MIB


def test_the_table_says_pass_within_tolerance_and_fail_beyond() -> None:
    inside = proof.Part("weights", 100 * MIB, 130 * MIB)
    outside = proof.Part("KV cache", 100 * MIB, 200 * MIB)
    rows, ok = proof.verdict_table([inside], 64 * MIB)
    assert ok and rows[-1].endswith("| PASS |") and "+31,457,280 B (30.0 MiB)" in rows[-1]
    rows, ok = proof.verdict_table([inside, outside], 64 * MIB)
    assert not ok and rows[-1].endswith("| FAIL |")
    rows, ok = proof.verdict_table([proof.Part("gone", 1, None)], 64 * MIB)
    assert not ok and "n/a" in rows[-1]
