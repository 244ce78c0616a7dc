"""`python -m bench`: where it writes (out/bench/ by default, docs/ only when asked)."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

import bench
from bench import __main__ as runner

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """One bench module, `fake`, whose section names the folder it was told to write in;
    the docs' bench.md is a copy under tmp_path."""
    module = types.ModuleType("bench.bench_fake")

    def run() -> str:
        figure = bench.output_dir() / "fake.svg"
        figure.write_text("<svg/>", encoding="utf-8")
        return f"## fake\n\nfigure in {figure.parent}"

    module.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bench.bench_fake", module)
    monkeypatch.setattr(runner, "modules", lambda: ["fake"])
    docs = tmp_path / "docs" / "bench.md"
    docs.parent.mkdir()
    docs.write_text(
        "# gpuplan benchmarks\n\n<!-- bench: other -->\n## other\n\nkept\n", encoding="utf-8"
    )
    monkeypatch.setattr(runner, "DOCS", docs)
    monkeypatch.delenv(bench.OUT_ENV, raising=False)
    return docs


def test_a_run_writes_into_the_out_folder_and_leaves_docs_alone(
    fake_bench: Path, tmp_path: Path
) -> None:
    before = fake_bench.read_bytes()
    out = tmp_path / "o"
    assert runner.main(["--only", "fake", "--out", str(out)]) == 0
    assert fake_bench.read_bytes() == before
    written = (out / "bench.md").read_text(encoding="utf-8")
    assert f"figure in {out}" in written and (out / "fake.svg").exists()
    assert "## other\n\nkept" in written  # started from the docs' sections: a whole file


def test_refresh_docs_writes_the_docs(fake_bench: Path) -> None:
    assert runner.main(["--only", "fake", "--refresh-docs"]) == 0
    text = fake_bench.read_text(encoding="utf-8")
    assert f"figure in {fake_bench.parent}" in text and "## other" in text
    assert (fake_bench.parent / "fake.svg").exists()


def test_the_default_folder_is_one_git_ignores() -> None:
    assert bench.DEFAULT_OUT == ROOT / "out" / "bench"
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(bench.DEFAULT_OUT / "bench.md")],
        cwd=ROOT,
        check=False,
    )
    assert ignored.returncode == 0


def test_make_bench_passes_refresh_docs_only_when_asked() -> None:
    dry = ["make", "-n", "-C", str(ROOT), "bench"]
    plain = subprocess.run(dry, capture_output=True, text=True, check=True).stdout
    asked = subprocess.run(
        [*dry, "REFRESH_DOCS=1"], capture_output=True, text=True, check=True
    ).stdout
    assert "-m bench" in plain and "--refresh-docs" not in plain
    assert "-m bench --refresh-docs" in asked
