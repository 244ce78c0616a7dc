"""The layout of DESIGN.md "Layout", held: no import cycles, and arrows that run one way.

The graph comes from scripts/layout_report.py, which reads the source without importing it.
Each module belongs to a layer (its package, or a named top-level module of `placement`);
`ALLOWED` lists, from DESIGN.md, the layers each layer may import. SQL stays in
inventory/ledger/: tests/inventory/ledger/test_no_sql_elsewhere.py holds that rule.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.scripts.loader import layout_report

# Each check scans the whole source tree: `make test` runs them, `make test-fast` does not.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


layout = layout_report()

# inventory's data types and pure rules over them: what fit, plan, pack and check may read.
# Not nvml, poller, fake, proc or calibrate (they touch the machine), nor ledger or prometheus.
# inventory.secrets is the masking rule every command line crosses, compose commands included.
INVENTORY_DATA = {
    "inventory.snapshot",
    "inventory.attribution",
    "inventory.holds",
    "inventory.secrets",
}
INVENTORY = {"inventory", "inventory.ledger", "inventory.prometheus", "inventory.history"}
SUBPACKAGES = (
    "inventory.ledger",
    "inventory.prometheus",
    "inventory.history",
    "placement.fit",
    "placement.plan",
    "placement.pack",
    "placement.check",
    "placement.report",
    "placement.cli",
)

# Layer -> layers it may import (its own layer always). "inventory-data" stands for
# INVENTORY_DATA; "placement" is the package's docstring-only __init__.
ALLOWED: dict[str, set[str]] = {
    # seats is the bottom layer.
    "seats": set(),
    "placement": set(),
    # inventory -> seats; its subpackages read each other's data and the core.
    "inventory": {"seats", *INVENTORY},
    "inventory.ledger": {"seats", *INVENTORY} - {"inventory.history"},
    "inventory.prometheus": {"seats", *INVENTORY} - {"inventory.history"},
    # One history over both sources: it reads them; neither reads it.
    "inventory.history": {"seats", *INVENTORY},
    # The rule of what fits reads the catalogue and inventory's data types, nothing else of ours.
    # fit.week replays a host's moments: the frozen data of inventory.history (never a source).
    "placement.fit": {"seats", "inventory-data", "inventory.history", "placement"},
    # The one door to pulp and highspy.
    "placement.solvers": {"seats", "placement"},
    # placement/decisions.py is not in DESIGN.md's layout: the digest and ledger row of a
    # verdict, shared by check, the CLI and the demo ledger. It writes through the ledger.
    "placement.decisions": {"seats", "inventory-data", "inventory.ledger", "placement.fit"},
    # plan and pack -> fit, solvers, seats, inventory's data; never check, report or cli.
    "placement.plan": {
        "seats",
        "inventory-data",
        "placement",
        "placement.fit",
        "placement.solvers",
    },
    "placement.pack": {
        "seats",
        "inventory-data",
        "placement",
        "placement.fit",
        "placement.solvers",
    },
    # check and report -> fit (DESIGN.md's arrows), never plan or cli. The report reads the past
    # through inventory.history only; it still writes the demo ledger and reads its holds, and its
    # alerting rules name the exporter's metrics.
    "placement.check": {
        "seats",
        "inventory-data",
        "placement",
        "placement.fit",
        "placement.decisions",
    },
    "placement.report": {
        "seats",
        "inventory-data",
        "inventory.history",
        "inventory.ledger",
        "inventory.prometheus",
        "placement",
        "placement.fit",
        "placement.decisions",
    },
    # The CLI is the top: it may import every layer (and only it imports itself).
    "placement.cli": {
        "seats",
        "inventory-data",
        *INVENTORY,
        "placement",
        "placement.fit",
        "placement.solvers",
        "placement.decisions",
        "placement.plan",
        "placement.pack",
        "placement.check",
        "placement.report",
    },
}

# Real edges that break the layout today, each with why it is still here.
KNOWN_EDGES: set[tuple[str, str]] = {
    # The demo ledger records `check` decisions by running the checker itself: report -> check,
    # a sibling arrow DESIGN.md does not draw. Moving the demo under placement/cli/ removes it.
    ("placement.report.demo", "placement.check.seat"),
}
KNOWN_MODULE_CYCLES: list[list[str]] = []


def layer_of(module: str) -> str:
    """The layer a module belongs to: a subpackage, a top-level module of a package, or a root."""
    for package in SUBPACKAGES:
        if module == package or module.startswith(package + "."):
            return package
    if module in INVENTORY_DATA:
        return "inventory-data"
    if module.startswith("placement."):
        return module  # placement.solvers, placement.decisions
    return module.partition(".")[0]


def may_import(source: str, target: str) -> bool:
    """Whether module `source` may import module `target` under ALLOWED."""
    mine, theirs = layer_of(source), layer_of(target)
    if mine == theirs:
        return True
    if mine == "inventory-data":
        mine = "inventory"  # the data modules are inventory's own
    allowed = ALLOWED.get(mine)
    if allowed is None:
        return False  # a layer DESIGN.md does not know: say so rather than let it pass
    return theirs in allowed or (theirs == "inventory-data" and "inventory" in allowed)


def module_edges(root: Path) -> set[tuple[str, str]]:
    found = layout.modules(root)
    known = set(found)
    return {
        (module, target)
        for module, path in found.items()
        for target in layout.imports_of(path, module, known)
    }


def violations(edges: set[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted((s, t) for s, t in edges if not may_import(s, t))


@pytest.fixture(scope="module")
def edges() -> set[tuple[str, str]]:
    found = module_edges(ROOT)
    assert len(found) > 100  # the scan sees the real tree
    return found


def test_no_package_cycles() -> None:
    assert layout.cycles(layout.package_graph(ROOT)) == []


def test_no_module_cycles_beyond_the_known_ones() -> None:
    cycles = layout.module_cycles(ROOT)
    assert [c for c in cycles if c not in KNOWN_MODULE_CYCLES] == []


def test_every_module_has_a_layer_the_layout_knows() -> None:
    layers = {module: layer_of(module) for module in layout.modules(ROOT)}
    assert {m for m, layer in layers.items() if layer not in {*ALLOWED, "inventory-data"}} == set()


def test_arrows_run_one_way(edges: set[tuple[str, str]]) -> None:
    assert [edge for edge in violations(edges) if edge not in KNOWN_EDGES] == []


def test_seats_imports_nothing_of_ours(edges: set[tuple[str, str]]) -> None:
    assert {
        (s, t) for s, t in edges if s.startswith("seats") and not t.startswith("seats")
    } == set()


def test_fit_reads_only_seats_and_inventory_data(edges: set[tuple[str, str]]) -> None:
    outside = {t for s, t in edges if s.startswith("placement.fit.") and layer_of(t) != layer_of(s)}
    assert "inventory.snapshot" in outside
    assert {
        t
        for t in outside
        if t not in INVENTORY_DATA
        and not t.startswith("seats.")
        and t != "inventory.history.model"  # the week's moments: frozen data
    } == set()


def test_only_the_cli_imports_the_cli(edges: set[tuple[str, str]]) -> None:
    assert {
        (s, t)
        for s, t in edges
        if t.startswith("placement.cli") and not s.startswith("placement.cli")
    } == set()


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("seats.model", "inventory.snapshot"),
        ("inventory.snapshot", "placement.fit.verify"),
        ("inventory.poller", "placement.solvers"),
        ("placement.fit.verify", "inventory.ledger.store"),
        ("placement.fit.verify", "inventory.prometheus.reader"),
        ("placement.fit.verify", "inventory.poller"),
        ("placement.fit.verify", "placement.plan.problem"),
        ("placement.fit.verify", "placement.solvers"),
        ("placement.plan.planner", "placement.check.seat"),
        ("placement.plan.planner", "placement.report.figures"),
        ("placement.pack.packer", "placement.cli.render"),
        ("placement.plan.problem", "inventory.ledger.store"),
        ("placement.check.seat", "placement.cli.sources"),
        ("placement.report.figures", "placement.cli.render"),
        ("inventory.ledger.report_queries", "inventory.history.figures"),
        ("inventory.prometheus.range", "inventory.history.model"),
        ("placement.solvers", "placement.fit.verify"),
    ],
)
def test_the_rules_refuse_backward_arrows(source: str, target: str) -> None:
    assert violations({(source, target)}) == [(source, target)]


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("inventory.snapshot", "seats.loader"),
        ("inventory.ledger.store", "inventory.snapshot"),
        ("placement.fit.verify", "inventory.snapshot"),
        ("placement.fit.verify", "seats.model"),
        ("placement.plan.model", "placement.solvers"),
        ("placement.pack.packer", "placement.fit.engines"),
        ("placement.check.seat", "placement.fit.verify"),
        ("placement.report.figures", "inventory.history.ledger"),
        ("placement.cli.plan", "placement.plan.planner"),
        ("placement.cli.plan", "placement.cli.render"),
    ],
)
def test_the_rules_allow_forward_arrows(source: str, target: str) -> None:
    assert violations({(source, target)}) == []


# The report's figures of the past come through inventory.history alone: neither the ledger's
# window queries nor Prometheus's range queries are read directly (DESIGN.md "The week").
HISTORY_BEHIND = (
    "inventory.ledger.report_queries",
    "inventory.prometheus.range",
    "inventory.prometheus.reader",
)


def test_the_report_reads_the_past_only_through_the_history(edges: set[tuple[str, str]]) -> None:
    assert ("placement.report.figures", "inventory.history.figures") in edges
    assert {
        (s, t)
        for s, t in edges
        if s.startswith("placement.report") and t.startswith(HISTORY_BEHIND)
    } == set()


def test_known_exceptions_are_real_breaches() -> None:
    # An entry the rules would allow anyway is dead weight: the list only names real breaches.
    assert violations(KNOWN_EDGES) == sorted(KNOWN_EDGES)


# --- engines: nobody outside placement/fit/engines/ names an engine or its flags -------------

ENGINE_KINDS = frozenset({"vllm", "sglang", "tgi", "trtllm", "llamacpp", "ollama"})
# The flags that size an engine's memory (DESIGN.md, Engines); a module that writes one decides
# for the engine instead of asking it.
ENGINE_FLAGS = re.compile(
    r"(?<![\w-])(--gpu-memory-utilization|--kv-cache-memory-bytes|--mem-fraction-static"
    r"|--max-total-tokens|--cuda-memory-fraction|--max-input-tokens|--context-length"
    r"|--n-gpu-layers|-ngl|--ctx-size|--free-gpu-memory-fraction|OLLAMA_GPU_OVERHEAD)(?![\w-])"
)
# vLLM's flags that set a service's cards, context and LoRA slots: a module that reads one by
# name (the whole string is the flag, as in `flags.values["--max-model-len"]`) reads vLLM's
# command line instead of asking vLLM's engine module (fit/engines/vllm_flags.py `read_sizes`).
READ_FLAGS = frozenset(
    {
        "--max-model-len",
        "--kv-cache-dtype",
        "--tensor-parallel-size",
        "--pipeline-parallel-size",
        "--data-parallel-size",
        "--max-loras",
        "--max-lora-rank",
    }
)
ENGINE_PACKAGES = ("placement", "inventory", "seats")
# module → why it may name an engine or its flags.
ENGINE_NAME_EXCEPTIONS: dict[str, str] = {
    # The catalogue documents each engine field by the flag it stands for (DESIGN.md: an
    # engine's fields are its own flags in snake_case); `gpuplan schema` shows those texts.
    "seats.model": "field descriptions name the flag each field stands for",
    # gpuplan's own `check --util/--kv-cache-memory` options and their help, which say which
    # engine flag they override.
    "placement.cli.check": "help text of gpuplan's own options",
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the Constant nodes that are docstrings (documentation, not decisions)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _kinds_in(node: ast.expr) -> list[str]:
    """Engine kinds written as a literal, alone or inside a tuple, list or set literal, as a
    fallback (`kind or "vllm"`, `… if … else "vllm"`), or as a mapping's `kind` or `engine`."""
    if isinstance(node, ast.Constant) and node.value in ENGINE_KINDS:
        return [str(node.value)]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [kind for element in node.elts for kind in _kinds_in(element)]
    if isinstance(node, ast.BoolOp):
        return [kind for value in node.values for kind in _kinds_in(value)]
    if isinstance(node, ast.IfExp):
        return [*_kinds_in(node.body), *_kinds_in(node.orelse)]
    if isinstance(node, ast.Dict):
        return [
            kind
            for key, value in zip(node.keys, node.values, strict=True)
            if isinstance(key, ast.Constant) and key.value in ("kind", "engine")
            for kind in _kinds_in(value)
        ]
    return []


