"""`learn` on a log of several start-ups (`docker compose logs` after a restart): the last complete
one, said with the line where it begins, its figures never mixed with another's; every real log
of each engine read whole (no 64 MiB cut), impossible figures refused, log lines shown escaped."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path

import pytest

from placement.cli import main as cli
from placement.cli.learn_log import start_up_note
from placement.fit.engines.base import LogFigure, last_start_up
from placement.fit.engines.registry import engine
from seats.names import escaped
from seats.units import GiB, MiB

DATA = Path(__file__).parent / "data"
VLLM = Path(__file__).resolve().parents[2] / "data" / "vllm-logs"
MISTRAL = VLLM / "v0.11.0-mistral-7b-gptq.log"
QWEN14 = VLLM / "v0.13.0-qwen2.5-14b-awq.log"
QWQ = DATA / "sglang" / "llms-in-clouds-0.4.3-qwq-32b-4xl4.log"
SGLANG_04 = DATA / "sglang" / "my-deepseek-r1-0.4-qwen-7b-3090.log"
ORIN = DATA / "llamacpp" / "orin-qwen3-0.6b-cpu.log"
A100 = DATA / "llamacpp" / "yuy4o-b7342-qwen3-coder-30b-a100.log"
# One whole real start-up of each engine (data/README.md).
WHOLE = {
    "vllm": MISTRAL,
    "sglang": SGLANG_04,
    "tgi": DATA / "tgi" / "chat-app-2.2.0-llama-3.1-8b-a10g.log",
    "trtllm": DATA / "trtllm" / "jeansblog-1.1.0rc3-gpt-oss-120b-spark.log",
    "llamacpp": A100,
    "ollama": DATA / "ollama" / "securetag-0.5.4-llama-3.1-8b-4090.log",
}


def body(path: Path) -> list[str]:
    """A stored log's lines without its `# source:` line, split at newlines only (as `learn`
    and `grep -n` count them)."""
    lines = path.read_bytes().decode("utf-8").split("\n")
    assert lines[0].startswith("# source: ")
    return lines[1:-1] if lines[-1] == "" else lines[1:]


def figures(learned: object) -> dict[str, tuple[int, int] | None]:
    """Each figure of a Learned as (value, line number)."""
    out: dict[str, tuple[int, int] | None] = {}
    for name in ("weights", "non_kv", "kv", "kv_tokens", "max_model_len", "per_token"):
        figure = getattr(learned, name)
        out[name] = None if figure is None else (figure.value, figure.line_no)
    return out


def begins_at(kind: str, lines: list[str]) -> int:
    """The index of a log's first line that opens a start-up of `kind` (its version or arguments)."""
    begins = engine(kind).start_up.begins
    return next(i for i, line in enumerate(lines) if any(p.search(line) for p in begins))


def read(kind: str, lines: list[str]) -> object:
    """What `learn` reads of a log: its last complete start-up, through the engine's reader."""
    start = last_start_up(lines, engine(kind).start_up)
    return engine(kind).learn(start.lines, start.first_line), start


CATALOGUE = """\
hosts:
  box: {cards: 1%s}
seats:
  - name: seat
    host: box
    gpus: [0]
    resident: 20 GiB
    state: running
    engine: {kind: %s}
"""


