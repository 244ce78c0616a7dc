"""The masking rule over generated command lines (issue 24 item 6, DESIGN.md "Text from outside").

Each line mixes every spelling of a secret DESIGN.md names, each with a generated value, and the
words that only look like secrets. No generated value may survive in any output: the masked
text, the snapshot's JSON, the ledger's row, `ledger --json` and the `ledger` table. The look-alikes
must survive unmasked.
"""

from __future__ import annotations

import json
import sqlite3
import string
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inventory.secrets import mask_cmdline
from inventory.snapshot import Process
from placement.cli.main import main
from tests.placement.report.test_figures import SMALL_CATALOGUE, small_snapshots

# Every spelling of a secret, `{}` standing for its value.
SPELLINGS = (
    "--api-key {}",
    "--api-key={}",
    "--API-KEY {}",
    "--hf-token {}",
    "--hf_token={}",
    "--hfToken {}",
    "--apiKey={}",
    "--password {}",
    "-password {}",
    "--db-credentials {}",
    "--secret {}",
    "HF_TOKEN={}",
    "AWS_SECRET_ACCESS_KEY={}",
    "-e OPENAI_API_KEY={}",
    "--env=HF_TOKEN={}",
    "--env HF_TOKEN={}",
    "-eTOKEN={}",
    "-eHF_TOKEN={}",
    "redis://user:{}@redis:6379/0",
    "--broker=redis://:{}@redis:6379",
    "postgresql://app:{}@db/x",
    "user:{}@proxy:3128",
    "--proxy user:{}@proxy:3128",
    "HTTPS_PROXY=user:{}@proxy:3128",
    "-H 'Authorization: Bearer {}'",
    '-H "Authorization: Basic {}"',
    "Authorization: {}",
    "-u root -p {}",
    "-u root -p{}",
    "'--api-key' '{}'",
    "http://h/v1?token={}",
    # Issue 32 item 8: spellings beyond a name's last word, and other places a secret stands.
    "-H Authorization:Bearer {}",
    "Authorization:Bearer {}",
    "curl -u admin:{}",
    "--user=admin:{}",
    "PGPASSWORD={}",
    "MYSQL_PWD={}",
    "--api-keys {}",
    "--passphrase {}",
    "sshpass -p {}",
    "sshpass -p{}",
    "SECRET_KEY_BASE={}",
    "--private-key-b64 {}",
    "https://blob.example.net/c/b?sv=2024-01-01&sig={}",
    "http://h/x?sig={}&se=2030",
    """--config '{{"api_key": "{}"}}'""",
    '--config={{"max_tokens":8,"api_key":"{}"}}',
    '''--hf-overrides "{{\\"token\\": \\"{}\\"}}"''',
)
# A URL's userinfo holds no `/`, `?`, `#`, `:` or `@` unencoded (RFC 3986): a token as a user.
USER_SPELLINGS = ("https://{}@github.com/org/repo.git", "git clone https://{}@gitlab.com/a/b")
# Words that only look like secrets: kept as they are.
LOOK_ALIKES = (
    "--max-num-batched-tokens 8192",
    "--tokenizer hf-org/tok",
    "MAX_TOKENS=512",
    "--max-tokens 64",
    "--passthrough yes",
    "--enable-auto-tool-choice",
    # A secret word, but the name's last word is a count or a size (DESIGN.md's exception).
    "--key-size 2048",
    "--max-key-len 64",
    "SIGNATURE_BYTES=64",
    "--tokenizer-mode auto",
    "-u 1000:1000",
    "git@github.com:org/repo.git",
    '--config {"max_tokens": 8}',
)
# No plain word may match a seat of the small catalogue (`serve-a`, `serve-gone`): the foreign
# process would then be attributed to that seat, and shown without its masked line.
PLAIN = ("vllm serve org/model", "python -m server", "--port 8000", "--tp 2", "serve-z", "-m x")
# A value as a shell word holds: no blank, no quote, not a flag. It holds a letter and a digit
# so it cannot be mistaken for the words around it.
VALUE_CHARS = string.ascii_letters + string.digits + "/+._~!%^&*@:=,-#$"
values = st.text(VALUE_CHARS, min_size=8, max_size=24).filter(
    lambda v: not v.startswith("-") and any(c.isalpha() for c in v) and any(c.isdigit() for c in v)
)
USER_CHARS = string.ascii_letters + string.digits + "-._~!$&*+,;=%"
user_values = st.text(USER_CHARS, min_size=8, max_size=24).filter(
    lambda v: any(c.isalpha() for c in v) and any(c.isdigit() for c in v)
)
secret_words = st.one_of(
    st.tuples(st.sampled_from(SPELLINGS), values),
    st.tuples(st.sampled_from(USER_SPELLINGS), user_values),
).map(lambda t: (t[0].format(t[1]), t[1]))