def engine_names_outside(root: Path) -> list[str]:
    """`module:line: what` for every engine kind compared, and every engine flag written in
    code (comments and docstrings aside), outside placement/fit/engines/."""
    found: list[str] = []
    for package in ENGINE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(
                ".__init__"
            )
            if module.startswith("placement.fit.engines") or module in ENGINE_NAME_EXCEPTIONS:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docs = _docstrings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.keyword) and node.arg == "kind":
                    for kind in _kinds_in(node.value):
                        found.append(f"{module}:{node.value.lineno}: builds kind {kind!r}")
                elif isinstance(node, ast.Compare):
                    for side in (node.left, *node.comparators):
                        for kind in _kinds_in(side):
                            found.append(f"{module}:{node.lineno}: compares {kind!r}")
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if id(node) in docs:
                        continue
                    for flag in ENGINE_FLAGS.findall(node.value):
                        found.append(f"{module}:{node.lineno}: writes {flag}")
                    if node.value in READ_FLAGS:
                        found.append(f"{module}:{node.lineno}: reads {node.value}")
    return sorted(found, key=lambda text: (text.split(":")[0], int(text.split(":")[1]), text))


def test_no_module_outside_the_engines_names_an_engine() -> None:
    assert engine_names_outside(ROOT) == []


def test_the_engine_name_scan_finds_what_it_forbids(tmp_path: Path) -> None:
    package = tmp_path / "placement" / "plan"
    package.mkdir(parents=True)
    (package / "bad.py").write_text(
        '"""Docstrings may say --gpu-memory-utilization."""\n'
        "def f(seat, flags):\n"
        '    if seat.engine.kind == "vllm":\n'
        '        return ["--mem-fraction-static", "0.3"]\n'
        '    if "--max-model-len" in flags:\n'
        '        return f"--max-model-len {flags}"\n'
        '    return seat.engine.kind in ("sglang", "tgi")\n'
        'ENGINE = Engine(kind="ollama")\n',
        encoding="utf-8",
    )
    (tmp_path / "placement" / "fit" / "engines").mkdir(parents=True)
    (tmp_path / "placement" / "fit" / "engines" / "ok.py").write_text(
        'X = "--gpu-memory-utilization" if "vllm" == "vllm" else None\n', encoding="utf-8"
    )
    assert engine_names_outside(tmp_path) == [
        "placement.plan.bad:3: compares 'vllm'",
        "placement.plan.bad:4: writes --mem-fraction-static",
        # A flag in a sentence is text; the flag alone is a read.
        "placement.plan.bad:5: reads --max-model-len",
        "placement.plan.bad:7: compares 'sglang'",
        "placement.plan.bad:7: compares 'tgi'",
        "placement.plan.bad:8: builds kind 'ollama'",
    ]