def learn(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    lines: list[str],
    *options: str,
    host: str = "",
) -> tuple[int, str, str]:
    """`gpuplan learn seat --log LOG OPTIONS` on `lines` written to a file: code, out, err."""
    log = tmp_path / "compose.log"
    log.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    catalogue = tmp_path / "catalogue.yaml"
    catalogue.write_text(CATALOGUE % (host, kind), encoding="utf-8")
    code = cli.main(["learn", "seat", "--log", str(log), *options, "--catalogue", str(catalogue)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- two start-ups -------------------------------------------------------------------------


def test_vllm_after_a_restart_with_another_model_gives_the_second_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The case: Mistral-7B GPTQ on vLLM 0.11 (29 lines), then the container restarted
    # with Qwen2.5-14B-AWQ on vLLM 0.13. Before, weights came from the first (3.88 GiB) and KV
    # and graphs from the second, max_model_len from the first (32,768 for the second's 8,192).
    first, second = body(MISTRAL), body(QWEN14)
    code, out, _ = learn(tmp_path, capsys, "vllm", first + second, "--json")
    alone, alone_out, _ = learn(tmp_path, capsys, "vllm", second, "--json")
    assert code == alone == 0
    got, want = json.loads(out), json.loads(alone_out)
    assert (
        got["profile"]
        == want["profile"]
        == {
            "weights_bytes": 10_071_161_438,
            "non_kv_bytes": None,
            "cuda_graphs_bytes": 1_267_015_352,
            "kv_bytes_per_token": 196_633,
            "max_model_len": 8192,
        }
    )
    # "Model loading took 9.3795 GiB", "took 1.18 GiB" of graphs, 10.39 GiB of KV for 56,736 tokens.
    assert int(Decimal("9.3795") * GiB) == 10_071_161_438
    assert int(Decimal("1.18") * GiB) == 1_267_015_352
    assert int(Decimal("10.39") * GiB) // 56_736 == 196_633
    # Every figure's line is the second start-up's, 29 lines further down than alone.
    for name, source in got["sources"].items():
        if source is not None:
            assert source["line"] == want["sources"][name]["line"] + 29 > 29, name
    # The second start-up begins at its "vLLM API server version 0.13.0", its 4th line.
    assert "vLLM API server version 0.13.0" in second[3]
    assert got["start_up"] == {"line": 33, "start_ups": 2, "complete": True, "lines_read": 68}
    assert got["notes"][0] == (
        "the log holds 2 start-ups of vLLM: read the last complete one, from line 33; no figure "
        "of another start-up is used"
    )
    code, text, _ = learn(tmp_path, capsys, "vllm", first + second)
    assert (
        "note: the log holds 2 start-ups of vLLM: read the last complete one, from line 33" in text
    )


@pytest.mark.parametrize(
    ("kind", "first", "second"),
    [
        ("vllm", MISTRAL, QWEN14),
        ("vllm", QWEN14, MISTRAL),
        ("sglang", QWQ, SGLANG_04),
        ("sglang", SGLANG_04, QWQ),
        ("llamacpp", ORIN, A100),
        ("llamacpp", A100, ORIN),
    ],
)
def test_two_models_one_after_the_other_give_the_seconds_figures(
    kind: str, first: Path, second: Path
) -> None:
    # Two real start-ups of different models: every figure is the second's, at its own line.
    before, after = body(first), body(second)
    learned, start = read(kind, before + after)
    alone, _ = read(kind, after)
    shifted = {
        name: None if found is None else (found[0], found[1] + len(before))
        for name, found in figures(alone).items()
    }
    assert figures(learned) == shifted
    assert figures(learned) != figures(read(kind, before)[0])
    at = len(before) + begins_at(kind, after) + 1
    assert (start.count, start.first_line, start.complete) == (2, at, True)


@pytest.mark.parametrize("kind", sorted(WHOLE))
def test_every_engine_reads_the_second_of_two_start_ups(kind: str) -> None:
    # A container restarted with the same seat: `docker compose logs` holds its start-up twice.
    # Every figure comes from the second copy (the first copy's lines are never read).
    once = body(WHOLE[kind])
    learned, start = read(kind, once + once)
    alone, _ = read(kind, once)
    assert (start.count, start.first_line) == (2, len(once) + begins_at(kind, once) + 1)
    for name, found in figures(alone).items():
        got = figures(learned)[name]
        assert got == (None if found is None else (found[0], found[1] + len(once))), name


@pytest.mark.parametrize("kind", sorted(WHOLE))
def test_a_later_start_up_that_never_came_up_is_left_aside(kind: str) -> None:
    # The restart's log stops before its first figure's start-up is done (still loading, or it
    # died): the last complete start-up is the first one, said with the line of the later one.
    once = body(WHOLE[kind])
    marks = engine(kind).start_up
    ready_at = next(i for i, line in enumerate(once) if any(p.search(line) for p in marks.ready))
    learned, start = read(kind, once + once[:ready_at])
    alone, _ = read(kind, once)
    assert figures(learned) == figures(alone)
    later = len(once) + begins_at(kind, once) + 1
    assert (start.count, start.first_line, start.later) == (2, 1, later)
    note = start_up_note(start, engine(kind).title)
    assert note is not None and f"the one from line {later} did not reach" in note


def test_lines_after_the_ready_line_are_not_kept() -> None:
    # A day of requests after the start-up costs no memory: only lines up to its ready line stay.
    once = body(MISTRAL)
    start = last_start_up(iter(once + ["INFO request"] * 10_000), engine("vllm").start_up)
    assert len(start.lines) <= len(once) and start.log_lines == len(once) + 10_000


# --- SGLang: per-token KV and 0.4.x ----------------------------------------------------------


def test_sglang_per_token_kv_is_at_least_the_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # QwQ-32B over 4 cards: 2 of its 8 KV heads a rank, 64 layers, head 128, bf16: K + V of one
    # token is 64 × 2 × 128 × 2 × 2 B = 65,536 B. "K size: 1.42 GB" (and V) is printed to 0.01:
    # K + V as printed ÷ 46,611 tokens is 65,422 B, under the model's; each size taken half a
    # hundredth up, (1.425 + 1.425) GiB = 3,060,164,198 B ÷ 46,611 = 65,653 B, at least it.
    learned, _ = read("sglang", body(QWQ))
    assert learned.kv_bytes_per_token == 3_060_164_198 // 46_611 == 65_653
    assert 2 * int(Decimal("1.42") * GiB) // 46_611 == 65_422 < 64 * 2 * 128 * 2 * 2 == 65_536
    # How it was worked out is data: the printed sizes, the half hundredth, tokens and lines.
    how = learned.per_token.how if learned.per_token is not None else None
    assert how is not None and dict(how.facts) == {
        "sizes": ("1.42", "1.42"),
        "up": "0.005",
        "tokens": 46_611,
        "lines": (52, 52),
    }
    code, out, _ = learn(tmp_path, capsys, "sglang", body(QWQ))
    assert code == 0 and "        kv_bytes_per_token: 65653\n" in out
    # One line prints K, V and the tokens: its number is said once.
    assert (
        "  kv_bytes_per_token: 65653 ((1.42 + 0.005 + 1.42 + 0.005) GiB ÷ 46,611 tokens, rounded "
        "down: at least the true figure (line 52))\n" in out
    )


def test_sglang_before_0_4_3_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # lmsysorg/sglang of February 2025 on one RTX 3090, DeepSeek-R1-Distill-Qwen-7B: no
    # "mem usage" and no "#tokens" in its lines. Weights: avail mem 22.76 GB before the load,
    # 8.37 GB after. Its pool: max_total_num_tokens=105531, K and V 2.82 GB each; the model's
    # token is 28 layers × 4 KV heads × 128 × 2 (K, V) × 2 B = 57,344 B, and (105,531 + 1) ×
    # 28,672 B = 3,025,813,504 B = 2.818 GiB, printed 2.82.
    learned, start = read("sglang", body(SGLANG_04))
    assert learned.weights is not None
    assert learned.weights.value == int(Decimal("22.76") * GiB) - int(Decimal("8.37") * GiB)
    assert learned.weights.value == 15_451_144_848
    assert learned.kv is not None and learned.kv.value == 2 * int(Decimal("2.82") * GiB)
    assert learned.kv_tokens is not None and learned.kv_tokens.value == 105_531
    assert round(105_532 * 28_672 / GiB, 2) == 2.82
    # (2.825 + 2.825) GiB = 6,066,571,673 B ÷ 105,531 tokens = 57,486 B: at least 57,344.
    assert learned.kv_bytes_per_token == int(Decimal("5.65") * GiB) // 105_531 == 57_486
    assert learned.max_model_len is not None and learned.max_model_len.value == 131_072
    assert learned.missing == ()
    assert (start.count, start.complete) == (1, True)
    # Through the command, and with the model's own config the per-token figure is its own.
    code, out, _ = learn(tmp_path, capsys, "sglang", body(SGLANG_04), "--json")
    assert code == 0
    assert json.loads(out)["profile"] == {
        "weights_bytes": 15_451_144_848,
        "non_kv_bytes": None,
        "kv_bytes_per_token": 57_486,
        "max_model_len": 131_072,
    }
    model = tmp_path / "model"
    model.mkdir()
    # DeepSeek-R1-Distill-Qwen-7B's config.json (huggingface.co/deepseek-ai/
    # DeepSeek-R1-Distill-Qwen-7B), the fields the per-token arithmetic reads.
    (model / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Qwen2ForCausalLM"],
                "hidden_size": 3584,
                "num_attention_heads": 28,
                "num_hidden_layers": 28,
                "num_key_value_heads": 4,
                "max_position_embeddings": 131072,
                "torch_dtype": "bfloat16",
            }
        ),
        encoding="utf-8",
    )
    code, out, _ = learn(
        tmp_path, capsys, "sglang", body(SGLANG_04), "--config", str(model), "--json"
    )
    data = json.loads(out)
    assert code == 0
    assert data["profile"]["kv_bytes_per_token"] == 28 * 4 * 128 * 2 * 2 == 57_344
    assert data["profile"]["weights_bytes"] == 15_451_144_848
    assert data["sources"]["kv_bytes_per_token"]["line"] is None


