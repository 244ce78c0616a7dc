"""Env files as compose-go's dotenv package reads them, and env files that fight back (issue 32).

compose-go's own cases come first: its TestParsing table (data/compose-go/dotenv-parsing.yaml) and
its fixtures (data/compose-go/dotenv/, copied verbatim), each test named after the Go test whose
assertions it repeats (dotenv/godotenv_test.go at e70e961c, data/compose-go/README.md).

Then `gpuplan check --compose` on files written under tmp_path, on the seed's before-voices
snapshot of fv-ml1: a bad env file is exit 2 with one line naming the file and the line, and the
text of an env file (a secret) is never printed, on stderr or in `--json`.
"""

from __future__ import annotations

import errno
import json
import os
import signal
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from placement.check.compose import ComposeError, load_compose, parse_env_file
from placement.check.compose import dotenv as dotenv_module
from placement.check.compose.dotenv import MAX_ENV_FILE_BYTES, read_env_file
from placement.cli import check as check_command
from placement.cli import main as cli

DATA = Path(__file__).parent / "data" / "compose-go"
FIXTURES = DATA / "dotenv"
PARSING = yaml.safe_load((DATA / "dotenv-parsing.yaml").read_text(encoding="utf-8"))["parsing"]
ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = "seats/catalogue/fv-ml1.yaml"
BEFORE = "seats/catalogue/fv-ml1-before-voices.snapshot.json"
TAKEN = datetime(2026, 9, 16, 11, 40, 5, tzinfo=UTC)
CARD1 = "    deploy: {resources: {reservations: {devices: [{driver: nvidia, device_ids: ['1'], capabilities: [gpu]}]}}}\n"
SECRET = "hf_SECRETvalue0123456789"
CHARACTER = (
    "a variable name holds a character compose does not accept (letters, digits and _ . - [ ] "
    "only; KEY=VALUE or KEY: VALUE)"
)


# --- compose-go's own cases -------------------------------------------------------------------


@pytest.mark.parametrize("case", PARSING, ids=lambda c: repr(c["line"]))
def test_compose_go_parsing_table(case: dict[str, str]) -> None:
    """TestParsing: each line read alone gives its key that value."""
    assert parse_env_file(case["line"], "t.env")[case["key"]] == case["value"]


def test_the_parsing_table_is_all_there() -> None:
    assert len(PARSING) == 51


def test_compose_go_badly_formatted_line() -> None:
    """TestParsing's last case: `lol$wut` is an error; here it names the line, not the text."""
    with pytest.raises(ComposeError) as caught:
        parse_env_file("A=1\nlol$wut", "t.env")
    assert str(caught.value) == f"t.env: line 2: {CHARACTER}"
    assert "lol" not in str(caught.value) and "wut" not in str(caught.value)


@pytest.mark.parametrize(
    "text",
    [
        'KEY="', 'KEY="value', 'KEY="value\\"', "KEY=\"value'",
        "KEY='", "KEY='value", "KEY='value\\'", "KEY='value\"",
    ],
)  # fmt: skip
def test_compose_go_unterminated_quotes(text: str) -> None:
    """TestUnterminatedQuotes: each is an error, on the line where the value opens."""
    with pytest.raises(ComposeError) as caught:
        parse_env_file("A=1\n" + text, "t.env")
    message = str(caught.value)
    assert message == f"t.env: line 2: a value opened with {text[4]} is never closed"


def fixture(name: str, lookup: Callable[[str], str | None] | None = None) -> dict[str, str]:
    return read_env_file(FIXTURES / name, lookup)


