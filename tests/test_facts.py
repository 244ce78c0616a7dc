"""The facts the code, tests and docs cite live in the repository (docs/facts.md), by section."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FACTS = ROOT / "docs/facts.md"
# Built, not written: this file would otherwise point at the page it forbids.
OUTSIDE = re.compile("FACTS" + r"\.md")
CITED = re.compile(r"facts\.md\)? §(\d+)")


def tracked_text() -> dict[str, str]:
    """Every tracked file that reads as UTF-8 text, by its path in the repository."""
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    out: dict[str, str] = {}
    for name in filter(None, names):
        path = ROOT / name.decode()
        try:
            out[name.decode()] = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
    return out


def sections() -> set[str]:
    return set(re.findall(r"^## (\d+)\. ", FACTS.read_text(encoding="utf-8"), flags=re.M))


def test_the_facts_page_has_its_five_sections_each_with_its_source() -> None:
    text = FACTS.read_text(encoding="utf-8")
    assert sections() == {"1", "2", "3", "4", "5"}
    assert "measured on an NVIDIA H200, driver 580.159.04" in text
    assert "read from vLLM's released source (0.10.2, 0.33.0, 0.34.0)" in text
    # Each engine's rule names the release its source was read at.
    for release in ("sglang 0.5.8", "v3.3.7, dfb3fbe7", "b35ac1b6", "0c1e57098", "v0.32.15"):
        assert release in text, release


def test_no_file_points_at_a_facts_page_outside_docs() -> None:
    found = [
        f"{name}:{number}"
        for name, text in tracked_text().items()
        for number, line in enumerate(text.splitlines(), start=1)
        if OUTSIDE.search(line)
    ]
    assert found == []


def test_every_section_cited_is_one_of_the_page() -> None:
    have = sections()
    cited = {
        (name, section) for name, text in tracked_text().items() for section in CITED.findall(text)
    }
    assert len(cited) >= 40  # code, tests and docs cite it
    assert {(name, s) for name, s in cited if s not in have} == set()