def test_every_engine_name_exception_is_still_needed() -> None:
    # An exception whose module no longer names an engine is dropped, not kept "just in case".
    kinds = re.compile("|".join(f'"{kind}"' for kind in sorted(ENGINE_KINDS)))
    for module in ENGINE_NAME_EXCEPTIONS:
        text = (ROOT / Path(*module.split(".")).with_suffix(".py")).read_text(encoding="utf-8")
        assert ENGINE_FLAGS.search(text) or kinds.search(text), module


# --- engines through the protocol only: no side door into an engine's own module -------------

# The engine package's entry points: the protocol (base), the list of engines (registry), the
# notes (note) and the package itself. Every other module of it is one engine's own (vllm_flags, sglang_options …).
ENGINE_ENTRY = frozenset(
    {
        "placement.fit.engines",
        "placement.fit.engines.base",
        "placement.fit.engines.registry",
        # What fit and every engine say as data (a warning, a nearest change): no engine's own.
        "placement.fit.engines.note",
    }
)


def engine_doors_outside(root: Path) -> list[str]:
    """`module:line: what` for every import of an engine's own module, and every engine kind
    written as a default, an assignment or an argument, outside placement/fit/engines/."""
    own = {
        path.stem
        for path in (root / "placement" / "fit" / "engines").glob("*.py")
        if f"placement.fit.engines.{path.stem}" not in ENGINE_ENTRY and path.stem != "__init__"
    }
    found: list[str] = []
    for package in ENGINE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(
                ".__init__"
            )
            if module.startswith("placement.fit.engines"):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                targets: list[str] = []
                if isinstance(node, ast.ImportFrom) and node.module is not None:
                    if node.module.startswith("placement.fit.engines"):
                        if node.module not in ENGINE_ENTRY:
                            targets.append(node.module)
                        elif node.module == "placement.fit.engines":
                            targets += [
                                f"{node.module}.{a.name}" for a in node.names if a.name in own
                            ]
                elif isinstance(node, ast.Import):
                    targets += [
                        a.name
                        for a in node.names
                        if a.name.startswith("placement.fit.engines.")
                        and a.name not in ENGINE_ENTRY
                    ]
                found += [f"{module}:{node.lineno}: imports {target}" for target in targets]
                values: list[ast.expr] = []
                if isinstance(node, ast.AnnAssign | ast.Assign) and node.value is not None:
                    values.append(node.value)
                elif isinstance(node, ast.arguments):
                    values += [d for d in (*node.defaults, *node.kw_defaults) if d is not None]
                elif isinstance(node, ast.Call):
                    values += node.args
                elif isinstance(node, ast.Dict):
                    values.append(node)  # `{"kind": "vllm"}` wherever it is written
                for value in values:
                    for kind in _kinds_in(value):
                        found.append(f"{module}:{value.lineno}: names kind {kind!r}")
    return sorted(set(found), key=lambda t: (t.split(":")[0], int(t.split(":")[1]), t))