def test_compose_go_fixtures() -> None:
    """TestReadPlainEnv, TestLoadQuotedEnv, TestLoadUnquotedEnv, TestLoadExportedEnv,
    TestLoadEqualsEnv, TestUTF8BOM, TestDash: the fixtures' values."""
    plain = {"OPTION_A": "1", "OPTION_B": "2", "OPTION_C": "3", "OPTION_D": "4", "OPTION_E": "5"}
    plain |= {"OPTION_F": "", "OPTION_G": "", "OPTION_H": "my string"}
    # `456 = ABC` is read too: only godotenv's Read drops names that start with a digit, and
    # compose reads env files through GetEnvFromFile and ParseWithFormat, which keep them.
    assert fixture("plain.env") == plain | {"456": "ABC"}
    assert fixture("utf8-bom.env") == plain | {"456": "ABC"}
    assert fixture("quoted.env") == {
        "OPTION_A": "1", "OPTION_B": "2", "OPTION_C": "", "OPTION_D": "\\n",
        "OPTION_E": "1", "OPTION_F": "2", "OPTION_G": "", "OPTION_H": "\n",
        "OPTION_I": "echo 'asd'",
        "OPTION_J": "first line\nsecond line\nthird line\nand so on",
        "OPTION_K": "Let's go!", "OPTION_Z": "last value",
    }  # fmt: skip
    assert fixture("unquoted.env") == {
        "OPTION_A": "some quoted phrase",
        "OPTION_B": "first one with an unquoted phrase",
        "OPTION_C": "then another one with an unquoted phrase",
        "OPTION_D": "then another one with an unquoted phrase special è char",
        "OPTION_E": "then another one quoted phrase",
    }
    assert fixture("exported.env") == {"OPTION_A": "2", "OPTION_B": "\\n"}
    assert fixture("equals.env") == {
        "OPTION_A": "postgres://localhost:5432/database?sslmode=disable"
    }
    assert fixture("special.env") == {
        "VAR.WITH.DOTS": "dots",
        "VAR_WITH_UNDERSCORES": "underscores",
        "VAR-WITH-DASHES": "dashes",
    }


def test_compose_go_substitutions_and_their_precedence() -> None:
    """TestSubstitutions, TestSubstitutionsWithEnvFilePrecedence and the two DefaultValue tests:
    the environment is looked up before the file's own earlier lines."""
    assert fixture("substitutions.env") == {
        "OPTION_A": "1", "OPTION_B": "1", "OPTION_C": "1", "OPTION_D": "1_1", "OPTION_E": "",
    }  # fmt: skip
    environ = {"OPTION_A": "5"}
    assert fixture("substitutions.env", environ.get) == {
        "OPTION_A": "1", "OPTION_B": "5", "OPTION_C": "5", "OPTION_D": "5_5", "OPTION_E": "",
    }  # fmt: skip
    assert fixture("substitutions-default.env", environ.get) == {
        "OPTION_A": "5", "OPTION_B": "5", "OPTION_C": "5", "OPTION_D": "5_5", "OPTION_E": "",
    }  # fmt: skip
    assert fixture("substitutions-default.env")["OPTION_D"] == "1_1"


def test_compose_go_inherited_variables() -> None:
    """TestInheritedEnvVariableSameSize, …SingleVar, …NotFound: a name alone on its line takes
    the environment's value, and is left out when the environment has none."""
    environ = {"VAR_TO_BE_LOADED_FROM_OS_ENV": "SOME_RANDOM_VALUE"}
    assert fixture("inherited-multi-var.env", environ.get) == {
        "foo": "bar",
        "VAR_TO_BE_LOADED_FROM_OS_ENV": "SOME_RANDOM_VALUE",
        "bar": "baz",
    }
    assert fixture("inherited-single-var.env", environ.get) == environ
    assert fixture("inherited-not-found.env", environ.get) == {}


def test_compose_go_error_parsing_names_the_line_only() -> None:
    """TestErrorParsing: invalid1.env fails at "line 7: key cannot contain a space" (after a
    quoted value over five lines); here the same line, and not its text."""
    with pytest.raises(ComposeError) as caught:
        fixture("invalid1.env")
    path = FIXTURES / "invalid1.env"
    assert str(caught.value) == f"{path}: line 7: a variable name holds a space"


# --- issue 31: a quoted value and its comment ---------------------------------------------------


