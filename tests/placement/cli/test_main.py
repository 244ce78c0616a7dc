"""The `gpuplan` shell: --help everywhere exits 0 and reads well, no command exits 2."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from placement.cli import main as cli_main
from placement.cli.main import main

# Written out, not read from the CLI: a command whose module went missing must fail here.
PRESENT = [
    "init",
    "plan",
    "check",
    "holds",
    "ledger",
    "snapshot",
    "compact",
    "report",
    "pack",
    "calibrate",
    "demo-ledger",
    "exporter",
    "alerts",
    "rules",
    "learn",
    "schema",
    "completion",
]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """`code` run in a fresh interpreter, its output captured."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_help_exits_0_and_lists_every_present_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: gpuplan")
    assert "Exit codes: 0 ok/pass, 1 refused, 2 bad input, 3 cannot decide." in out
    for name in PRESENT:
        assert f"    {name}" in out, name


def test_every_command_is_listed_in_help_order() -> None:
    assert list(cli_main.COMMANDS) == PRESENT


def test_a_command_whose_module_is_missing_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_main, "COMMANDS", (*cli_main.COMMANDS, "no-such-command"))
    with pytest.raises(ModuleNotFoundError, match=r"placement\.cli\.no_such_command"):
        cli_main.build_parser()


@pytest.mark.parametrize("name", PRESENT)
def test_each_command_help_exits_0(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: gpuplan {name}")
    assert "--help" in out


def test_ledger_help_explains_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "--help"]) == 0
    out = capsys.readouterr().out
    for figure in (
        "total",
        "reserve",
        "declared",
        "held",
        "used",
        "attributed",
        "unexplained",
        "free",
        "plannable",
    ):
        assert f"\n  {figure} " in out, figure
    for option in ("--catalogue FILE", "--snapshot FILE", "--live", "--ledger [DB]", "--json"):
        assert option in out
    assert "exit codes: 0 shown; 2 bad input" in out


def test_schema_help_says_how_to_use_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--help"]) == 0
    assert "gpuplan schema > catalogue.schema.json" in capsys.readouterr().out


def test_no_command_exits_2_with_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().err.startswith("usage: gpuplan")


def test_an_unknown_command_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot"]) == 2
    assert "invalid choice: 'plot'" in capsys.readouterr().err


def test_an_unknown_option_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "--colour"]) == 2
    assert "unrecognized arguments: --colour" in capsys.readouterr().err


@pytest.mark.slow
def test_python_dash_m_placement_is_gpuplan() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "placement", "schema", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout.startswith("usage: gpuplan schema")


@pytest.mark.slow
def test_the_gpuplan_process_freezes_its_start_up_objects_and_collects_after() -> None:
    # What the command imported is frozen (skipped by every later collection); the collector
    # is on again for what the command makes.
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print(gc.isenabled(), gc.get_freeze_count() > 10_000))\n"
        "from placement.cli.main import entry\n"
        "sys.argv = ['gpuplan', 'schema', '--help']\n"
        "entry()\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "True True"


def test_main_in_process_leaves_the_collector_alone(capsys: pytest.CaptureFixture[str]) -> None:
    frozen = gc.get_freeze_count()
    assert main(["check", "--help"]) == 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


@pytest.mark.parametrize(
    ("words", "named"),
    [
        (["check", "s", "--gpu", "0"], "check"),
        (["--debug", "plan", "--json"], "plan"),
        (["demo-ledger"], "demo-ledger"),
        (["--help", "plan"], None),
        (["-h"], None),
        ([], None),
        (["plot", "plan"], None),
    ],
)
def test_the_named_command_is_the_first_word_that_is_not_an_option(
    words: list[str], named: str | None
) -> None:
    assert cli_main.named_command(words) == named