# --- impossible figures ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("printed", "why"),
    [
        ("-3.8844", "weights is -4,170,842,742 B, below zero"),
        ("100000000000000000000", "weights is 107,374,182,400,000,000,000,000,000,000 B"),
    ],
)
def test_an_impossible_vllm_weights_line_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], printed: str, why: str
) -> None:
    lines = [
        line.replace("Model loading took 3.8844 GiB", f"Model loading took {printed} GiB")
        for line in body(MISTRAL)
    ]
    assert lines != body(MISTRAL)
    code, out, err = learn(tmp_path, capsys, "vllm", lines)
    assert (code, out) == (2, "")
    assert f"line 17: {why}" in err and "is this the seat's own log?" in err
    assert "-" in printed or "past any card (1.00 TiB)" in err
    assert "Traceback" not in err


def test_a_figure_past_the_hosts_card_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The 0.11 log's KV cache is 102.56 GiB (a 128 GB GB10): not the log of a seat on an 80 GiB card.
    code, _, err = learn(tmp_path, capsys, "vllm", body(MISTRAL), host=", card_total: 80 GiB")
    assert code == 2
    assert (
        "line 23: KV cache is 110,122,961,469 B (102.56 GiB), past the host's card_total "
        "(80.00 GiB)" in err
    )


