"""Print the package import graph, its cycles, line counts per package and the longest functions.

Run from the repository root: `python scripts/layout_report.py [--top N]`. Reads source files
only (no imports are executed), so it works on any checkout, even a broken one.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOTS = ("seats", "inventory", "placement")


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the top-level packages."""
    found: dict[str, Path] = {}
    for top in ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if parts[-1] == "__main__":
                continue  # the entry point (`python -m placement`) imports the CLI; no layer
            found[".".join(parts)] = path
    return found


def package_of(module: str, known: set[str]) -> str:
    """The package a module belongs to: itself when it is a package, else its parent."""
    if _is_package(module, known):
        return module
    return module.rpartition(".")[0] or module


def _is_package(name: str, known: set[str]) -> bool:
    return any(other.startswith(name + ".") for other in known)


def imports_of(path: Path, module: str, known: set[str]) -> set[str]:
    """Every project module `path` imports, at module level or inside functions."""
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.add(name)
    return out


def package_graph(root: Path) -> dict[str, set[str]]:
    found = modules(root)
    known = set(found)
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in found.items():
        source = package_of(module, known)
        graph[source]
        for target in imports_of(path, module, known):
            dest = package_of(target, known)
            if dest != source:
                graph[source].add(dest)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = _pop_component(stack, on_stack, node)
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def _pop_component(stack: list[str], on_stack: set[str], root: str) -> list[str]:
    """Pop the stack down to `root` (included): one strongly connected component."""
    component: list[str] = []
    while True:
        item = stack.pop()
        on_stack.discard(item)
        component.append(item)
        if item == root:
            return component


def module_cycles(root: Path) -> list[list[str]]:
    found = modules(root)
    known = set(found)
    graph = {m: imports_of(p, m, known) - {m} for m, p in found.items()}
    # A package's __init__ re-exporting its modules is not a cycle of logic.
    graph = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}
    return cycles(graph)


def line_counts(root: Path) -> dict[str, int]:
    found = modules(root)
    known = set(found)
    counts: dict[str, int] = defaultdict(int)
    for module, path in found.items():
        counts[package_of(module, known)] += len(path.read_text().splitlines())
    return dict(counts)


def longest_functions(root: Path, top: int) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for module, path in modules(root).items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                out.append((length, f"{module}.{node.name}"))
    return sorted(out, reverse=True)[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10, help="how many longest functions")
    parser.add_argument("--root", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    graph = package_graph(args.root)
    counts = line_counts(args.root)
    print("package import graph (package -> packages it imports):")
    for package in sorted(graph):
        targets = ", ".join(sorted(graph[package])) or "-"
        print(f"  {package:<24} {counts.get(package, 0):>6} lines  -> {targets}")
    print(f"  {'total':<24} {sum(counts.values()):>6} lines")
    package_cycles = cycles(graph)
    print(f"package cycles: {package_cycles or 'none'}")
    print(f"module cycles: {module_cycles(args.root) or 'none'}")
    print(f"longest {args.top} functions (lines):")
    for length, name in longest_functions(args.root, args.top):
        print(f"  {length:>4}  {name}")
    return 1 if package_cycles else 0


if __name__ == "__main__":
    sys.exit(main())
