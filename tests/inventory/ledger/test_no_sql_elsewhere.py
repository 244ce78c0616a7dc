"""The SQLite schema has one owner: no module outside inventory/ledger/ imports sqlite3 or writes SQL.

Scanned: the three packages and scripts/. Not bench/: bench_inventory.py bulk-loads a year of rows
and times a raw aggregate in SQLite, and bench_report.py counts rows with SQL of its own.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LEDGER = ROOT / "inventory" / "ledger"
SQL = re.compile(
    r"\b(SELECT\b.*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\b.*\bSET|DELETE\s+FROM|"
    r"CREATE\s+(TEMP\s+)?(TABLE|INDEX)|DROP\s+TABLE|PRAGMA)\b",
    re.IGNORECASE | re.DOTALL,
)


def offences(path: Path) -> list[str]:
    """sqlite3 imports, .execute/.executemany calls and SQL-looking strings in one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import) and any(a.name == "sqlite3" for a in node.names):
            found.append(f"{where} imports sqlite3")
        elif isinstance(node, ast.ImportFrom) and node.module == "sqlite3":
            found.append(f"{where} imports from sqlite3")
        elif isinstance(node, ast.Attribute) and node.attr in {"execute", "executemany"}:
            found.append(f"{where} calls .{node.attr}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and SQL.search(node.value)
        ):
            found.append(f"{where} SQL text {node.value[:40]!r}")
    return found


def modules() -> list[Path]:
    return [
        path
        for package in ("placement", "seats", "inventory", "scripts")
        for path in sorted((ROOT / package).rglob("*.py"))
        if LEDGER not in path.parents
    ]


@pytest.mark.slow
def test_no_sql_outside_the_ledger_package() -> None:
    assert len(modules()) > 20
    assert any(path.parent.name == "scripts" for path in modules())
    assert [o for path in modules() for o in offences(path)] == []


@pytest.mark.slow
def test_the_scan_finds_sql_where_there_is_some() -> None:
    # The same scan over the ledger package itself: it must see what it is looking for.
    found = [o for path in sorted(LEDGER.glob("*.py")) for o in offences(path)]
    assert any("imports sqlite3" in o for o in found)
    assert any("calls .execute" in o for o in found)
    assert any("SQL text" in o and "report_queries" in o for o in found)
