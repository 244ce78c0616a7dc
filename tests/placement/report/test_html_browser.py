"""The HTML report in a real headless browser (Debian's chromium): its charts draw, nothing overflows.

Skipped, saying why, only where chromium is not installed (`.ci/run` installs it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from placement.cli.main import main
from tests.placement.report.test_figures import SMALL_CATALOGUE, small_snapshots, write_ledger

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
)

# Appended to a copy of the page: once everything loaded, it writes what it measured into the DOM.
_PROBE = """<script>
window.addEventListener("load", () => {
  const root = document.documentElement;
  const wide = [...document.querySelectorAll("body *")].filter(
    (e) => e.getBoundingClientRect().right > root.clientWidth + 1);
  const found = {
    images: [...document.images].map((i) => [i.alt, i.complete, i.naturalWidth, i.naturalHeight]),
    charts: [...document.querySelectorAll("figure svg")].map((c) => {
      const box = c.getBoundingClientRect();
      // The drawing's own extent: an empty or collapsed chart has none.
      const drawn = c.getBBox();
      return [c.getAttribute("aria-label"), box.width, box.height, drawn.width, drawn.height,
              c.querySelectorAll("path").length];
    }),
    scroll_width: root.scrollWidth, client_width: root.clientWidth,
    wide: wide.map((e) => e.tagName + " " + (e.textContent || "").slice(0, 40)),
  };
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>"""


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # as root in CI
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=10000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def two_host_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An HTML report of two hosts (so the fleet panels are drawn too)."""
    tmp_path = tmp_path_factory.mktemp("browser")
    data = yaml.safe_load(yaml.safe_dump(SMALL_CATALOGUE))
    data["hosts"]["h2"] = dict(data["hosts"]["h1"])
    catalogue = tmp_path / "two.yaml"
    catalogue.write_text(yaml.safe_dump(data), encoding="utf-8")
    one = small_snapshots()
    two = [s.model_copy(update={"host": "h2"}) for s in one]
    ledger = write_ledger(tmp_path / "l.sqlite", [*one, *two])
    out = tmp_path / "out"
    argv = ["report", "--ledger", str(ledger), "--catalogue", str(catalogue), "--format", "html"]
    assert main([*argv, "--out", str(out)]) == 0
    return out / "report.html"


def test_charts_load_and_nothing_overflows(two_host_report: Path, tmp_path: Path) -> None:
    page = two_host_report.read_text(encoding="utf-8")
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    result = _chromium("--window-size=1400,1000", "--dump-dom", probed.as_uri())
    match = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, re.DOTALL)
    assert match, f"chromium gave no probe (exit {result.returncode}): {result.stderr[-800:]}"
    found = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert found["images"] == []  # the charts are inline SVG: nothing to load
    labels = [label for label, *_ in found["charts"]]
    # The fleet's panels first, then each card of both hosts.
    assert labels[0].startswith("free memory per card, one panel per host")
    assert labels[1:] == [
        f"{host} card {card}: headroom, drift per seat, used memory"
        for host in ("h1", "h2")
        for card in (0, 1)
    ]
    for label, width, height, drawn_width, drawn_height, paths in found["charts"]:
        assert width > 800 and height > 100, label
        assert drawn_width > 0.9 * width and drawn_height > 0.9 * height, label
        assert paths >= 2, label  # a line per card (fleet), or free, plannable, layers…
    assert found["scroll_width"] <= found["client_width"], found["wide"]
    assert not found["wide"]


def test_screenshot_shows_the_charts(two_host_report: Path, tmp_path: Path) -> None:
    import numpy as np
    from PIL import Image

    shot = tmp_path / "shot.png"
    result = _chromium(f"--screenshot={shot}", "--window-size=1400,7000", two_host_report.as_uri())
    assert shot.exists(), result.stderr[-800:]
    with Image.open(shot) as image:
        pixels = np.asarray(image.convert("RGB"), dtype=int)
    assert pixels.shape[1] == 1400
    # The five charts are over 3,000 px tall together, the text above them about 1,300 px:
    # without them the page would have far fewer rows that are not blank.
    drawn_rows = int((pixels < 245).any(axis=2).any(axis=1).sum())
    assert drawn_rows > 3500, drawn_rows
    # Saturated pixels (the charts' lines and fills; text is grey or black): the charts drew.
    saturation = pixels.max(axis=2) - pixels.min(axis=2)
    coloured_rows = int((saturation > 60).any(axis=1).sum())
    assert coloured_rows > 150, coloured_rows
    # The right margin past the page's 1320 px column stays blank: nothing runs out to the side.
    assert (pixels[:, 1385:, :] >= 250).all()