def test_no_module_outside_the_engines_opens_an_engines_own_module() -> None:
    assert engine_doors_outside(ROOT) == []


def test_the_engine_door_scan_finds_what_it_forbids(tmp_path: Path) -> None:
    engines = tmp_path / "placement" / "fit" / "engines"
    engines.mkdir(parents=True)
    for name in ("__init__", "base", "registry", "vllm", "vllm_flags"):
        (engines / f"{name}.py").write_text('X = "vllm"\n', encoding="utf-8")
    package = tmp_path / "placement" / "check"
    package.mkdir(parents=True)
    (package / "bad.py").write_text(
        "from placement.fit.engines.vllm_flags import parse_util\n"
        "from placement.fit.engines import vllm_flags, engine_of\n"
        "import placement.fit.engines.vllm\n"
        "from placement.fit.engines.base import FlagError\n"
        "from placement.fit.engines.registry import engine\n"
        "class Service:\n"
        '    engine: str | None = "vllm"\n'
        'def f(kind="sglang", *, other="tgi"):\n'
        '    default = "ollama"\n'
        '    kind = service.engine or "tgi"\n'
        '    return engine("trtllm"), {"kind": "llamacpp"}, {"name": "vllm"}\n',
        encoding="utf-8",
    )
    assert engine_doors_outside(tmp_path) == [
        "placement.check.bad:1: imports placement.fit.engines.vllm_flags",
        "placement.check.bad:2: imports placement.fit.engines.vllm_flags",
        "placement.check.bad:3: imports placement.fit.engines.vllm",
        "placement.check.bad:7: names kind 'vllm'",
        "placement.check.bad:8: names kind 'sglang'",
        "placement.check.bad:8: names kind 'tgi'",
        "placement.check.bad:9: names kind 'ollama'",
        "placement.check.bad:10: names kind 'tgi'",
        # A mapping's engine kind is a default too; another key's value is only a name.
        "placement.check.bad:11: names kind 'llamacpp'",
        "placement.check.bad:11: names kind 'trtllm'",
    ]