@pytest.fixture
def _fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    for name in ("U", "HF_TOKEN", "GPU"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(check_command, "utc_now", lambda: TAKEN + timedelta(minutes=5))


def check(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> tuple[int, str, str]:
    code = cli.main(
        ["check", "--compose", str(path), "--catalogue", CATALOGUE, "--snapshot", BEFORE, *extra]
    )
    out, err = capsys.readouterr()
    return code, out, err


def vllm(name: str, util: str = "0.03", extra: str = "") -> str:
    return (
        f"  {name}:\n    image: vllm/vllm-openai:v0.11.0\n"
        f"    command: [--model, m, --gpu-memory-utilization, '{util}']\n{CARD1}{extra}"
    )


def project(tmp_path: Path, compose: str, dotenv: str | None = None) -> Path:
    path = tmp_path / "compose.yaml"
    path.write_text(compose, encoding="utf-8")
    if dotenv is not None:
        (tmp_path / ".env").write_text(dotenv, encoding="utf-8")
    return path


@pytest.mark.usefixtures("_fixed")
@pytest.mark.parametrize(
    "line", ['U="0.03" # the util', "U='0.03' # the util", "U=0.03 # the util", 'U="0.03"#'],
)  # fmt: skip
def test_a_quoted_value_before_a_comment_is_the_value(
    line: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 31: `U="0.3" # comment` was read as `"0.3"` with its quotes, a false exit 2; compose
    reads 0.3 (parser.go: the quoted value ends at its quote, the rest of the line a comment)."""
    path = project(tmp_path, "services:\n" + vllm("a", "${U}"), line + "\n")
    code, out, _ = check(capsys, path, "--json")
    data = json.loads(out)
    assert code == 0 and data["verdicts"][0]["util"] == "0.03"


# --- issue 32 item 1: an env file's text never in a message -------------------------------------


@pytest.mark.usefixtures("_fixed")
def test_a_colon_line_is_read_as_compose_reads_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`HF_TOKEN: hf_…` was an error that printed the line whole; compose-go reads it as
    HF_TOKEN=hf_… ("yaml-style value declaration", TestParsing `OPTION_A: 1`)."""
    path = project(tmp_path, "services:\n" + vllm("a", "${U}"), f"HF_TOKEN: {SECRET}\nU: 0.03\n")
    for extra in ((), ("--json",)):
        code, out, err = check(capsys, path, *extra)
        assert code == 0 and SECRET not in out + err


BAD_LINES = [
    (f"HF TOKEN={SECRET}", "a variable name holds a space"),
    (f"{SECRET}@host=1", CHARACTER),
    (f'HF_TOKEN="{SECRET}', 'a value opened with " is never closed'),
    (f"HF_TOKEN=${{{SECRET}", "an invalid ${…} template (compose refuses it)"),
    (f"HF_TOKEN {SECRET}", "a variable name holds a space"),
]


@pytest.mark.usefixtures("_fixed")
@pytest.mark.parametrize(("line", "why"), BAD_LINES, ids=[why[:40] for _, why in BAD_LINES])
def test_a_bad_dotenv_line_is_named_never_shown(
    line: str, why: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = project(tmp_path, "services:\n" + vllm("a"), f"# keys\n{line}\nU=1\n")
    code, out, err = check(capsys, path)
    assert code == 2 and SECRET not in out + err
    assert err.strip().splitlines()[-1] == f"error: {tmp_path / '.env'}: line 2: {why}"
    code, out, err = check(capsys, path, "--json")
    assert code == 2 and SECRET not in out + err
    assert json.loads(out)["error"]["message"] == f"{tmp_path / '.env'}: line 2: {why}"


@pytest.mark.usefixtures("_fixed")
def test_an_include_env_file_is_never_shown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`include: [{path: …, env_file: /etc/shadow}]` printed the file's first line. A file of
    that shape is read as compose-go reads it (`root:…` is root=…); a line it cannot read is
    named by number."""
    shadow = tmp_path / "shadow"
    first = f"root:$6${SECRET}:20228:0:99999:7:::\n"
    shadow.write_text(first + "daemon:*:20228:0:99999:7:::\n", encoding="utf-8")
    (tmp_path / "gpu.yaml").write_text("services:\n" + vllm("a"), encoding="utf-8")
    path = tmp_path / "compose.yaml"
    path.write_text(f"include:\n  - path: gpu.yaml\n    env_file: {shadow}\n", encoding="utf-8")
    code, out, err = check(capsys, path, "--json")
    assert code == 0 and SECRET not in out + err
    shadow.write_text(first + f"+@{SECRET}::::::::\n", encoding="utf-8")
    for extra in ((), ("--json",)):
        code, out, err = check(capsys, path, *extra)
        assert code == 2 and SECRET not in out + err
        message = f"{path}: include.env_file: {shadow}: line 2: {CHARACTER}"
        assert message in (json.loads(out)["error"]["message"] if extra else err)


# --- issue 32 item 2: a service env_file that cannot be read ------------------------------------


def _missing(target: Path) -> None:
    del target  # never written


def _directory(target: Path) -> None:
    target.mkdir()


def _fifo(target: Path) -> None:
    os.mkfifo(target)


def _loop(target: Path) -> None:
    target.symlink_to(target)


def _write(data: bytes) -> Callable[[Path], None]:
    def write(target: Path) -> None:
        target.write_bytes(data)

    return write


def _unreadable(target: Path) -> None:
    target.write_text(f"HF_TOKEN={SECRET}\n", encoding="utf-8")
    target.chmod(0)


SECRET_BYTES = SECRET.encode()
BAD_FILES: list[tuple[str, Callable[[Path], None], str]] = [
    ("missing", _missing, "no such file"),
    ("directory", _directory, "is a directory, not an env file"),
    ("unreadable", _unreadable, "cannot be read: Permission denied"),
    ("fifo", _fifo, "is not a regular file (a FIFO, a socket or a device): not read"),
    ("symlink-loop", _loop, "cannot be read: Too many levels of symbolic links"),
    ("not-utf8", _write(b"A=1\nB=2\nTOKEN=" + SECRET_BYTES + b"\xff\xfe\n"), "line 3: not UTF-8 text"),
    ("nul", _write(b"A=1\nTOKEN=" + SECRET_BYTES + b"\0\n"),
     "line 2: holds a NUL byte, which no environment variable can hold"),
    ("too-big", _write(b"A=" + b"x" * MAX_ENV_FILE_BYTES + b"\n"),
     "the file is over 256 KiB; an env file is far smaller"),
    ("space-in-name", _write(b"A=1\nHF TOKEN=" + SECRET_BYTES + b"\n"),
     "line 2: a variable name holds a space"),
    ("bad-character", _write(b"A=1\n\n" + SECRET_BYTES + b"/x=1\n"), f"line 3: {CHARACTER}"),
    ("unterminated", _write(b"A=1\nHF_TOKEN='" + SECRET_BYTES + b"\nB=2\n"),
     "line 2: a value opened with ' is never closed"),
    ("required-unset", _write(b"A=${GPU:?set GPU}\n"), "line 1: variable GPU is not set: set GPU"),
]  # fmt: skip


@pytest.fixture
def _no_wait() -> Iterator[None]:
    """A read that blocks (a FIFO with no writer) fails the test instead of hanging it."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError("reading the env file blocked")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(10)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.usefixtures("_fixed", "_no_wait")
@pytest.mark.parametrize(("kind", "make", "why"), BAD_FILES, ids=[k for k, _, _ in BAD_FILES])
def test_a_service_env_file_that_cannot_be_read_is_exit_2_naming_it(
    kind: str,
    make: Callable[[Path], None],
    why: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 32: each ended in `KeyError: 'chat'`, a traceback and exit 1 (read as "refused").
    Now the service is an `error` naming the env file (and line), and the other is judged."""
    target = tmp_path / "chat.env"
    make(target)
    if kind == "unreadable" and os.geteuid() == 0:
        # Root reads a file of mode 000: the refusal the kernel gives others is made here.
        opened = os.open

        def refuse(path: Any, flags: int, *args: Any) -> int:
            if Path(path) == target:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return opened(path, flags, *args)

        monkeypatch.setattr(dotenv_module.os, "open", refuse)
    chat = vllm("chat", extra="    env_file: chat.env\n")
    path = project(tmp_path, "services:\n" + chat + vllm("other", "0.01"))
    message = f"{path}: service 'chat': env_file[0]: {target}: {why}"
    code, out, err = check(capsys, path)
    assert code == 2 and SECRET not in out + err
    assert err.count(message) == 1 and "Traceback" not in err
    assert "PASS  other (compose service other)" in out
    code, out, err = check(capsys, path, "--json")
    data = json.loads(out)
    assert code == 2 and SECRET not in out + err
    assert data["verdicts"][0] == {"verdict": "error", "service": "chat", "message": message}
    assert data["verdicts"][1]["verdict"] == "pass"


def test_a_service_env_file_of_dev_null_is_empty(tmp_path: Path) -> None:
    """`env_file: /dev/null` (a common placeholder) is read as compose reads it: empty."""
    path = project(tmp_path, "services:\n" + vllm("a", extra="    env_file: /dev/null\n"))
    assert load_compose(path, {}).services[0].name == "a"


def test_only_a_missing_env_file_may_be_left_out(tmp_path: Path) -> None:
    """compose-go loadEnvFile: `required: false` skips a missing file, not a directory."""
    optional = "    env_file: [{path: absent.env, required: false}]\n"
    path = project(tmp_path, "services:\n" + vllm("a", extra=optional))
    assert load_compose(path, {}).services[0].name == "a"
    (tmp_path / "absent.env").mkdir()
    loaded = load_compose(path, {})
    assert [str(e) for e in loaded.errors] == [
        f"{path}: service 'a': env_file[0]: {tmp_path / 'absent.env'}: "
        "is a directory, not an env file"
    ]


def test_service_env_files_are_interpolated_in_compose_go_order(tmp_path: Path) -> None:
    """types/project.go WithServicesEnvironmentResolved: a value is looked up in the project's
    environment, then the service's `environment:`, then the env files read before it."""
    (tmp_path / "a.env").write_text("FIRST=3\n", encoding="utf-8")
    (tmp_path / "b.env").write_text("CUDA_VISIBLE_DEVICES=${GPU},${FIRST}\n", encoding="utf-8")
    body = (
        "  a:\n    image: myorg/tts:1\n    environment: {GPU: '1'}\n"
        "    env_file: [a.env, b.env]\n"
        "    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all,"
        " capabilities: [gpu]}]}}}\n"
    )
    path = project(tmp_path, "services:\n" + body)
    assert load_compose(path, {}).services[0].visible == ("1", "3")
    assert load_compose(path, {"GPU": "2", "FIRST": "0"}).services[0].visible == ("2", "0")


@pytest.mark.usefixtures("_no_wait")
def test_the_project_dotenv_as_compose_reads_it(tmp_path: Path) -> None:
    """cli/options.go: `.env` that is a directory is not read (TestGetEnvFromFile: naming one is
    "is a directory"); a FIFO is refused at once, never waited on."""
    path = project(tmp_path, "services:\n" + vllm("a"))
    (tmp_path / ".env").mkdir()
    assert load_compose(path, {}).services[0].name == "a"
    (tmp_path / ".env").rmdir()
    os.mkfifo(tmp_path / ".env")
    with pytest.raises(ComposeError) as caught:
        load_compose(path, {})
    assert str(caught.value) == (
        f"{tmp_path / '.env'}: is not a regular file (a FIFO, a socket or a device): not read"
    )
