"""`gpuplan init`: a starter catalogue that plan, check and ledger take unchanged, and that
attributes every process of the host it was written from.

Run on every snapshot JSON in the repository, and on a fake NVML host (behind `NvmlSource`)
for each engine kind, with command lines taken from the real compose files the engine tests keep.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

import inventory.poller
from inventory.fake import FakeNvml, h200_idle_card
from inventory.nvml import RawProcess
from inventory.snapshot import SnapshotError, load_snapshot, save_snapshot
from placement.cli.main import main
from placement.cli.starter import anchored_match, base_name, comment_text, scalar
from placement.fit.engines.registry import KINDS, engine, recognise
from seats.loader import load_catalogue
from seats.model import match_pattern
from tests.placement.fit.engines.test_recognise import services

ROOT = Path(__file__).resolve().parents[3]
MIB = 2**20
GIB = 2**30
NOW = datetime(2026, 12, 4, 0, 0, tzinfo=UTC)


def repository_snapshots() -> list[Path]:
    """Every snapshot JSON the repository holds (seats/, docs/, tests/, examples/ …)."""
    found = set()
    for path in ROOT.rglob("*.json"):
        if any(part.startswith(".") or part in {"out", "node_modules"} for part in path.parts):
            continue
        if (
            path.name.endswith(".snapshot.json")
            or '"taken_at"' in path.read_text(errors="replace")[:4096]
        ) and _reads_as_snapshot(path):
            found.add(path)
    return sorted(found)


def _reads_as_snapshot(path: Path) -> bool:
    """A snapshot JSON, not another file that carries a `taken_at` (a report's golden JSON)."""
    try:
        load_snapshot(path)
    except SnapshotError:
        return False
    return True


SNAPSHOTS = repository_snapshots()


def test_the_repository_has_snapshots_to_loop_over() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in SNAPSHOTS}
    assert "seats/catalogue/fv-ml1.snapshot.json" in names
    assert len(names) >= 4


def init_from(snapshot: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["init", "--from", str(snapshot), "--out", str(out)]) == 0
    capsys.readouterr()
    return out.read_text()