# --- the card model is the simulator: room and gate are worked out in placement/fit/ alone ----

# The formulas of what fits (placement/fit/room.py, and the gate's predicate): a module outside
# placement/fit/ that calls one re-derives room or gate at its call site instead of asking the
# card's model (DESIGN.md "Layout": one model of a card, the one simulator).
FIT_FORMULAS = frozenset(
    {
        "room_bytes",
        "engine_free_bytes",
        "reserve_left_bytes",
        "fits_room",
        "passes_gate",
        "exclusive_binds",
    }
)


def formulas_outside_fit(root: Path) -> list[str]:
    """`module:line: what` for every import of placement.fit.room, every room or gate formula
    imported from placement.fit, and every bare call of one, outside placement/fit/."""
    found: list[str] = []
    for package in ENGINE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(
                ".__init__"
            )
            if module.startswith("placement.fit"):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "placement.fit"
                ):
                    for alias in node.names:
                        if node.module == "placement.fit.room" or alias.name in FIT_FORMULAS:
                            found.append(f"{module}:{node.lineno}: imports {alias.name}")
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name == "placement.fit.room":
                            found.append(f"{module}:{node.lineno}: imports {alias.name}")
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in FIT_FORMULAS
                ):
                    found.append(f"{module}:{node.lineno}: calls {node.func.id}")
                elif isinstance(node, ast.Compare):
                    found += [
                        f"{module}:{node.lineno}: compares a card's {name}"
                        for name in _row_figures(node)
                    ]
    return sorted(found, key=lambda text: (text.split(":")[0], int(text.split(":")[1]), text))


