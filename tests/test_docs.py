"""The command examples of README.md and docs/*.md print what they show; their links lead somewhere.

Each `console` example is run (scripts/refresh_docs.py says how); when one differs, run
`python scripts/refresh_docs.py` (or `make docs`) and read the diff it leaves.
"""

from __future__ import annotations

import importlib.util
import sys
import typing
from pathlib import Path
from types import ModuleType

import pytest

from placement.fit.verdict import Rule

ROOT = Path(__file__).resolve().parent.parent


def _load_refresher() -> ModuleType:
    """scripts/refresh_docs.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "refresh_docs", ROOT / "scripts" / "refresh_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["refresh_docs"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


docs = _load_refresher()
EXAMPLES = docs.all_examples()

# Written out, not derived from the CLI: the README shows one example of each job, the tour
# (docs/tour.md) one of every command.
README_COMMANDS = ("plan", "check", "report", "init")
TOUR_COMMANDS = (
    "plan",
    "check",
    "ledger",
    "snapshot",
    "report",
    "pack",
    "demo-ledger",
    "exporter",
    "alerts",
    "schema",
)
README_WORDS = 1200  # a five-minute read


@pytest.fixture(scope="module")
def results() -> dict[object, object]:
    """Every example, run once (blocks in parallel)."""
    return docs.run_all(EXAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=[ex.where for ex in EXAMPLES])
def test_example_prints_what_the_doc_shows(example: object, results: dict[object, object]) -> None:
    problem = docs.difference(example, results[example])
    assert problem is None, f"{problem}\n{docs.REFRESH_HINT}"


def test_the_readme_runs_one_example_of_each_job_and_stays_short() -> None:
    readme = ROOT / "README.md"
    shown = {ex.args[0] for ex in EXAMPLES if ex.path == readme}
    assert set(README_COMMANDS) <= shown, set(README_COMMANDS) - shown
    assert any("--compose" in ex.args for ex in EXAMPLES if ex.path == readme)
    text = readme.read_text(encoding="utf-8")
    assert "make plan" in text and "make test" in text
    assert "gpuplan calibrate" in text
    assert len(text.split()) <= README_WORDS, len(text.split())


def test_the_docs_index_lists_every_page() -> None:
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    pages = {page.name for page in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert len(pages) >= 10
    assert {page for page in pages if f"]({page})" not in index} == set()


def test_how_it_works_names_every_rule_and_counts_holds_in_held() -> None:
    text = (ROOT / "docs" / "how-it-works.md").read_text(encoding="utf-8")
    rules = typing.get_args(Rule)
    assert len(rules) == 14
    assert [rule for rule in rules if f"`{rule}`" not in text] == []
    held = next(item for item in text.split("\n- ") if item.startswith("`held(c, s)`"))
    assert "active hold" in held


def test_the_development_layout_names_every_package_and_module_it_lists() -> None:
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    layout = text.partition("## Layout")[2].partition("## Lint")[0]
    packages = sorted(
        path.parent.relative_to(ROOT)
        for top in ("seats", "inventory", "placement")
        for path in (ROOT / top).glob("**/__init__.py")
    )
    assert len(packages) == 15
    assert [str(p) for p in packages if f"{p.name}/" not in layout] == []
    # Every module beside inventory's and placement's subpackages, and every sentence writer.
    modules = [*(ROOT / "inventory").glob("*.py"), *(ROOT / "placement").glob("*.py")]
    modules += (ROOT / "placement" / "cli").glob("*_text.py")
    listed = [m.name for m in modules if not m.name.startswith("__")]
    assert [name for name in listed if name not in layout] == []


def test_the_tour_runs_one_example_of_every_command() -> None:
    tour = ROOT / "docs" / "tour.md"
    shown = {ex.args[0] for ex in EXAMPLES if ex.path == tour}
    assert set(TOUR_COMMANDS) <= shown, set(TOUR_COMMANDS) - shown


@pytest.mark.slow
def test_sh_blocks_parse_with_the_real_parser_and_name_real_make_targets() -> None:
    assert docs.parse_problems() == []


@pytest.mark.slow
def test_links_headings_and_repository_paths_exist() -> None:
    assert docs.link_problems() == []


# The comparison and the rewriting themselves, on small made-up texts.


def test_output_must_be_equal_line_for_line() -> None:
    assert docs.matches(["a", "b"], ["a", "b"])
    assert not docs.matches(["a", "b"], ["a", "c"])
    assert not docs.matches(["a"], ["a", "b"])


def test_an_elision_stands_for_any_lines_and_the_ends_stay_anchored() -> None:
    real = ["head", "x", "y", "middle", "z", "tail"]
    assert docs.matches(["head", "…", "middle", "…", "tail"], real)
    assert docs.matches(["head", "…"], real)
    assert docs.matches(["…", "tail"], real)
    assert not docs.matches(["x", "…"], real)  # the first part is anchored at the start
    assert not docs.matches(["head", "…", "z"], real)  # and the last at the end
    assert not docs.matches(["head", "…", "absent", "…"], real)
    assert not docs.matches(["head", "…", "tail", "…", "middle"], real)  # parts stay in order


def test_timings_are_volatile_and_nothing_else_is() -> None:
    assert docs.matches(["CBC, optimal, 0.20 s"], ["CBC, optimal, 1.46 s"])
    assert not docs.matches(["short 4.42 GiB"], ["short 4.43 GiB"])


def test_refreshed_output_keeps_the_elisions_and_follows_a_reworded_line() -> None:
    shown = ["title", "…", "## Headline", "old words", "…"]
    real = ["title v2", "note", "## Headline!", "new words", "rest", "more"]
    assert docs.refreshed(shown, real) == ["title v2", "…", "## Headline!", "new words", "…"]
    assert docs.refreshed(["a", "b"], ["c"]) == ["c"]


def test_console_syntax_other_than_gpuplan_is_refused() -> None:
    with pytest.raises(docs.DocsError, match="sh block"):
        docs.parse_command("gpuplan schema | head", "x.md:1")
    with pytest.raises(docs.DocsError, match="gpuplan"):
        docs.parse_command("make plan", "x.md:1")
    env, args, merge = docs.parse_command("A=1 gpuplan pack --card-bytes '1 GiB' 2>&1", "x.md:1")
    assert (env, args, merge) == ({"A": "1"}, ["pack", "--card-bytes", "1 GiB"], True)


def test_rewrite_puts_the_real_output_and_exit_code_under_the_command(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text(
        "Text.\n\n```console\n$ gpuplan pack \\\n    --card-bytes 1GiB\nstale line\n\n"
        "$ gpuplan schema\n{\n…\n}\n```\n"
    )
    pack, schema = docs.console_examples(doc)
    assert pack.args == ("pack", "--card-bytes", "1GiB") and pack.shown == ("stale line",)
    changed = docs.rewrite(
        doc,
        {
            pack: docs.Result(("fresh 1", "fresh 2"), 1),
            schema: docs.Result(("{", '  "a": 1,', "}"), 0),
        },
    )
    assert changed
    assert doc.read_text() == (
        "Text.\n\n```console\n$ gpuplan pack \\\n    --card-bytes 1GiB   # exit 1\nfresh 1\nfresh 2\n\n"
        "$ gpuplan schema\n{\n…\n}\n```\n"
    )
    pack, _ = docs.console_examples(doc)
    assert pack.exit_code == 1


def test_a_renamed_flag_in_a_sh_block_is_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "Makefile").write_text("plan:\n\ttrue\n")
    (tmp_path / "README.md").write_text(
        "```sh\nmake plan SEAT=x.yaml\nmake nothing\n"
        "gpuplan plan --catalogue c.yaml --snapshot s.json   # fine\n"
        "ssh h gpuplan snapshot --json | gpuplan plan --no-such-flag\n```\n"
    )
    problems = docs.parse_problems(tmp_path)
    assert len(problems) == 2, problems
    assert "no Makefile target ['nothing']" in problems[0]
    assert "--no-such-flag" in problems[1]


def test_a_broken_link_heading_or_path_is_caught(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## `gpuplan plan`: flags\n")
    (tmp_path / "README.md").write_text(
        "[ok](docs/a.md#gpuplan-plan-flags) [gone](docs/b.md) [bad](docs/a.md#nope)\n"
        "`placement/no_such_module.py` and `README.md` and https://example.org\n"
    )
    problems = docs.link_problems(tmp_path)
    assert len(problems) == 3, problems
    assert "docs/b.md: no such file" in problems[0]
    assert "no heading #nope" in problems[1]
    assert "placement/no_such_module.py" in problems[2]
