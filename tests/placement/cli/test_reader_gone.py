"""A verdict's exit code survives its output (DESIGN.md "Never yes by accident", issue 24 item 1).

`set -o pipefail; gpuplan check … | head -1 && docker compose up -d` must not deploy a refused
seat: a reader that leaves early changes nothing about the exit code, and prints no traceback.
Each run is a real process writing into a real pipe whose reading end is already closed.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT, ROOT

EXAMPLES = ROOT / "examples"
SOURCE = ["--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(FV_ML1_SNAPSHOT)]
REFUSED_CHECK = [
    "check",
    "new-6gib",
    "--gpu",
    "0",
    *SOURCE,
    "--add",
    str(EXAMPLES / "new-6gib.yaml"),
]
REFUSED_PLAN = ["plan", *SOURCE, "--add", str(EXAMPLES / "new-6gib.yaml")]
PLACED_PLAN = ["plan", *SOURCE, "--add", str(EXAMPLES / "new-4gib.yaml")]


def _gpuplan(words: list[str]) -> list[str]:
    return [sys.executable, "-m", "placement", *words]


def _exit_with_reader_gone(words: list[str], *, stderr_too: bool = False) -> tuple[int, str]:
    """(exit code, stderr) of `gpuplan WORDS` whose stdout's reader closed before a byte came."""
    process = subprocess.Popen(
        _gpuplan(words),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if stderr_too else subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdout is not None
    process.stdout.close()  # the reader leaves before the interpreter has even started
    _, err = process.communicate(timeout=120)
    return process.returncode, (err or b"").decode()


def _exit_with_reader_present(words: list[str]) -> int:
    return subprocess.run(_gpuplan(words), capture_output=True, cwd=ROOT, check=False).returncode


@pytest.mark.slow
@pytest.mark.parametrize(
    ("words", "expected"),
    [(REFUSED_CHECK, 1), (REFUSED_PLAN, 1), (PLACED_PLAN, 0), (["schema"], 0)],
    ids=["check-refused", "plan-refused", "plan-placed", "schema"],
)
def test_the_exit_code_is_the_verdicts_when_the_reader_left(
    words: list[str], expected: int
) -> None:
    assert _exit_with_reader_present(words) == expected  # the verdict, read whole
    code, err = _exit_with_reader_gone(words)
    assert code == expected
    assert "Traceback" not in err and "BrokenPipe" not in err


@pytest.mark.slow
def test_a_refusal_with_stderr_in_the_same_closed_pipe_still_exits_1() -> None:
    # `gpuplan check … 2>&1 | head -1`: the warnings on stderr meet the closed pipe first.
    code, _ = _exit_with_reader_gone(REFUSED_CHECK, stderr_too=True)
    assert code == 1


@pytest.mark.slow
def test_a_refused_seat_is_not_deployed_by_a_pipefail_pipeline(tmp_path: Path) -> None:
    deployed = tmp_path / "deployed"
    gpuplan = shlex.join(_gpuplan(REFUSED_CHECK))
    script = (
        f"set -o pipefail; {gpuplan} 2>/dev/null | head -c 0 && touch {shlex.quote(str(deployed))}"
    )
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, check=False)
    assert done.returncode == 1
    assert not deployed.exists()