# A card row's figures that only `CardArrays.fits` and `takes` compare a need against (load + need
# ≤ floor): a walk outside placement/fit/ that compares them has copied the rule.
ROW_FIGURES = frozenset({"load", "floor"})


def _row_figures(node: ast.Compare) -> list[str]:
    """The ROW_FIGURES read by index (`floor[i]`, `each.load[i]`) in a comparison."""
    names = []
    for side in (node.left, *node.comparators):
        for part in ast.walk(side):
            if isinstance(part, ast.Subscript):
                value = part.value
                name = value.id if isinstance(value, ast.Name) else getattr(value, "attr", None)
                if name in ROW_FIGURES:
                    names.append(name)
    return names


def test_no_module_outside_fit_works_out_room_or_gate() -> None:
    assert formulas_outside_fit(ROOT) == []


def test_the_formula_scan_finds_what_it_forbids(tmp_path: Path) -> None:
    package = tmp_path / "placement" / "plan"
    package.mkdir(parents=True)
    (package / "bad.py").write_text(
        "from placement.fit.room import room_bytes\n"
        "from placement.fit.engines import passes_gate, need_bytes\n"
        "import placement.fit.room\n"
        "def f(slot, need):\n"
        "    left = room_bytes(free_bytes=1, held_bytes=0, margin_bytes=0)\n"
        "    return slot.room_bytes + fits_room(need, left) + slot.room_for(None)\n"
        "def walk(each, i, need):\n"
        "    return need <= each.room[i] and each.load[i] + need <= each.floor[i]\n",
        encoding="utf-8",
    )
    (tmp_path / "placement" / "fit").mkdir(parents=True)
    (tmp_path / "placement" / "fit" / "ok.py").write_text(
        "from placement.fit.room import room_bytes\nX = room_bytes(free_bytes=1, held_bytes=0, "
        "margin_bytes=0)\n",
        encoding="utf-8",
    )
    assert formulas_outside_fit(tmp_path) == [
        "placement.plan.bad:1: imports room_bytes",
        "placement.plan.bad:2: imports passes_gate",
        "placement.plan.bad:3: imports placement.fit.room",
        "placement.plan.bad:5: calls room_bytes",
        "placement.plan.bad:6: calls fits_room",
        "placement.plan.bad:8: compares a card's floor",
        "placement.plan.bad:8: compares a card's load",
    ]


# --- reasons are data: the words are written in placement/cli/ alone --------------------------

# The call that builds a Reason, and where it takes its words: (keyword, position).
REASON_BUILDERS = {"Reason": 5}
# Where words may be written: the edge. Each engine's module hands its refusal up as data
# (`Refusal.said` and facts) too; placement/cli/engine_text.py writes its sentence.
WORDS_AT = ("placement.cli", "placement.report")


def _has_words(node: ast.expr) -> bool:
    """True for anything but an empty string literal."""
    return not (isinstance(node, ast.Constant) and node.value == "")


def reason_words_outside_cli(root: Path) -> list[str]:
    """`module:line: what` for every Reason given words (a `text`), and every `replace` of a
    reason's text, outside the edge."""
    found: list[str] = []
    for package in ENGINE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(
                ".__init__"
            )
            if module.startswith(WORDS_AT):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                text = [k.value for k in node.keywords if k.arg == "text"]
                if name in REASON_BUILDERS:
                    at = REASON_BUILDERS[name]
                    text += node.args[at : at + 1]
                    if any(_has_words(value) for value in text):
                        found.append(f"{module}:{node.lineno}: gives {name} words")
                elif name == "replace" and any(_has_words(value) for value in text):
                    found.append(f"{module}:{node.lineno}: replaces a text")
    return sorted(found, key=lambda text: (text.split(":")[0], int(text.split(":")[1]), text))


def test_reasons_are_data_until_the_cli_writes_them() -> None:
    assert reason_words_outside_cli(ROOT) == []