def assert_attributes_every_process(
    catalogue_path: Path, snapshot_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ledger: each process its own seat's alone; 0 B unexplained where used is all processes'."""
    catalogue = load_catalogue(catalogue_path)
    snapshot = load_snapshot(snapshot_path)
    seats = {seat.name: seat for seat in catalogue.seats}
    for card in snapshot.cards:
        for process in card.processes:
            if process.cmdline is None:
                continue
            owners = [
                s.name
                for s in seats.values()
                if s.match and match_pattern(s.match).search(process.cmdline)
            ]
            assert len(owners) == 1, (process.pid, owners)
            assert card.index in seats[owners[0]].pinned_cards  # type: ignore[operator]
    source = ["--catalogue", str(catalogue_path), "--snapshot", str(snapshot_path)]
    assert main(["ledger", *source, "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    (host,) = view["hosts"]
    by_index = {c.index: c for c in snapshot.cards}
    for row in host["cards"]:
        card = by_index[row["index"]]
        if not card.ok:
            continue
        processes_bytes = sum(p.used_bytes or 0 for p in card.processes)
        if all(p.cmdline is not None for p in card.processes):
            assert row["attributed_bytes"] == processes_bytes
        if processes_bytes == card.used_bytes and all(p.cmdline for p in card.processes):
            assert row["unexplained_bytes"] == 0, row
    assert {s["status"] for s in host["seats"]} <= {"present"}


@pytest.mark.parametrize("snapshot", SNAPSHOTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_init_on_every_repository_snapshot_is_planned_checked_and_attributed(
    snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "host.yaml"
    init_from(snapshot, out, capsys)
    catalogue = load_catalogue(out)
    taken = load_snapshot(snapshot)
    (host,) = catalogue.hosts.values()
    assert host.cards == len(taken.cards)
    processes = [p for c in taken.cards if c.ok for p in c.processes]
    assert len(catalogue.seats) == len({p.cmdline or p.pid for p in processes})
    for seat in catalogue.seats:
        assert seat.state == "running" and seat.resident_bytes % MIB == 0
        mine = [
            p
            for c in taken.cards
            for p in c.processes
            if p.cmdline and seat.match and re.search(seat.match, p.cmdline)
        ]
        assert (
            mine
            and seat.resident_bytes - MIB
            < max(p.used_bytes or 0 for p in mine)
            <= seat.resident_bytes
        )
        assert seat.match is not None and seat.match.startswith("^")
    assert_attributes_every_process(out, snapshot, capsys)
    source = ["--catalogue", str(out), "--snapshot", str(snapshot)]
    assert main(["plan", *source]) == 0
    capsys.readouterr()
    for seat in catalogue.seats:
        cards = ",".join(str(c) for c in seat.pinned_cards or ())
        # A redeploy of what runs: judged (pass or refuse), never bad input.
        assert main(["check", seat.name, "--gpu", cards, *source, "--json"]) in (0, 1)
        assert json.loads(capsys.readouterr().out)["seat"] == seat.name


# --- a fake NVML host of each engine kind ------------------------------------------------

# One real compose service per engine (tests/placement/fit/engines/data/README.md gives their
# sources). On a host, /proc shows the image's entrypoint before the compose command.
ENGINE_SERVICES = {
    "sglang": ("sglang/compose-doc-arag.yml", "sglang-llm"),
    "tgi": ("tgi/compose-harbor-tgi.yml", "tgi"),
    "trtllm": ("trtllm/compose-slm-exploration.yml", "llm"),
    "ollama": ("ollama/compose-harbor-ollama.yml", "ollama"),
    "llamacpp": ("llamacpp/compose-digital-souls-core.yml", "llama"),
}
VLLM_CMDLINE = (
    "python3 -m vllm.entrypoints.openai.api_server --model voices-base --port 8027 "
    "--gpu-memory-utilization 0.11 --kv-cache-memory 2G"
)
OTHER_CMDLINE = "python3 /app/parakeet_server.py --port 8090"


def cmdline_of(kind: str) -> str:
    if kind == "vllm":
        return VLLM_CMDLINE
    if kind == "other":
        return OTHER_CMDLINE
    name, service = ENGINE_SERVICES[kind]
    argv, _, _ = services(name)[service]
    if recognise(argv) is None:
        argv = engine(kind).commands[0].split() + argv
    return " ".join(argv)


def engine_host(kind: str) -> FakeNvml:
    """Two H200s: the engine on card 0 twice (two ports, or one copy), a helper on card 1."""
    line = cmdline_of(kind)
    second = line + " --port 9999"
    cards = [
        h200_idle_card(0, (RawProcess(101, 20 * GIB + 518 * MIB), RawProcess(102, 9 * GIB + 1))),
        h200_idle_card(1, (RawProcess(201, 518 * MIB),)),
    ]
    cmdlines: dict[int, str | None] = {101: line, 102: second, 201: OTHER_CMDLINE + " --worker"}
    return FakeNvml(cards, cmdlines=cmdlines)


@contextlib.contextmanager
def _serving(fake: FakeNvml) -> Iterator[FakeNvml]:
    yield fake


@pytest.mark.parametrize("kind", KINDS)
def test_init_live_on_a_fake_host_of_each_engine(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = engine_host(kind)
    monkeypatch.setattr(inventory.poller, "open_source", lambda: _serving(fake))
    out = tmp_path / "host.yaml"
    assert (
        main(["init", "--live", "--host", f"box-{kind}", "--out", str(out), "--no-calibrate"]) == 0
    )
    assert "3 running seat(s)" in capsys.readouterr().err  # three command lines: three seats
    catalogue = load_catalogue(out)
    assert catalogue.hosts[f"box-{kind}"].card_total_bytes == fake.cards[0].total_bytes
    kinds = sorted(seat.engine.kind for seat in catalogue.seats)
    assert kinds == sorted([kind, kind, "other"])
    engine_seats = [s for s in catalogue.seats if s.pinned_cards == (0,)]
    assert {s.resident_bytes for s in engine_seats} == {20 * GIB + 518 * MIB, 9 * GIB + MIB}
    assert len({s.name for s in catalogue.seats}) == 3
    if kind != "other":  # the engine's own flags, as its recogniser reads them
        argv = cmdline_of(kind).split()
        flags = engine(kind).read_flags(argv)
        dumped = engine_seats[0].engine.model_dump(by_alias=True, exclude_none=True)
        for key, value in flags.items():
            assert dumped[key] == value
    snapshot = tmp_path / "host.snapshot.json"
    save_snapshot(inventory.poller.take_snapshot(fake, NOW, f"box-{kind}"), snapshot)
    assert_attributes_every_process(out, snapshot, capsys)
    assert main(["plan", "--catalogue", str(out), "--snapshot", str(snapshot)]) == 0


def test_vllm_flags_become_its_engine_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = init_from(ROOT / "seats/catalogue/fv-ml1.snapshot.json", tmp_path / "c.yaml", capsys)
    seat = load_catalogue(tmp_path / "c.yaml").seat("voices-base")
    assert seat.engine.kind == "vllm"
    assert seat.engine.gpu_memory_utilization == 0.11
    assert seat.engine.kv_cache_bytes == 2 * GIB
    assert seat.resident_bytes == 10740 * MIB  # 11,261,706,240 B is 10,740 MiB exactly
    assert "pid 4121 on card 0: 11261706240 B" in text


def test_every_line_says_where_it_came_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = init_from(ROOT / "seats/catalogue/fv-ml1.snapshot.json", tmp_path / "c.yaml", capsys)
    lines = [line for line in text.splitlines() if line.strip()]
    assert all("#" in line for line in lines)
    assert "cuda_context: 1277 MiB  # default" in text  # --from: not measured, and said so


# --- what it refuses ------------------------------------------------------------------


def test_it_never_overwrites_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "host.yaml"
    out.write_text("mine\n")
    snapshot = ROOT / "seats/catalogue/fv-ml1.snapshot.json"
    assert main(["init", "--from", str(snapshot), "--out", str(out)]) == 2
    assert f"{out}: the file exists" in capsys.readouterr().err
    assert out.read_text() == "mine\n"


def test_live_without_nvml_is_exit_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        inventory.poller,
        "open_source",
        lambda: _serving(FakeNvml([], absent="NVML Shared Library Not Found")),
    )
    assert main(["init", "--live"]) == 3
    assert "no NVML" in capsys.readouterr().err


def test_from_a_snapshot_of_another_host_than_host_is_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    snapshot = ROOT / "seats/catalogue/fv-ml1.snapshot.json"
    assert main(["init", "--from", str(snapshot), "--host", "fv-ml2"]) == 2
    assert "'fv-ml1', not --host 'fv-ml2'" in capsys.readouterr().err


# --- command lines from anyone who can start a process -----------------------------------

HOSTILE = [
    "python3 serve.py --api-key sk-live-123456 --port 1",
    "python3 serve.py --port 2\n  - name: injected\n    resident: 1 MiB # ",
    "python3 serve.py --port 3 '; x: [1, {a: b}] #\r\x1b[2K\u202eevil",
    "python3 serve.py --port 3",  # a prefix of the line above: its match must not find that one
    "python3 serve.py --port 3\n",  # `$` matches before a final newline: this one needs \\Z
    "HF_TOKEN=hf_abcdef python3 serve.py --model x/../../y --port 4",
]


def test_hostile_command_lines_stay_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    processes = tuple(RawProcess(300 + i, (i + 1) * GIB) for i in range(len(HOSTILE)))
    fake = FakeNvml(
        [h200_idle_card(0, processes)], cmdlines={300 + i: c for i, c in enumerate(HOSTILE)}
    )
    monkeypatch.setattr(inventory.poller, "open_source", lambda: _serving(fake))
    out = tmp_path / "host.yaml"
    assert main(["init", "--host", "h", "--out", str(out), "--no-calibrate"]) == 0
    text = out.read_text()
    assert "sk-live-123456" not in text and "hf_abcdef" not in text
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
    data = yaml.safe_load(text)
    assert "injected" not in {s["name"] for s in data["seats"]}
    assert len(data["seats"]) == len(HOSTILE)
    for line in text.splitlines():  # a newline in a command line never starts a YAML line
        assert not line.startswith("    resident: 1 MiB # ")
    snapshot = tmp_path / "h.snapshot.json"
    save_snapshot(inventory.poller.take_snapshot(fake, NOW, "h"), snapshot)
    assert_attributes_every_process(out, snapshot, capsys)


def test_the_same_command_on_two_cards_is_one_seat_on_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = "python3 -m sglang.launch_server --model-path m --tp 2 --mem-fraction-static 0.3"
    cards = [
        h200_idle_card(0, (RawProcess(7, 30 * GIB),)),
        h200_idle_card(1, (RawProcess(8, 31 * GIB),)),
    ]
    fake = FakeNvml(cards, cmdlines={7: line, 8: line})
    monkeypatch.setattr(inventory.poller, "open_source", lambda: _serving(fake))
    out = tmp_path / "host.yaml"
    assert main(["init", "--host", "h", "--out", str(out), "--no-calibrate"]) == 0
    (seat,) = load_catalogue(out).seats
    assert seat.pinned_cards == (0, 1) and seat.resident_bytes == 31 * GIB
    assert seat.engine.kind == "sglang" and seat.engine.mem_fraction_static == 0.3


def test_a_match_finds_its_line_and_no_other() -> None:
    lines = ["a b", "a b c", "a.b", "a b\n"]
    for line in lines:
        pattern = anchored_match(line, lines)
        assert [other for other in lines if re.search(pattern, other)] == [line]


def test_comments_and_scalars_stay_on_one_line() -> None:
    nasty = "x\ny\r\x00\u2028\u202e#: '\""
    assert "\n" not in comment_text(nasty) and comment_text(nasty).isprintable()
    value = scalar(nasty)
    assert "\n" not in value and yaml.safe_load(f"k: {value}  # c") == {"k": nasty}
    assert scalar("fv-ml1") == "fv-ml1" and scalar("yes") == "'yes'" and scalar("1.5") == "'1.5'"


@pytest.mark.parametrize(
    ("line", "name"),
    [
        (
            "python3 -m vllm.entrypoints.openai.api_server --model org/Voices-Base --port 1",
            "voices-base",
        ),
        ("vllm serve /models/chat-large --port 8031", "chat-large"),
        ("python3 /app/parakeet_server.py --port 8090", "parakeet_server"),
        ("HF_TOKEN=*** python3 -u serve.py", "serve"),
        ("python -m my.pkg.worker", "worker"),
        ("/usr/bin/llama-server -m /m/qwen3-0.6b.gguf -c 4096", "qwen3-0.6b"),
        # The served name before the model, whatever their order; a repeated flag's last value
        # (the one the server reads, as the engine's own flag reading takes it).
        ("vllm serve --model org/a --served-model-name chat --port 1", "chat"),
        ("vllm serve --model org/first --model=org/second", "second"),
    ],
)
def test_a_name_comes_from_the_model_else_the_program(line: str, name: str) -> None:
    assert base_name(line.split()) == name


def test_flags_the_catalogue_would_refuse_beside_its_bytes_are_left_out_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A KV cache of 4 GiB in a process that held 1 GiB: the loader refuses KV above resident.
    line = "vllm serve m --port 1 --gpu-memory-utilization 0.5 --kv-cache-memory-bytes 4G"
    fake = FakeNvml([h200_idle_card(0, (RawProcess(5, GIB),))], cmdlines={5: line})
    monkeypatch.setattr(inventory.poller, "open_source", lambda: _serving(fake))
    out = tmp_path / "host.yaml"
    assert main(["init", "--host", "h", "--out", str(out), "--no-calibrate"]) == 0
    (seat,) = load_catalogue(out).seats
    assert seat.engine.kind == "vllm" and seat.engine.kv_cache_bytes is None
    assert "its flags left out: " in out.read_text()


def test_shell_completion_offers_init_and_its_options() -> None:
    from placement.cli.completion import command_specs

    _, specs = command_specs()
    (spec,) = [s for s in specs if s.name == "init"]
    assert {"--live", "--from", "--host", "--out", "--no-calibrate"} <= set(spec.options)
    assert spec.values["--from"] == "files" and spec.values["--out"] == "files"
    assert spec.values["--host"] == "hosts"


def test_a_seat_the_snapshot_already_names_keeps_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A snapshot taken with `snapshot --catalogue` carries each process's seat.
    data = json.loads((ROOT / "seats/catalogue/fv-ml1.snapshot.json").read_text())
    data["cards"][0]["processes"][3]["seat"] = "vllm-voices"
    snapshot = tmp_path / "named.snapshot.json"
    snapshot.write_text(json.dumps(data))
    out = tmp_path / "host.yaml"
    init_from(snapshot, out, capsys)
    names = {seat.name for seat in load_catalogue(out).seats}
    assert "vllm-voices" in names and "voices-base" not in names
    assert_attributes_every_process(out, snapshot, capsys)


def test_live_with_pytorch_writes_the_measured_cuda_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import inventory.calibrate as calibrate

    fake = engine_host("vllm")
    monkeypatch.setattr(inventory.poller, "open_source", lambda: _serving(fake))
    monkeypatch.setattr(calibrate, "torch_available", lambda: True)
    asked: list[int] = []

    def measure(gpu: int = 0, runs: int = 3, **_: object) -> calibrate.Calibration:
        asked.append(gpu)
        before = fake.cards[0].free_bytes or 0
        run = calibrate.CalibrationRun(
            nvml_free_before_bytes=before,
            cuda_total_bytes=0,
            cuda_free_bytes={"context": 0, "nccl": 0, "cublas": before - 1183 * MIB + 5},
        )
        return calibrate.Calibration(gpu, None, None, 0, None, (run,))

    monkeypatch.setattr(calibrate, "measure", measure)
    out = tmp_path / "host.yaml"
    assert main(["init", "--live", "--host", "h", "--out", str(out)]) == 0
    assert asked == [0]
    assert load_catalogue(out).hosts["h"].cuda_context_bytes == 1183 * MIB  # rounded up to a MiB
    assert "cuda_context: 1183 MiB  # measured" in out.read_text()


def test_a_lost_card_and_a_process_without_bytes_or_command_line_are_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from inventory.fake import lost_gpu

    fake = lost_gpu(lost=2, cards=4)  # card 2 answers GpuIsLost; 0, 1 and 3 run one process each
    fake.cmdlines = {4100: "python3 a.py", 4101: None, 4103: "python3 a.py --port 2"}
    monkeypatch.setattr(inventory.poller, "open_source", lambda: _serving(fake))
    out = tmp_path / "host.yaml"
    assert main(["init", "--host", "h", "--out", str(out), "--no-calibrate"]) == 0
    err = capsys.readouterr().err
    assert "card 2 was in error (GpuIsLost)" in err
    assert "pid 4101 had no command line; no match, so not attributed" in err
    catalogue = load_catalogue(out)
    assert catalogue.hosts["h"].cards == 4
    by_cards = {seat.pinned_cards: seat for seat in catalogue.seats}
    assert by_cards[(1,)].match is None and by_cards[(1,)].name == "pid-4101"
    assert by_cards[(0,)].match == "^python3 a\\.py$"
    snapshot = tmp_path / "h.snapshot.json"
    save_snapshot(inventory.poller.take_snapshot(fake, NOW, "h"), snapshot)
    assert main(["plan", "--catalogue", str(out), "--snapshot", str(snapshot)]) == 0


def test_a_process_nvml_gives_no_bytes_for_stands_at_1_mib_and_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeNvml([h200_idle_card(0, (RawProcess(9, None),))], cmdlines={9: "python3 b.py"})
    monkeypatch.setattr(inventory.poller, "open_source", lambda: _serving(fake))
    out = tmp_path / "host.yaml"
    assert main(["init", "--host", "h", "--out", str(out), "--no-calibrate"]) == 0
    assert "NVML gave no bytes for pid 9; resident is 1 MiB" in capsys.readouterr().err
    (seat,) = load_catalogue(out).seats
    assert seat.resident_bytes == MIB
    assert "1 MiB stands in; set the real figure" in out.read_text()