def test_an_impossible_figure_of_any_engine_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [line.replace("K size: 2.82 GB", "K size: 2000.82 GB") for line in body(SGLANG_04)]
    code, _, err = learn(tmp_path, capsys, "sglang", lines)
    assert code == 2
    assert "line 14: KV cache is " in err and "past any card (1.00 TiB)" in err
    assert "no SGLang start-up prints that" in err


# --- text from outside ---------------------------------------------------------------------------


def test_log_lines_are_shown_with_control_characters_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A line may carry an escape sequence that erases the terminal's line, a NUL, a right-to-left
    # override or a carriage return: shown escaped, never obeyed.
    hostile = " \x1b[2K\x00\u202eKO\rPASS  fake"
    lines = [line + hostile if "CUDA0 compute buffer size" in line else line for line in body(ORIN)]
    for options in ((), ("--json",)):
        code, out, _ = learn(tmp_path, capsys, "llamacpp", lines, *options)
        assert code == 0
        assert not any(char in out for char in "\x1b\x00\u202e\r")
        shown = escaped(hostile.strip())
        assert shown in (out if not options else json.loads(out)["sources"]["non_kv"]["source"])


def test_vllm_colour_codes_are_dropped_from_shown_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = learn(tmp_path, capsys, "vllm", body(QWEN14))
    assert code == 0 and "\x1b" not in out
    assert (
        "  weights: line 26: (EngineCore_DP0 pid=1214979) INFO 01-01 21:29:35 "
        "[gpu_model_runner.py:3659] Model loading took 9.3795 GiB memory" in out
    )