@pytest.mark.slow
def test_running_one_command_imports_no_other_command_module() -> None:
    # A `check` in a deploy script runs on every deploy: it must not pay for the others.
    code = (
        "import sys\n"
        "from placement.cli.main import main\n"
        "main(['check', '--help'])\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('placement.cli.')\n"
        "    or m.split('.')[0] in ('pulp', 'highspy', 'matplotlib', 'prometheus_client'))\n"
        "print(' '.join(loaded), file=sys.stderr)\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    loaded = done.stderr.split()
    assert "placement.cli.check" in loaded
    for name in ("placement.cli.plan", "placement.cli.report", "pulp", "matplotlib"):
        assert name not in loaded, loaded


def test_version_is_read_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("gpuplan ")


@pytest.mark.slow
def test_plan_on_fv_ml1_imports_no_solver() -> None:
    # First-fit's placement is the only one there: pulp (and highspy) are never imported, and
    # without --window neither is the window's model.
    code = (
        "import sys\n"
        "from placement.cli.main import main\n"
        "code = main(['plan', '--catalogue', 'seats/catalogue/fv-ml1.yaml',\n"
        "    '--snapshot', 'seats/catalogue/fv-ml1.snapshot.json', '--json'])\n"
        "print(code, 'pulp' in sys.modules, 'highspy' in sys.modules,\n"
        "    'placement.fit.week' in sys.modules, file=sys.stderr)\n"
    )
    done = _python(code)
    assert done.stderr.split()[-4:] == ["0", "False", "False", "False"], done.stderr
    assert '"optimal": true' in done.stdout


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="threads counted in /proc")
def test_plan_starts_no_blas_threads() -> None:
    # numpy's OpenBLAS would start a thread per core at import (about 0.1 s of CPU on 2 cores,
    # more on more): the plan's process keeps its one thread.
    code = (
        "import os, sys\n"
        "os.environ.pop('OPENBLAS_NUM_THREADS', None)\n"
        "from placement.cli.main import main\n"
        "code = main(['plan', '--catalogue', 'seats/catalogue/fv-ml1.yaml',\n"
        "    '--snapshot', 'seats/catalogue/fv-ml1.snapshot.json', '--json'])\n"
        "print(code, 'numpy' in sys.modules, len(os.listdir('/proc/self/task')), file=sys.stderr)\n"
    )
    done = _python(code)
    assert done.stderr.split()[-3:] == ["0", "True", "1"], done.stderr


FV_ML1 = [
    "--catalogue",
    "seats/catalogue/fv-ml1.yaml",
    "--snapshot",
    "seats/catalogue/fv-ml1.snapshot.json",
]
# Issue 17: none of these in a command that runs in a deploy script or at a shell prompt.
HEAVY = ("pulp", "highspy", "matplotlib", "prometheus_client", "inventory.prometheus")


def _heavy_imports_of(words: list[str]) -> tuple[int, list[str]]:
    """The exit of `gpuplan WORDS` run in a fresh interpreter, and the HEAVY modules it imported."""
    code = (
        "import json, sys\n"
        "from placement.cli.main import main\n"
        f"code = main({words!r})\n"
        f"heavy = sorted(m for m in sys.modules if m.startswith({HEAVY!r}))\n"
        "print(json.dumps([code, heavy]), file=sys.stderr)\n"
    )
    done = _python(code)
    exit_code, heavy = json.loads(done.stderr.splitlines()[-1])
    return int(exit_code), list(heavy)


@pytest.mark.slow
def test_check_ledger_and_holds_import_no_solver_charts_or_prometheus(tmp_path: Path) -> None:
    # Each really runs, in a fresh interpreter: a check that holds, the ledger it wrote, its holds.
    ledger = str(tmp_path / "l.sqlite")
    runs = [
        ["check", "vllm-voices", "--gpu", "0", *FV_ML1, "--ledger", ledger],
        ["ledger", *FV_ML1, "--ledger", ledger, "--json"],
        ["holds", "--ledger", ledger, "--json"],
    ]
    for words in runs:
        assert _heavy_imports_of(words) == (0, []), words