def test_the_reason_words_scan_finds_what_it_forbids(tmp_path: Path) -> None:
    package = tmp_path / "placement" / "fit"
    package.mkdir(parents=True)
    (package / "bad.py").write_text(
        "def f(card, need, room, reason):\n"
        '    a = Reason("room", card, need, room, need - room, f"short {need - room}")\n'
        '    b = Reason(rule="room", card=card, need_bytes=need, room_bytes=room,\n'
        '               short_bytes=0, text="no room")\n'
        '    c = Reason("host", None, None, None, None, "no snapshot")\n'
        '    d = Reason("host", None, None, None, None, text=f"{card} is gone")\n'
        '    e = replace(reason, text=reason.text + "; and more")\n'
        '    ok = Reason("room", card, need, room, 0, host="h", said="room")\n'
        '    ok2 = host_reason(host="h", said="no_snapshot")\n'
        "    return a, b, c, d, e, ok, ok2\n",
        encoding="utf-8",
    )
    (tmp_path / "placement" / "cli").mkdir(parents=True)
    (tmp_path / "placement" / "cli" / "ok.py").write_text(
        'X = Reason("error", None, None, None, None, "stale snapshot")\n', encoding="utf-8"
    )
    assert reason_words_outside_cli(tmp_path) == [
        "placement.fit.bad:2: gives Reason words",
        "placement.fit.bad:3: gives Reason words",
        "placement.fit.bad:5: gives Reason words",
        "placement.fit.bad:6: gives Reason words",
        "placement.fit.bad:7: replaces a text",
    ]


# --- no sentences in placement/fit/: it returns data, the edge writes the words --------------

# A sentence is an f-string of three words or more outside a `raise` (an exit-2 message is
# allowed: it is the error, said where it is found). `learn`'s figure sources are notes too:
# placement/cli/learn_text.py writes them.


