"""The weekly report of the demo ledger, byte for byte: Markdown with its charts, HTML and JSON.

The goldens under golden/demo/ were written by the report before it read the ledger through
`inventory.history`; any change to the report's figures or words shows here as a diff.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from placement.cli import report as report_command
from placement.cli.main import main
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

# A week of demo snapshots is written and reported three times: tens of seconds.
pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).parent / "golden" / "demo"
REPO = Path(__file__).resolve().parents[3]
# The report's clock: an hour after the demo week's newest snapshot (2026-09-16T14:02Z).
NOW = datetime(2026, 9, 16, 15, 0, tzinfo=UTC)


def render_demo(work: Path) -> dict[str, bytes]:
    """Every file `make report` writes (and the JSON), by name, from a fresh demo ledger in `work`."""
    ledger = "demo.sqlite"
    catalogue, snapshot = str(FV_ML1_CATALOGUE), str(FV_ML1_SNAPSHOT)
    demo = ["demo-ledger", "--catalogue", catalogue, "--snapshot", snapshot, "--out", ledger]
    assert main([*demo, "--force"]) == 0
    base = ["report", "--catalogue", catalogue, "--ledger", ledger]
    for fmt in ("md", "html", "json"):
        assert main([*base, "--format", fmt, "--out", "report"]) == 0
    files = {p.name: p.read_bytes() for p in sorted((work / "report").iterdir())}
    return {name: _checkout_neutral(data) for name, data in files.items()}


def _checkout_neutral(data: bytes) -> bytes:
    """The demo names the snapshot it was seeded from by its absolute path; the goldens say <repo>."""
    return data.replace(str(REPO).encode(), b"<repo>")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    work = tmp_path_factory.mktemp("demo-report")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)
        patch.delenv("GPUPLAN_CATALOGUE", raising=False)
        patch.setattr(report_command, "utc_now", lambda: NOW)
        return render_demo(work)


FILES = (
    "chart-fv-ml1-gpu0.svg",
    "chart-fv-ml1-gpu1.svg",
    "chart-fv-ml1-gpu2.svg",
    "chart-fv-ml1-gpu3.svg",
    "report.html",
    "report.json",
    "report.md",
)


@pytest.mark.slow
def test_the_goldens_are_every_file_the_report_writes(rendered: dict[str, bytes]) -> None:
    assert sorted(rendered) == sorted(p.name for p in GOLDEN.iterdir()) == list(FILES)


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
def test_the_demo_report_is_byte_identical(rendered: dict[str, bytes], name: str) -> None:
    assert rendered[name] == (GOLDEN / name).read_bytes(), name
