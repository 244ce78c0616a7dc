"""`gpuplan completion bash|zsh`: the script parses, and bash driven as on a TAB completes from it."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from placement.cli.completion import command_specs
from placement.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = str(ROOT / "seats/catalogue/fv-ml1.yaml")


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated bash script, and a `gpuplan` on PATH beside it that runs this tree."""
    where = tmp_path_factory.mktemp("completion")
    script = io.StringIO()
    with contextlib.redirect_stdout(script):
        assert main(["completion", "bash"]) == 0
    path = where / "gpuplan.bash"
    path.write_text(script.getvalue())
    program = where / "bin" / "gpuplan"
    program.parent.mkdir()
    program.write_text(f'#!/bin/sh\nexec {sys.executable} -m placement "$@"\n')
    program.chmod(0o755)
    return path


def complete(script: Path, line: list[str], env: dict[str, str] | None = None) -> list[str]:
    """What bash offers for the last word of `line`, as `complete -F _gpuplan` would ask."""
    words = " ".join(f"'{word}'" for word in line)
    driver = (
        f"source '{script}'\n"
        f"COMP_WORDS=({words}); COMP_CWORD={len(line) - 1}\n"
        '_gpuplan gpuplan "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    shell_env = {key: value for key, value in os.environ.items() if key != "GPUPLAN_CATALOGUE"}
    shell_env.update(PATH=f"{script.parent / 'bin'}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    shell_env.update(env or {})
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", driver],
        cwd=ROOT,
        env=shell_env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [word for word in done.stdout.splitlines() if word]


@pytest.mark.slow
def test_the_bash_script_parses(bash_script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(bash_script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "complete -F _gpuplan gpuplan" in bash_script.read_text()


def test_bash_completes_commands_options_and_choices(bash_script: Path) -> None:
    assert complete(bash_script, ["gpuplan", "pl"]) == ["plan"]
    assert complete(bash_script, ["gpuplan", "check", "--ca"]) == ["--catalogue"]
    assert complete(bash_script, ["gpuplan", "--debug", "pack", "--so"]) == ["--solver"]
    assert complete(bash_script, ["gpuplan", "plan", "--solver", ""]) == ["cbc", "highs"]
    assert complete(bash_script, ["gpuplan", "completion", ""]) == ["bash", "zsh"]
    # A free value (seconds) gets nothing, not the option list.
    assert complete(bash_script, ["gpuplan", "plan", "--time-limit", ""]) == []


@pytest.mark.slow
def test_bash_completes_seat_and_host_names_from_the_catalogue(bash_script: Path) -> None:
    by_env = {"GPUPLAN_CATALOGUE": CATALOGUE}
    assert complete(bash_script, ["gpuplan", "check", "vllm-v"], by_env) == ["vllm-voices"]
    assert complete(bash_script, ["gpuplan", "holds", "--release", "vllm-v"], by_env) == [
        "vllm-voices"
    ]
    # --catalogue on the line being completed, no environment.
    line = ["gpuplan", "learn", "--catalogue", CATALOGUE, "vllm-v"]
    assert complete(bash_script, line) == ["vllm-voices"]
    line = ["gpuplan", "check", "--catalogue", CATALOGUE, "--host", "fv"]
    assert complete(bash_script, line) == ["fv-ml1"]
    # No catalogue at all: nothing offered, and no error printed into the terminal.
    assert complete(bash_script, ["gpuplan", "check", "vllm-v"]) == []


def test_bash_completes_file_names_for_a_file_option(bash_script: Path) -> None:
    line = ["gpuplan", "plan", "--catalogue", "seats/catalogue/fv-ml1.y"]
    assert complete(bash_script, line) == ["seats/catalogue/fv-ml1.yaml"]


def test_the_zsh_script_parses_and_answers(
    tmp_path: Path, bash_script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", "zsh"]) == 0
    text = capsys.readouterr().out
    assert "bashcompinit" in text and "complete -F _gpuplan gpuplan" in text
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh is not installed: only the script's text was checked")
    path_with_gpuplan = f"{bash_script.parent / 'bin'}:{os.environ['PATH']}"
    path = tmp_path / "gpuplan.zsh"
    path.write_text(text)
    done = subprocess.run([zsh, "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # Loaded after compinit, the function answers as in bash (zsh filters by prefix itself).
    driver = (
        f"autoload -U compinit && compinit -u\nsource '{path}'\n"
        f"COMP_WORDS=(gpuplan check --catalogue '{CATALOGUE}' vllm-v); COMP_CWORD=4\n"
        f"_gpuplan gpuplan vllm-v '{CATALOGUE}'; print -l -- $COMPREPLY\n"
    )
    done = subprocess.run(
        [zsh, "-f", "-c", driver],
        cwd=ROOT,
        env={
            **os.environ,
            "PATH": path_with_gpuplan,
            "PYTHONPATH": str(ROOT),
            "HOME": str(tmp_path),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "vllm-voices" in done.stdout.split(), done.stderr


def test_names_lists_seats_and_hosts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "--names", "hosts", "--catalogue", CATALOGUE]) == 0
    assert capsys.readouterr().out.split() == ["fv-ml1"]
    assert main(["completion", "--names", "seats", "--catalogue", CATALOGUE]) == 0
    assert "vllm-voices" in capsys.readouterr().out.split()


def test_no_shell_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion"]) == 2
    assert "name a shell" in capsys.readouterr().err


def test_every_command_and_its_options_are_in_the_script() -> None:
    top, specs = command_specs()
    assert "--version" in top and "--debug" in top
    by_name = {spec.name: spec for spec in specs}
    assert set(by_name) >= {"plan", "check", "pack", "completion"}
    assert by_name["check"].positional == "seats"
    assert by_name["check"].values["--host"] == "hosts"
    assert by_name["holds"].values["--release"] == "seats"
    assert by_name["plan"].values["--add"] == "files"
    # Hidden options are for the script itself, never offered.
    assert "--names" not in by_name["completion"].options
