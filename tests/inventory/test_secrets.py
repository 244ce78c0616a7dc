"""Secrets masked at the edge: the rules of DESIGN.md "Text from outside", word by word."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from inventory.ledger.store import MIGRATIONS, open_ledger
from inventory.secrets import mask_cmdline
from inventory.snapshot import Process

CASES = [
    # vLLM's own flag, both spellings, and any case.
    ("vllm serve m --api-key sk-123 --port 8000", "vllm serve m --api-key *** --port 8000"),
    ("vllm serve m --api-key=sk-123", "vllm serve m --api-key=***"),
    ("vllm serve m --API-KEY sk-123", "vllm serve m --API-KEY ***"),
    ("server --hf-token hf_abc --hf_token=hf_def", "server --hf-token *** --hf_token=***"),
    ("x --token t --password p --passwd q --pass r", "x --token *** --password *** --passwd *** --pass ***"),
    ("x --auth a --db-credentials c --secret s", "x --auth *** --db-credentials *** --secret ***"),
    # Words that only look like secrets stay.
    ("vllm serve m --max-num-batched-tokens 8192 --tokenizer t", None),
    ("vllm serve m --enable-auto-tool-choice --passthrough x", None),
    ("MAX_TOKENS=512 python run.py", None),
    # NAME=value words.
    ("HF_TOKEN=hf_abc python run.py", "HF_TOKEN=*** python run.py"),
    ("env AWS_SECRET_ACCESS_KEY=abc/def OPENAI_API_KEY=sk x", "env AWS_SECRET_ACCESS_KEY=*** OPENAI_API_KEY=*** x"),
    # Passwords in URLs.
    ("worker --broker redis://user:hunter2@redis:6379/0", "worker --broker redis://user:***@redis:6379/0"),
    ("psql postgresql://app:p%40ss@db/x", "psql postgresql://app:***@db/x"),
    # Inside a shell string, quotes kept.
    ('bash -c "vllm serve m --api-key \'abc\' --port 1"', 'bash -c "vllm serve m --api-key \'***\' --port 1"'),
    # The spellings of issue 24: a NAME=value anywhere in a word, camelCase names, URLs with
    # an empty user, without a scheme or with a `/` in the password, headers, mysql's -u/-p.
    ("docker run --env=HF_TOKEN=hf_abc img", "docker run --env=HF_TOKEN=*** img"),
    ("docker run -eTOKEN=t0k img", "docker run -eTOKEN=*** img"),
    ("worker --broker redis://:PW1@redis:6379/0", "worker --broker redis://:***@redis:6379/0"),
    ("worker --broker redis://u:pa/ss@redis/0", "worker --broker redis://u:***@redis/0"),
    ("worker redis://u:p@ss@redis/0", "worker redis://u:***@redis/0"),
    ("x --proxy user:PW2@proxy:3128", "x --proxy user:***@proxy:3128"),
    ("x HTTPS_PROXY=user:PW3@proxy:3128", "x HTTPS_PROXY=user:***@proxy:3128"),
    ("node srv.js --hfToken hf_abc --apiKey=k", "node srv.js --hfToken *** --apiKey=***"),
    ("curl -H 'Authorization: Bearer tok' http://x", "curl -H 'Authorization: Bearer ***' http://x"),
    ('curl -H "X-Api-Key: k1" http://x/?token=k2', 'curl -H "X-Api-Key: ***" http://x/?token=***'),
    ("mysql -u root -p pw1 db", "mysql -u root -p *** db"),
    ("mysql -uroot -ppw2 db", "mysql -uroot -p*** db"),
    # A run-in password that spells a secret word is still mysql's password (found by the fuzz
    # test's generator: `-pwd000000` was read as a flag named `pwd000000`).
    ("vllm serve m -u root -pwd000000 --port 8000", "vllm serve m -u root -p*** --port 8000"),
    ("mysql -u root -pSECRET db", "mysql -u root -p*** db"),
    ("mysql -u root -password pw3 db", "mysql -u root -p*** *** db"),
    ("x '--api-key' 'k3'", "x '--api-key' '***'"),
    # ... and what only looks like them stays.
    ("python -m http.server -p 8000", None),
    ("docker run nginx:1.25@sha256:ab12 --tokenizer-mode auto", None),
    ("git clone git@github.com:org/repo.git", None),
    # A secret flag at the end, or followed by another flag, leaves nothing behind.
    ("vllm serve m --api-key", None),
    ("vllm serve m --api-key --port 8000", None),
    # Issue 32 item 8: each spelling that leaked, as the attack wrote it.
    ("curl -H Authorization:Bearer tok1 http://x", "curl -H Authorization:Bearer *** http://x"),
    ("curl -H 'Authorization:Bearer tok2' http://x", "curl -H 'Authorization:Bearer ***' http://x"),
    ("curl -H X-Api-Key:k4 http://x", "curl -H X-Api-Key:*** http://x"),
    ("curl -u admin:pw5 http://x", "curl -u admin:*** http://x"),
    ("curl --user admin:pw6 -uroot:pw7 http://x", "curl --user admin:*** -uroot:*** http://x"),
    ("git clone https://ghp_tok8@github.com/o/r.git", "git clone https://***@github.com/o/r.git"),
    ("PGPASSWORD=pw9 psql -h db", "PGPASSWORD=*** psql -h db"),
    ("env MYSQL_PWD=pw10 mysql", "env MYSQL_PWD=*** mysql"),
    ("srv --api-keys k11,k12", "srv --api-keys ***"),
    ("gpg --passphrase pp13 -d f", "gpg --passphrase *** -d f"),
    ("sshpass -p pw14 ssh u@h", "sshpass -p *** ssh u@h"),
    ("/usr/bin/sshpass -ppw15 rsync a u@h:b", "/usr/bin/sshpass -p*** rsync a u@h:b"),
    ("SECRET_KEY_BASE=skb16 rails s", "SECRET_KEY_BASE=*** rails s"),
    ("node s.js --private-key-b64 QUJD17", "node s.js --private-key-b64 ***"),
    ("curl 'https://a.blob.core.windows.net/c/b?sv=2024&sig=s18%3D'", "curl 'https://a.blob.core.windows.net/c/b?sv=2024&sig=***'"),
    ("""srv --config '{"api_key": "k19", "max_tokens": 8}'""", """srv --config '{"api_key": "***", "max_tokens": 8}'"""),
    ("""srv --config={"apiKey":"k20"}""", """srv --config={"apiKey":"***"}"""),
    ('bash -c "srv --o \'{\\"token\\": \\"k21\\"}\'"', 'bash -c "srv --o \'{\\"token\\": \\"***\\"}\'"'),
    ("srv --o \"{'secret': 'k22', 'pin': 1234}\"", "srv --o \"{'secret': '***', 'pin': 1234}\""),
    ("""srv --o {"password":12345}""", """srv --o {"password":***}"""),
    # ... while counts and sizes, look-alike words and numeric ids stay.
    ("vllm serve m --max-num-batched-tokens 8192 --tokenizer t --key-size 2048", None),
    ("MAX_TOKENS=512 SIGNATURE_BYTES=64 MAX_KEY_LEN=32 python run.py", None),
    ("docker run -u 1000:1000 img", None),
    ("srv --passwordless --keyboard us --monkey 3", None),
    ("""srv --config '{"max_tokens": 8, "tokenizer": "t"}'""", None),
    ("docker pull docker://nginx@sha256:ab12", None),
]  # fmt: skip


@pytest.mark.parametrize(("line", "masked"), CASES)
def test_masks_what_the_design_names_and_nothing_else(line: str, masked: str | None) -> None:
    expected = line if masked is None else masked
    assert mask_cmdline(line) == expected
    assert mask_cmdline(expected) == expected  # idempotent


def test_every_process_is_masked_on_construction() -> None:
    process = Process(pid=1, cmdline="vllm serve m --api-key sk-live-123")
    assert process.cmdline == "vllm serve m --api-key ***"
    assert "sk-live" not in process.model_dump_json()


def test_a_version_3_ledger_is_masked_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as connection:
        for step in MIGRATIONS[:3]:
            assert isinstance(step, str)
            connection.executescript(step)
        connection.execute("PRAGMA user_version = 3")
        connection.execute(
            "INSERT INTO snapshots(id, host, taken_at_s, taken_at) VALUES (1, 'h', 0, '1970-01-01T00:00:00Z')"
        )
        connection.executemany(
            "INSERT INTO processes(snapshot_id, card_idx, pid, used_bytes, cmdline) VALUES (1, 0, ?, 1, ?)",
            [(1, "vllm serve m --api-key sk-old"), (2, "python notebook.py"), (3, None)],
        )
    with open_ledger(path):
        pass
    with sqlite3.connect(path) as connection:
        lines = [r[0] for r in connection.execute("SELECT cmdline FROM processes ORDER BY pid")]
    assert lines == ["vllm serve m --api-key ***", "python notebook.py", None]
    assert "masked secrets in 1 stored command line(s) of 2" in capsys.readouterr().err


def test_a_ledger_masked_by_an_older_rule_is_masked_again_by_its_next_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "l.sqlite"
    with open_ledger(path):
        pass
    # What a writer with the first rule stored: these spellings went through it unmasked.
    lines = ["docker run --env=HF_TOKEN=hf_old img", "node s.js --hfToken hf_old2", "python a.py"]
    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM meta WHERE key = 'masking'")
        connection.execute(
            "INSERT INTO snapshots(id, host, taken_at_s, taken_at) VALUES (1, 'h', 0, '1970-01-01T00:00:00Z')"
        )
        connection.executemany(
            "INSERT INTO processes(snapshot_id, card_idx, pid, used_bytes, cmdline) VALUES (1, 0, ?, 1, ?)",
            list(enumerate(lines)),
        )
    capsys.readouterr()
    with open_ledger(path):
        pass
    with sqlite3.connect(path) as connection:
        stored = [r[0] for r in connection.execute("SELECT cmdline FROM processes ORDER BY pid")]
    assert stored == ["docker run --env=HF_TOKEN=*** img", "node s.js --hfToken ***", "python a.py"]
    assert "masked secrets in 2 stored command line(s) of 3" in capsys.readouterr().err
    with open_ledger(path):  # masked once: the next writer has nothing to do
        pass
    assert capsys.readouterr().err == ""


def test_a_compose_command_is_matched_masked_as_its_process_is(tmp_path: Path) -> None:
    from inventory.attribution import match_seat
    from placement.check.compose.load import load_compose
    from seats.model import Seat

    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  voices:\n    image: vllm/vllm-openai:v0.11.0\n"
        "    command: [--model, m, --api-key, sk-live-9f2, --port, '8027']\n"
        "    environment: [CUDA_VISIBLE_DEVICES=0]\n",
        encoding="utf-8",
    )
    (service,) = load_compose(compose, {}).services
    process = Process(pid=1, cmdline="vllm serve m --api-key sk-live-9f2 --port 8027")
    assert "sk-live" not in service.cmdline and "--api-key ***" in service.cmdline
    by_port = Seat(name="voices", resident="1 GiB", match="--port 8027")
    by_secret = Seat(name="leaky", resident="1 GiB", match="sk-live-9f2")
    for line in (service.cmdline, process.cmdline):
        assert match_seat(line, [by_secret, by_port]) == "voices"  # one answer for both


def test_a_rule_change_masks_the_stored_ancestors_lines_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 32 item 8: the re-mask covered `cmdline` and never `parents` (240,000 of 240,000
    # rows left). A ledger that an older rule masked, holding a process title whose ancestors'
    # lines carry the spellings that rule let through.
    path = tmp_path / "l.sqlite"
    with open_ledger(path):
        pass
    parents = [
        '["vllm serve m --api-keys k1,k2 --port 8000", "sshpass -p pw3 ssh u@h"]',
        '["PGPASSWORD=pw4 python run.py"]',
        '["python -m server --port 8001"]',
        "not json PGPASSWORD=pw5",  # a damaged row is masked as text, never a traceback
        None,
    ]
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE meta SET value = '2' WHERE key = 'masking'")
        connection.execute(
            "INSERT INTO snapshots(id, host, taken_at_s, taken_at) VALUES (1, 'h', 0, '1970-01-01T00:00:00Z')"
        )
        connection.executemany(
            "INSERT INTO processes(snapshot_id, card_idx, pid, used_bytes, cmdline, parents)"
            " VALUES (1, 0, ?, 1, ?, ?)",
            [
                (0, "VLLM::EngineCore", parents[0]),
                (1, "curl -u admin:pw6 http://x", parents[1]),
                (2, "python worker.py", parents[2]),
                (3, "python a.py", parents[3]),
                (4, None, parents[4]),
            ],
        )
    capsys.readouterr()
    with open_ledger(path):
        pass
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT cmdline, parents FROM processes ORDER BY pid").fetchall()
    assert rows == [
        (
            "VLLM::EngineCore",
            '["vllm serve m --api-keys *** --port 8000", "sshpass -p *** ssh u@h"]',
        ),
        ("curl -u admin:*** http://x", '["PGPASSWORD=*** python run.py"]'),
        ("python worker.py", parents[2]),
        ("python a.py", "not json PGPASSWORD=***"),
        (None, None),
    ]
    assert capsys.readouterr().err == (
        f"ledger {path}: masking rule 4: masked secrets in 1 stored command line(s) of 4"
        " and in the ancestors' lines of 3 process(es) of 4\n"
    )
    with open_ledger(path):  # masked once: the next writer has nothing to do
        pass
    assert capsys.readouterr().err == ""
