"""`!reset` on a service that extends another: its own paths clear its base, whether the file
that holds it is the one loaded or one that `extends.file` names."""

from __future__ import annotations

from pathlib import Path

from placement.check.compose.project import load_project

BASE = """\
services:
  z:
    image: z
    environment:
      A: "1"
  y:
    extends: {service: z}
    environment: !reset {}
"""


def services(path: Path) -> dict[str, object]:
    return load_project([path], {}, find_override=False).services


def test_a_reset_clears_the_base_in_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(BASE + "  x:\n    extends: {service: y}\n    image: x\n", encoding="utf-8")
    assert services(path)["x"] == {"image": "x"}


def test_a_reset_in_a_file_named_by_extends_file_clears_its_own_base(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(BASE, encoding="utf-8")
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n  x:\n    extends: {service: y, file: base.yaml}\n    image: x\n",
        encoding="utf-8",
    )
    # y's `environment: !reset {}` drops z's A before x extends y, as when y is in x's file.
    assert services(path)["x"] == {"image": "x"}