def sentences_in_fit(root: Path) -> dict[str, list[int]]:
    """module → lines of every f-string with three words or more outside a `raise`."""
    found: dict[str, list[int]] = {}
    for path in sorted((root / "placement" / "fit").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        raised = {
            id(n) for node in ast.walk(tree) if isinstance(node, ast.Raise) for n in ast.walk(node)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.JoinedStr) or id(node) in raised:
                continue
            text = " ".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
            # Words are what spaces part: a flag or a setting (`OLLAMA_GPU_OVERHEAD={n}`) is one.
            if sum(bool(re.search(r"[A-Za-z]{2}", word)) for word in text.split()) >= 3:
                found.setdefault(module, []).append(node.lineno)
    return found


def test_fit_builds_no_sentence() -> None:
    assert sentences_in_fit(ROOT) == {}


def test_the_sentence_scan_finds_what_it_forbids(tmp_path: Path) -> None:
    package = tmp_path / "placement" / "fit"
    package.mkdir(parents=True)
    (package / "bad.py").write_text(
        "def f(card, need):\n"
        '    warning = f"card {card}: NVML v1 only, stricter for the gate"\n'
        '    label = f"pid {card}"\n'
        '    flag = f"kv_cache_config.max_tokens={need}"\n'
        "    if need < 0:\n"
        '        raise ValueError(f"need {need} is below zero on card {card}")\n'
        "    return warning, label, flag\n",
        encoding="utf-8",
    )
    assert sentences_in_fit(tmp_path) == {"placement.fit.bad": [2]}


# --- the card model is the simulator: nobody outside fit edits a snapshot to simulate ----------

# A snapshot's readings: a module that sets one on a copy (a pydantic `model_copy(update=...)`,
# a `dataclasses.replace`, an update dict, a new Card/Process/Snapshot) builds a world that was
# never measured. Moves, deploys, greedy steps and the week place and take off seats on card
# models instead (`CardModel.with_seat` / `without_seat`).
SNAPSHOT_READINGS = frozenset(
    {"free_bytes", "used_bytes", "reserved_bytes", "total_bytes", "processes"}
)
# dataclasses.replace also copies our own rows, whose names may echo a reading (PlanCardRow's
# used_bytes): it is caught on the readings no row of ours carries.
REPLACE_READINGS = frozenset({"free_bytes", "reserved_bytes", "processes"})
SNAPSHOT_TYPES = frozenset({"Card", "Process", "Snapshot"})
SIMULATING_PACKAGES = ("placement/plan", "placement/check", "placement/pack")
# module.function → why it may set a reading on a copy.
SNAPSHOT_EDIT_EXCEPTIONS: dict[str, str] = {
    "placement.check.seat._attribute_by_port": (
        "labels the compose service's own process with its name (attribution); bytes unchanged"
    ),
}


def _keys(node: ast.expr | None) -> set[str]:
    """The string keys of a dict literal."""
    if not isinstance(node, ast.Dict):
        return set()
    return {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}


def _edits_in(function: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for every reading set on a copy inside `function`."""
    named: dict[str, set[str]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    named[target.id] = _keys(node.value)
    found: list[tuple[int, str]] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
            if name == "model_copy" and "update" in keywords:
                update = keywords["update"]
                keys = _keys(update) or (
                    named.get(update.id, set()) if isinstance(update, ast.Name) else set()
                )
                for key in sorted(keys & SNAPSHOT_READINGS):
                    found.append((node.lineno, f"copies with {key}"))
            elif name == "replace":
                for key in sorted(keywords.keys() & REPLACE_READINGS):
                    found.append((node.lineno, f"replaces {key}"))
            elif name in SNAPSHOT_TYPES:
                found.append((node.lineno, f"builds a {name}"))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.slice, ast.Constant)
                    and target.slice.value in SNAPSHOT_READINGS
                ):
                    found.append((node.lineno, f"sets {target.slice.value}"))
    return found


def snapshot_edits_outside_fit(root: Path) -> list[str]:
    """`module.function:line: what` for every snapshot reading set on a copy in plan/, check/
    and pack/ (the layers that simulate), bar SNAPSHOT_EDIT_EXCEPTIONS."""
    found: set[str] = set()
    for package in SIMULATING_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(
                ".__init__"
            )
            tree = ast.parse(path.read_text(encoding="utf-8"))
            functions = [
                n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
            seen: set[int] = set()
            for function in functions:
                where = f"{module}.{function.name}"
                for line, what in _edits_in(function):
                    seen.add(line)
                    if where not in SNAPSHOT_EDIT_EXCEPTIONS:
                        found.add(f"{where}:{line}: {what}")
            for line, what in _edits_in(tree):
                if line not in seen:
                    found.add(f"{module}:{line}: {what}")
    return sorted(found, key=lambda text: (text.split(":")[0], int(text.split(":")[1]), text))


def test_no_module_outside_fit_edits_a_snapshot_to_simulate() -> None:
    assert snapshot_edits_outside_fit(ROOT) == []


def test_every_snapshot_edit_exception_is_still_needed() -> None:
    for where, why in SNAPSHOT_EDIT_EXCEPTIONS.items():
        module, _, function = where.rpartition(".")
        tree = ast.parse((ROOT / Path(*module.split("."))).with_suffix(".py").read_text("utf-8"))
        bodies = [n for n in ast.walk(tree) if getattr(n, "name", None) == function]
        assert bodies and _edits_in(bodies[0]), (where, why)


def test_the_snapshot_edit_scan_finds_what_it_forbids(tmp_path: Path) -> None:
    package = tmp_path / "placement" / "plan"
    package.mkdir(parents=True)
    (package / "bad.py").write_text(
        "from dataclasses import replace\n"
        "def moved(card, process, freed):\n"
        "    process = process.model_copy(update={'used_bytes': 0, 'seat': 'x'})\n"
        "    update = {'processes': (process,), 'free_bytes': card.free_bytes + freed}\n"
        "    update['used_bytes'] = card.used_bytes - freed\n"
        "    return card.model_copy(update=update)\n"
        "def stopped(card, row):\n"
        "    row = replace(row, used_bytes=0, free_before_bytes=1)\n"
        "    return replace(card, processes=()), Card(index=0), row.model_copy(update={'seat': 1})\n",
        encoding="utf-8",
    )
    (tmp_path / "placement" / "fit").mkdir(parents=True)
    (tmp_path / "placement" / "fit" / "ok.py").write_text(
        "def f(card):\n    return card.model_copy(update={'free_bytes': 0})\n", encoding="utf-8"
    )
    assert snapshot_edits_outside_fit(tmp_path) == [
        "placement.plan.bad.moved:3: copies with used_bytes",
        "placement.plan.bad.moved:5: sets used_bytes",
        "placement.plan.bad.moved:6: copies with free_bytes",
        "placement.plan.bad.moved:6: copies with processes",
        # Our own rows' used_bytes is not a reading; a card's processes are.
        "placement.plan.bad.stopped:9: builds a Card",
        "placement.plan.bad.stopped:9: replaces processes",
    ]
