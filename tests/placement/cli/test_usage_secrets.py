"""gpuplan's own usage errors mask the words they quote, as command lines are masked (issue 32
item 8): argparse echoed `--api-key sk-…` whole in "unrecognized arguments", on stderr and in
`--json`.
"""

from __future__ import annotations

import json

import pytest

from placement.cli import main as cli_main

SECRET = "sk-proj-4f9a0c1e7b2d"


@pytest.mark.parametrize(
    ("words", "shown"),
    [
        (["--api-key", SECRET], "unrecognized arguments: --api-key ***"),
        ([f"--api-key={SECRET}"], "unrecognized arguments: --api-key=***"),
        (["--hf-token", SECRET, "--seed", "7"], "unrecognized arguments: --hf-token *** --seed 7"),
        ([f"Authorization:Bearer {SECRET}"], "unrecognized arguments: Authorization:Bearer ***"),
        (["--passphrase", SECRET], "unrecognized arguments: --passphrase ***"),
    ],
)
def test_an_unrecognised_secret_is_masked_on_stderr_and_in_json(
    words: list[str], shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["check", "svc", "--gpu", "0", *words, "--json"]
    assert cli_main.main(argv) == 2
    captured = capsys.readouterr()
    assert SECRET not in captured.err and SECRET not in captured.out
    assert captured.err.splitlines()[-1] == f"gpuplan: error: {shown}"
    message = json.loads(captured.out)["error"]["message"]
    assert message == f"gpuplan: error: {shown}"


def test_a_usage_error_without_a_secret_is_quoted_as_typed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli_main.main(["check", "svc", "--gpu", "0", "--max-num-batched-tokens", "8192"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "gpuplan: error: unrecognized arguments: --max-num-batched-tokens 8192"
    )
