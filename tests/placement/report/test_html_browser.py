"""The report's charts in a real headless browser (Debian's chromium), from both formats: the HTML
page's inline SVG and the SVG files the Markdown links draw alike, and nothing overflows.

Skipped, saying why, only where chromium is not installed (`.ci/run` installs it).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from placement.cli.main import main
from tests.placement.report.test_figures import SMALL_CATALOGUE, small_snapshots, write_ledger

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
)

# Appended to a copy of a page: once everything loaded, it writes what it measured into the DOM.
# Each chart is also rasterised on a canvas, as the browser paints it: `ink` counts its pixels
# that are not white, `colour` its saturated ones (the lines and fills; text is grey or black).
_PROBE = """<script>
async function seen(src) {
  const img = new Image();
  img.src = src;
  await img.decode();
  const canvas = document.createElement("canvas");
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const pen = canvas.getContext("2d");
  pen.drawImage(img, 0, 0);
  const d = pen.getImageData(0, 0, canvas.width, canvas.height).data;
  let ink = 0, colour = 0;
  for (let i = 0; i < d.length; i += 4) {
    const high = Math.max(d[i], d[i + 1], d[i + 2]), low = Math.min(d[i], d[i + 1], d[i + 2]);
    if (low < 245) ink++;
    if (high - low > 60) colour++;
  }
  return [canvas.width, canvas.height, ink, colour];
}
window.addEventListener("load", async () => {
  const root = document.documentElement;
  const out = document.createElement("pre");
  out.id = "probe";
  try {
    const wide = [...document.querySelectorAll("body *")].filter(
      (e) => e.getBoundingClientRect().right > root.clientWidth + 1);
    const inline = [...document.querySelectorAll("figure svg")];
    const found = {
      images: [...document.images].map((i) => [i.alt, i.complete, i.naturalWidth, i.naturalHeight]),
      charts: inline.map((c) => {
        const box = c.getBoundingClientRect();
        // The drawing's own extent: an empty or collapsed chart has none.
        const drawn = c.getBBox();
        return [c.getAttribute("aria-label"), box.width, box.height, drawn.width, drawn.height,
                c.querySelectorAll("path").length];
      }),
      pixels: [],
      scroll_width: root.scrollWidth, client_width: root.clientWidth,
      wide: wide.map((e) => e.tagName + " " + (e.textContent || "").slice(0, 40)),
    };
    for (const c of inline) {
      const text = new XMLSerializer().serializeToString(c);
      found.pixels.push(await seen("data:image/svg+xml;charset=utf-8," + encodeURIComponent(text)));
    }
    for (const i of document.images) found.pixels.push(await seen(i.src));
    out.textContent = JSON.stringify(found);
  } catch (e) {
    out.textContent = JSON.stringify({error: String(e)});
  }
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
            # The Markdown's charts are files beside it: let the page read their pixels.
            "--allow-file-access-from-files",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def two_host_reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The HTML and the Markdown report of two hosts (so the fleet panels are drawn too)."""
    tmp_path = tmp_path_factory.mktemp("browser")
    data = yaml.safe_load(yaml.safe_dump(SMALL_CATALOGUE))
    data["hosts"]["h2"] = dict(data["hosts"]["h1"])
    catalogue = tmp_path / "two.yaml"
    catalogue.write_text(yaml.safe_dump(data), encoding="utf-8")
    one = small_snapshots()
    two = [s.model_copy(update={"host": "h2"}) for s in one]
    ledger = write_ledger(tmp_path / "l.sqlite", [*one, *two])
    argv = ["report", "--ledger", str(ledger), "--catalogue", str(catalogue)]
    assert main([*argv, "--format", "html", "--out", str(tmp_path / "html")]) == 0
    assert main([*argv, "--format", "md", "--out", str(tmp_path / "md")]) == 0
    return tmp_path / "html" / "report.html", tmp_path / "md" / "report.md"


LABELS = [
    "free memory per card, one panel per host, worst first",
    *(
        f"{host} card {card}: headroom, drift per seat, used memory"
        for host in ("h1", "h2")
        for card in (0, 1)
    ),
]


def _probe(page: Path, tmp_path: Path) -> dict[str, Any]:
    """What the probe measured in `page` (a copy beside it, so its relative links resolve)."""
    probed = page.with_name(f"probed-{tmp_path.name}.html")
    probed.write_text(
        page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8"
    )
    result = _chromium("--window-size=1400,1000", "--dump-dom", probed.as_uri())
    match = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, re.DOTALL)
    assert match, f"chromium gave no probe (exit {result.returncode}): {result.stderr[-800:]}"
    found: dict[str, Any] = json.loads(html.unescape(match.group(1)))
    assert "error" not in found, found
    return found


def _looks_drawn(pixels: list[list[int]]) -> None:
    """Each chart, as the browser painted it, is a real drawing of its size."""
    fleet, *cards = pixels
    assert fleet[:2] == [1008, 181], fleet
    assert all(card[:2] == [900, 756] for card in cards), cards
    for width, height, ink, colour in pixels:
        # Lines, fills, grid and text: far more than a frame, far less than a filled box.
        assert 0.04 * width * height < ink < 0.9 * width * height, (width, height, ink)
        # The coloured lines and fills: a frame, text and legend alone come to a few hundred.
        assert colour > 1000, (pixels, width, height, colour)


@pytest.mark.slow
def test_html_charts_draw_and_nothing_overflows(
    two_host_reports: tuple[Path, Path], tmp_path: Path
) -> None:
    found = _probe(two_host_reports[0], tmp_path)
    assert found["images"] == []  # the charts are inline SVG: nothing to load
    # The fleet's panels first, then each card of both hosts.
    assert [label for label, *_ in found["charts"]] == LABELS
    for label, width, height, drawn_width, drawn_height, paths in found["charts"]:
        assert width > 800 and height > 100, label
        assert drawn_width > 0.9 * width and drawn_height > 0.9 * height, label
        assert paths >= 2, label  # a line per card (fleet), or free, plannable, layers…
    _looks_drawn(found["pixels"])
    assert found["scroll_width"] <= found["client_width"], found["wide"]
    assert not found["wide"]


@pytest.mark.slow
def test_markdown_charts_are_the_svg_files_it_links_and_draw_alike(
    two_host_reports: tuple[Path, Path], tmp_path: Path
) -> None:
    page, markdown = two_host_reports
    # The page a Markdown viewer makes of the report's charts: each link an <img>.
    links = re.findall(r"^!\[([^\]]*)\]\(([^)]+)\)$", markdown.read_text(encoding="utf-8"), re.M)
    assert [alt for alt, _ in links] == LABELS
    assert all(target.endswith(".svg") and "/" not in target for _, target in links)
    viewer = markdown.with_name("viewer.html")
    viewer.write_text(
        "<!DOCTYPE html><html><body>"
        + "".join(f'<p><img alt="{html.escape(a)}" src="{html.escape(t)}"></p>' for a, t in links)
        + "</body></html>",
        encoding="utf-8",
    )
    found = _probe(viewer, tmp_path)
    assert [alt for alt, *_ in found["images"]] == LABELS
    assert all(complete and width > 800 for _, complete, width, _ in found["images"])
    _looks_drawn(found["pixels"])
    # The same drawing as the HTML page's, pixel for pixel counted.
    assert found["pixels"] == _probe(page, tmp_path)["pixels"]
