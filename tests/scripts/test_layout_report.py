"""scripts/layout_report.py on a tiny package tree: modules, imports, the graph, cycles and counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts.loader import layout_report

ROOT = Path(__file__).resolve().parents[2]


layout = layout_report()

# A tree shaped like ours: seats at the bottom, inventory above with a subpackage reached by
# relative imports, placement above both, an import inside a function, and a __main__.
TREE = {
    "seats/__init__.py": "",
    "seats/units.py": "import os\nimport math\n\nKiB = 1024\n",
    "inventory/__init__.py": "",
    "inventory/snapshot.py": (
        "from seats.units import KiB\n\n\nclass Snapshot:\n    size_bytes = KiB\n"
    ),
    "inventory/ledger/__init__.py": "from .store import Ledger\n",
    "inventory/ledger/store.py": (
        "from ..snapshot import Snapshot\n\n\nclass Ledger:\n    last: Snapshot | None = None\n"
    ),
    "placement/__init__.py": '"""docstring only."""\n',
    "placement/__main__.py": "from placement.cli import main\n",
    "placement/cli.py": (
        "import yaml\n\n\ndef main() -> int:\n"
        "    from placement import fit\n"
        "    from inventory.ledger import store\n"
        "    return fit.answer(store)\n"
    ),
    "placement/fit.py": (
        "import inventory.snapshot\n\n\ndef answer(x):\n"
        "    if x:\n        return 1\n    for _ in range(3):\n        pass\n    return 0\n"
    ),
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path, TREE)


def test_modules_name_packages_by_their_init_and_skip_main(tree: Path) -> None:
    found = layout.modules(tree)
    assert set(found) == {
        "seats",
        "seats.units",
        "inventory",
        "inventory.snapshot",
        "inventory.ledger",
        "inventory.ledger.store",
        "placement",
        "placement.cli",
        "placement.fit",
    }
    assert found["inventory.ledger"] == tree / "inventory" / "ledger" / "__init__.py"


def test_package_of_a_module_is_its_parent_and_of_a_package_itself(tree: Path) -> None:
    known = set(layout.modules(tree))
    assert layout.package_of("inventory.ledger.store", known) == "inventory.ledger"
    assert layout.package_of("inventory.ledger", known) == "inventory.ledger"
    assert layout.package_of("placement.fit", known) == "placement"
    assert layout.package_of("seats", known) == "seats"


def test_imports_resolve_absolute_relative_and_in_function_imports(tree: Path) -> None:
    found = layout.modules(tree)
    known = set(found)

    def imports(module: str) -> set[str]:
        return layout.imports_of(found[module], module, known)

    # Only our modules count: os, math and yaml are not in the tree.
    assert imports("seats.units") == set()
    assert imports("inventory.snapshot") == {"seats.units"}
    # `from ..snapshot import Snapshot` from inventory/ledger/store.py: the name is a class,
    # so the import resolves to the module that defines it.
    assert imports("inventory.ledger.store") == {"inventory.snapshot"}
    # `from .store import Ledger` in a package's __init__ is relative to the package itself.
    assert imports("inventory.ledger") == {"inventory.ledger.store"}
    # Imports inside a function count; `from placement import fit` names the package and module.
    assert imports("placement.cli") == {
        "placement",
        "placement.fit",
        "inventory.ledger",
        "inventory.ledger.store",
    }
    assert imports("placement.fit") == {"inventory.snapshot"}


def test_package_graph_joins_modules_into_packages_without_self_edges(tree: Path) -> None:
    graph = layout.package_graph(tree)
    assert dict(graph) == {
        "seats": set(),
        "inventory": {"seats"},
        "inventory.ledger": {"inventory"},
        "placement": {"inventory", "inventory.ledger"},
    }


def test_cycles_finds_each_strongly_connected_component_once() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},
        "d": {"e"},
        "e": {"d"},
        "f": {"a"},
        "g": {"g"},
    }
    assert sorted(layout.cycles(graph)) == [["a", "b", "c"], ["d", "e"]]


def test_cycles_of_a_tree_without_them_is_empty(tree: Path) -> None:
    assert layout.cycles(layout.package_graph(tree)) == []
    assert layout.cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert layout.cycles({}) == []


def test_cycles_follow_edges_to_nodes_with_no_entry_of_their_own() -> None:
    # "z" is only ever a target; the walk must not stop at it or invent one.
    assert layout.cycles({"x": {"y", "z"}, "y": {"x"}}) == [["x", "y"]]


def test_module_cycles_found_and_init_reexports_ignored(tmp_path: Path) -> None:
    files = dict(TREE)
    # A function-level import back into the caller closes a cycle between two modules.
    files["placement/fit.py"] = "def answer(x):\n    from placement import cli\n    return cli\n"
    files["placement/cli.py"] = "from placement.fit import answer\n"
    root = write_tree(tmp_path, files)
    # inventory.ledger's __init__ re-exports store, and store imports ..snapshot: no cycle there.
    assert layout.module_cycles(root) == [["placement.cli", "placement.fit"]]
    # Both modules sit in one package: the package graph has no cycle.
    assert layout.cycles(layout.package_graph(root)) == []


def test_a_package_cycle_makes_main_exit_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = dict(TREE)
    files["seats/units.py"] = "from inventory.snapshot import Snapshot\n"
    root = write_tree(tmp_path, files)
    code = layout.main(["--root", str(root)])
    out = capsys.readouterr().out
    assert code == 1
    assert "package cycles: [['inventory', 'seats']]" in out


def test_main_prints_graph_counts_and_longest_functions(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = layout.main(["--root", str(tree), "--top", "1"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert "  inventory.ledger              6 lines  -> inventory" in lines
    assert "  seats                         4 lines  -> -" in lines
    assert "package cycles: none" in lines
    assert "module cycles: none" in lines
    assert lines[-2:] == ["longest 1 functions (lines):", "     6  placement.fit.answer"]


def test_line_counts_per_package(tree: Path) -> None:
    assert layout.line_counts(tree) == {
        "seats": 4,  # __init__ 0 + units 4
        "inventory": 5,  # __init__ 0 + snapshot 5
        "inventory.ledger": 6,  # __init__ 1 + store 5
        "placement": 1 + 7 + 9,  # __init__, cli, fit (__main__ is not counted)
    }


def test_longest_functions_longest_first_and_capped(tree: Path) -> None:
    assert layout.longest_functions(tree, 5) == [
        (6, "placement.fit.answer"),
        (4, "placement.cli.main"),
    ]
    assert layout.longest_functions(tree, 1) == [(6, "placement.fit.answer")]