@st.composite
def command_lines(draw: st.DrawFn) -> tuple[str, list[str], list[str]]:
    """(a command line, its secret values, the look-alikes it holds)."""
    secrets = draw(st.lists(secret_words, min_size=1, max_size=5))
    alikes = draw(st.lists(st.sampled_from(LOOK_ALIKES), max_size=3))
    plain = draw(st.lists(st.sampled_from(PLAIN), max_size=3))
    words = [word for word, _ in secrets] + alikes + plain
    order = draw(st.permutations(words))
    blanks = draw(
        st.lists(st.sampled_from([" ", "  ", "\t"]), min_size=len(order), max_size=len(order))
    )
    line = draw(st.sampled_from(PLAIN[:2])) + "".join(
        b + w for b, w in zip(blanks, order, strict=True)
    )
    return line, [value for _, value in secrets], alikes


def _no_value_in(text: str, secrets: list[str]) -> None:
    for value in secrets:
        assert value not in text


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(command_lines())
def test_no_generated_secret_survives_masking(case: tuple[str, list[str], list[str]]) -> None:
    line, secrets, alikes = case
    masked = mask_cmdline(line)
    _no_value_in(masked, secrets)
    for alike in alikes:
        assert alike in masked
    assert mask_cmdline(masked) == masked  # idempotent
    process = Process(pid=1, used_bytes=1, cmdline=line)
    _no_value_in(process.model_dump_json(), secrets)


@pytest.mark.slow
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(cases=st.lists(command_lines(), min_size=1, max_size=4))
def test_no_generated_secret_reaches_the_ledger_or_any_output(
    cases: list[tuple[str, list[str], list[str]]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    secrets = [value for _, values_, _ in cases for value in values_]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        catalogue = root / "small.yaml"
        catalogue.write_text(yaml.safe_dump(SMALL_CATALOGUE), encoding="utf-8")
        # A snapshot file written elsewhere, unmasked: the foreign process carries the lines.
        raw = json.loads(small_snapshots()[6].model_dump_json())
        foreign = next(p for card in raw["cards"] for p in card["processes"] if p["seat"] is None)
        foreign["cmdline"] = "  ".join(line for line, _, _ in cases)
        path = root / "s.json"
        path.write_text(json.dumps(raw), encoding="utf-8")
        ledger = root / "l.sqlite"
        capsys.readouterr()
        assert main(["snapshot", "--from", str(path), "--json", "--ledger", str(ledger)]) == 0
        shown = [
            "ledger",
            "--catalogue",
            str(catalogue),
            "--ledger",
            str(ledger),
            "--max-age",
            "1000d",
        ]
        assert main([*shown, "--json"]) == 0
        assert main(shown) == 0
        out = capsys.readouterr()
        with sqlite3.connect(ledger) as connection:
            rows = [r[0] for r in connection.execute("SELECT cmdline FROM processes")]
        assert any(row and "***" in row for row in rows)
        _no_value_in(out.out + out.err + "\n".join(r or "" for r in rows), secrets)
        assert out.out.count("***") >= 2  # shown, masked, by snapshot --json and ledger --json