@pytest.mark.slow
def test_a_log_past_64_mib_is_read_to_its_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, only the first 64 MiB were read, without a word: a start-up after them was "no
    # start-up line". 65 lines of 1 MiB of requests, then the start-up.
    filler = ["INFO request " + "x" * (MiB - 14)] * 65
    code, out, err = learn(tmp_path, capsys, "sglang", filler + body(SGLANG_04), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["start_up"] == {"line": 1, "start_ups": 1, "complete": True, "lines_read": 99}
    assert data["sources"]["kv"]["line"] == 65 + 14
    assert data["profile"]["kv_bytes_per_token"] == 57_486


def test_figures_keep_their_line_in_the_whole_log() -> None:
    # The reader numbers a start-up's lines from where it begins in the log.
    learned = engine("llamacpp").learn(body(ORIN), 101)
    alone = engine("llamacpp").learn(body(ORIN))
    assert learned.non_kv is not None and alone.non_kv is not None
    assert learned.non_kv.line_no == alone.non_kv.line_no + 100
    assert isinstance(learned.non_kv, LogFigure)


def test_stdin_is_read_as_bytes_line_by_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `docker compose logs | gpuplan learn SEAT --log -`: two start-ups on stdin, with a byte that
    # is not UTF-8 (replaced, never a traceback).
    text = "\n".join([*body(MISTRAL), "\udcff", *body(QWEN14)]) + "\n"
    data = text.encode("utf-8", errors="surrogateescape")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    catalogue = tmp_path / "catalogue.yaml"
    catalogue.write_text(CATALOGUE % ("", "vllm"), encoding="utf-8")
    code = cli.main(["learn", "seat", "--log", "-", "--json", "--catalogue", str(catalogue)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["start_up"] == {"line": 34, "start_ups": 2, "complete": True, "lines_read": 69}
    assert out["profile"]["weights_bytes"] == 10_071_161_438


REAL = [
    *((kind, path) for kind, path in WHOLE.items()),
    *(("vllm", path) for path in sorted(VLLM.glob("*.log"))),
    *(
        (kind, path)
        for kind in ("sglang", "tgi", "trtllm", "llamacpp", "ollama")
        for path in sorted((DATA / kind).glob("*.log"))
    ),
]


@pytest.mark.parametrize(("kind", "path"), REAL, ids=lambda value: getattr(value, "name", value))
def test_a_log_of_one_start_up_gives_what_the_whole_log_gives(kind: str, path: Path) -> None:
    # Every real log kept here, read as its last complete start-up, gives exactly the figures its
    # engine's reader finds in the whole file: nothing it needs lies after its ready line.
    lines = path.read_bytes().decode("utf-8").split("\n")
    start = last_start_up(lines, engine(kind).start_up)
    whole = engine(kind).learn(lines)
    assert figures(engine(kind).learn(start.lines, start.first_line)) == figures(whole)
    assert {figure.name: figure.value for figure in whole.extra} == {
        figure.name: figure.value
        for figure in engine(kind).learn(start.lines, start.first_line).extra
    }


@pytest.mark.parametrize("kind", sorted(WHOLE))
def test_a_timestamp_before_each_line_still_shows_where_a_start_up_begins(kind: str) -> None:
    # Docker Desktop's log view puts its own time before each line (the SGLang 0.4 log here has
    # it): the second start-up is still found.
    once = [f"2025-02-04 21:29:17 {line}" for line in body(WHOLE[kind])]
    learned, start = read(kind, once + once)
    assert (start.count, start.first_line) == (2, len(once) + begins_at(kind, once) + 1)
    assert figures(learned) == {
        name: None if found is None else (found[0], found[1] + len(once))
        for name, found in figures(read(kind, once)[0]).items()
    }


def test_a_vllm_log_with_the_models_config_takes_its_per_token_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Mistral-7B's config (32 layers, 8 KV heads of 128, bf16): 2 × 32 × 8 × 128 × 2 = 131,072 B;
    # the 0.11 log alone gives 131,073 (102.56 GiB printed to 0.01 over 840,160 tokens).
    config = Path(__file__).resolve().parents[2] / "data" / "hf-configs" / "mistral-7b-v0.3"
    code, out, _ = learn(tmp_path, capsys, "vllm", body(MISTRAL), "--json")
    assert code == 0 and json.loads(out)["profile"]["kv_bytes_per_token"] == 131_073
    code, out, _ = learn(tmp_path, capsys, "vllm", body(MISTRAL), "--config", str(config), "--json")
    data = json.loads(out)
    assert code == 0
    assert data["profile"]["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2 == 131_072
    assert data["profile"]["weights_bytes"] == int(Decimal("3.8844") * GiB)
    assert data["sources"]["kv_bytes_per_token"]["precision"] == "from the model's config"
    assert data["sources"]["kv_bytes_per_token"]["line"] is None


def test_learn_without_a_log_or_a_config_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogue = tmp_path / "catalogue.yaml"
    catalogue.write_text(CATALOGUE % ("", "sglang"), encoding="utf-8")
    code = cli.main(["learn", "seat", "--catalogue", str(catalogue)])
    err = capsys.readouterr().err
    assert code == 2
    assert "learn needs --log FILE (or --vllm-log FILE), --config DIR, or both" in err
