"""Install and first run, as a new user does it: a wheel built from a clean copy of the tree,
installed into a fresh venv, runs `gpuplan --version` and plans the embedded example.

Slow (a venv and the dependencies, a minute or more): it runs where GPUPLAN_INSTALL_TEST=1 is
set, as `.ci/run` sets it, and is skipped, saying so, elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("GPUPLAN_INSTALL_TEST") != "1",
        reason="builds and installs a wheel: set GPUPLAN_INSTALL_TEST=1 (.ci/run does)",
    ),
]


def run(*argv: str | Path, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPUPLAN_CATALOGUE")}
    done = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}: {done.stderr[-3000:]}"
    return done


def clean_copy(target: Path) -> Path:
    """The tracked files of the tree (as they are now), without .venv, out/ or build leftovers."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh venv's bin folder, an empty folder to run in) after `pip install` of the wheel."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no clean copy to build from")
    work = tmp_path_factory.mktemp("install")
    tree = clean_copy(work / "tree")
    run(sys.executable, "-m", "venv", work / "venv", cwd=work)
    python = work / "venv" / "bin" / "python"
    run(python, "-m", "pip", "wheel", "--no-deps", "-w", work / "dist", tree, cwd=work)
    (wheel,) = (work / "dist").glob("gpuplan-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    # The package data a first run needs: the embedded example, and the type markers.
    for data in ("seats/catalogue/fv-ml1.yaml", "seats/catalogue/fv-ml1.snapshot.json"):
        assert data in names, sorted(names)
    assert {"seats/py.typed", "inventory/py.typed", "placement/py.typed"} <= names
    assert not any(n.startswith(("tests/", "bench/", "scripts/")) for n in names)
    run(python, "-m", "pip", "install", wheel, cwd=work)
    empty = work / "elsewhere"  # no source tree on the path: only the install answers
    empty.mkdir()
    return python.parent, empty


def test_version_comes_from_the_install(installed: tuple[Path, Path]) -> None:
    bin_dir, empty = installed
    version = run(bin_dir / "gpuplan", "--version", cwd=empty).stdout
    assert version.strip() == "gpuplan 0.1.0"


def test_plan_on_the_embedded_example_from_the_install(installed: tuple[Path, Path]) -> None:
    bin_dir, empty = installed
    where = run(
        bin_dir / "python",
        "-c",
        "import pathlib, seats; print(pathlib.Path(seats.__file__).parent / 'catalogue')",
        cwd=empty,
    ).stdout.strip()
    example = Path(where)
    assert example.is_relative_to(bin_dir.parent), example  # the venv's copy, not the tree's
    done = run(
        bin_dir / "gpuplan",
        "plan",
        "--catalogue",
        example / "fv-ml1.yaml",
        "--snapshot",
        example / "fv-ml1.snapshot.json",
        cwd=empty,
    )
    assert "PLACED   flash-next → fv-ml1 card 3   --gpu-memory-utilization 0.968" in done.stdout
    # matplotlib is no dependency any more: a plain install never brings it.
    missing = subprocess.run(
        [bin_dir / "python", "-c", "import matplotlib"], capture_output=True, check=False
    )
    assert missing.returncode != 0
