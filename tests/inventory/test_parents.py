"""A process title is attributed by its ancestors' command lines (vLLM's V1 engine core).

Since vLLM's V1 engine the process that holds a vLLM seat's GPU memory is its engine core, whose
/proc/PID/cmdline is only the title vLLM gives it: `set_process_title("EngineCore")` writes
`f"{prefix}::{name}"` with prefix `VLLM_PROCESS_NAME_PREFIX` (default `VLLM`) through setproctitle
(vllm-project/vllm, vllm/utils/system_utils.py `set_process_title`, called by run_engine_core in
vllm/v1/engine/core.py), so `VLLM::EngineCore` with no arguments, as `ps` shows it in
https://github.com/vllm-project/vllm/issues/25127 (`77637     1 R … VLLM::EngineCore`); its
parent, the API server, carries `--port 8027`. The parent's line below is fv-ml1's
own vllm-voices line (seats/catalogue/fv-ml1.snapshot.json, pid 4121).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from inventory.attribution import (
    attribute,
    host_seats,
    match_seat,
    process_seat,
    server_line,
    shown_parent,
)
from inventory.fake import FakeNvml, h200_idle_card
from inventory.history.figures import foreign_usage
from inventory.history.ledger import LedgerWindow
from inventory.ledger import report_queries
from inventory.ledger.store import MIGRATIONS, open_ledger
from inventory.nvml import RawProcess
from inventory.poller import take_snapshot
from inventory.proc import is_runtime_shim, read_proc_cmdline, read_proc_parents
from inventory.prometheus.exporter import recorded_poll
from inventory.snapshot import (
    Process,
    Snapshot,
    SnapshotError,
    dumps_snapshot,
    load_snapshot,
    loads_snapshot,
)
from placement.check.compose import load_compose
from placement.check.seat import check_service
from placement.cli import check as check_command
from placement.cli.main import main
from placement.report.figures import _seat_matcher
from seats.loader import load_catalogue
from seats.model import Catalogue
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

VOICES_SERVER = (
    "python3 -m vllm.entrypoints.openai.api_server --model voices-base --port 8027 "
    "--gpu-memory-utilization 0.11 --kv-cache-memory 2G --enable-lora --max-loras 4 "
    "--max-lora-rank 16"
)
ENGINE_CORE = "VLLM::EngineCore"


@pytest.fixture
def engine_core() -> Iterator[tuple[int, int]]:
    """(server pid, engine core pid): a parent whose arguments name vLLM and `--port 8027`, and
    a child that runs `sleep 60` under the bare title `VLLM::EngineCore` (its argv[0], as
    `exec -a` sets it: the `60` left is no port)."""
    code = (
        "import shutil, subprocess, sys\n"
        "child = subprocess.Popen(['VLLM::EngineCore', '60'], executable=shutil.which('sleep'))\n"
        "print(child.pid, flush=True)\n"
        "sys.stdin.readline()\n"
        "child.kill()\n"
        "child.wait()\n"
    )
    server = subprocess.Popen(
        [sys.executable, "-c", code, "vllm", "serve", "voices-base", "--port", "8027"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        child = int(server.stdout.readline())
        for _ in range(200):  # until sh has exec'd into the titled sleep
            if (read_proc_cmdline(child) or "").startswith(ENGINE_CORE):
                break
            subprocess.run(["sleep", "0.01"], check=True)
        yield server.pid, child
    finally:
        server.stdin.write(b"\n")
        server.stdin.close()
        server.wait(timeout=10)


def test_real_proc_reads_a_titled_childs_parent_and_the_fv_ml1_match_finds_it(
    engine_core: tuple[int, int], fv_ml1: Catalogue
) -> None:
    server, child = engine_core
    own = read_proc_cmdline(child)
    parents = read_proc_parents(child)
    assert own == f"{ENGINE_CORE} 60"
    assert parents[0] == read_proc_cmdline(server)
    assert parents[0].endswith("vllm serve voices-base --port 8027")
    assert 1 <= len(parents) <= 4
    seats = host_seats(fv_ml1, "fv-ml1")
    assert match_seat(own, seats) is None  # the title alone names no seat
    process = Process(pid=child, used_bytes=1, cmdline=own, parents=parents)
    assert process_seat(process, seats) == "vllm-voices"
    # Through the poller, as `snapshot --catalogue` captures it from this machine's /proc.
    nvml = FakeNvml([h200_idle_card(0, (RawProcess(pid=child, used_bytes=11_261_706_240),))])
    taken = take_snapshot(nvml, datetime.now().astimezone(), "fv-ml1", catalogue=fv_ml1)
    (seen,) = taken.card(0).processes
    assert (seen.cmdline, seen.parents[0], seen.seat) == (own, parents[0], "vllm-voices")


def test_parents_stop_at_a_runtime_shim_and_a_vanished_pid_has_none() -> None:
    assert is_runtime_shim("/usr/bin/containerd-shim-runc-v2 -namespace moby -id 5f0c -address x")
    assert is_runtime_shim("/sbin/docker-init -- vllm serve voices-base --port 8027")
    assert is_runtime_shim("tini -- python3 -m sglang.launch_server --port 30000")
    assert not is_runtime_shim(VOICES_SERVER)
    assert not is_runtime_shim("tinyllama-server --port 9000")
    assert read_proc_parents(4_000_000) == ()  # above pid_max: never a process


def _process(cmdline: str | None, *parents: str) -> Process:
    return Process(pid=4121, used_bytes=1, cmdline=cmdline, parents=parents)


def test_own_line_first_then_the_nearest_parent(fv_ml1: Catalogue) -> None:
    seats = host_seats(fv_ml1, "fv-ml1")
    chat = "vllm serve chat-large --port 8031"
    # Its own line matching keeps today's answer, whatever its parents say.
    assert process_seat(_process(chat, VOICES_SERVER), seats) == "chat-large"
    # The nearest line any seat matches decides: a worker under the engine core under the server.
    worker = _process("VLLM::Worker_TP0", ENGINE_CORE, VOICES_SERVER, chat)
    assert process_seat(worker, seats) == "vllm-voices"
    assert process_seat(_process(ENGINE_CORE, "bash", "tmux"), seats) is None
    assert process_seat(_process(None, VOICES_SERVER), seats) == "vllm-voices"
    # What output shows beside it: the server's line, past the engine core's title.
    assert server_line(worker) == VOICES_SERVER
    assert shown_parent(worker) == VOICES_SERVER
    assert shown_parent(_process(chat, VOICES_SERVER)) is None  # its own line says it
    voices = [s for s in seats if s.name == "vllm-voices"]
    matched = _process("python3 voices_worker.py", "bash", VOICES_SERVER)
    matched = matched.model_copy(update={"seat": "vllm-voices"})
    assert shown_parent(matched, voices) == VOICES_SERVER  # the ancestor that named its seat


def test_parents_are_masked_and_kept_in_the_snapshot_file_only_when_present() -> None:
    data = json.loads(FV_ML1_SNAPSHOT.read_text(encoding="utf-8"))
    data["cards"][0]["processes"][3]["cmdline"] = ENGINE_CORE
    data["cards"][0]["processes"][3]["parents"] = [f"{VOICES_SERVER} --api-key sk-live-1234"]
    snapshot = loads_snapshot(json.dumps(data), "voices.json")
    (parent,) = snapshot.card(0).processes[3].parents
    assert parent == f"{VOICES_SERVER} --api-key ***"
    written = json.loads(dumps_snapshot(snapshot))
    assert written["cards"][0]["processes"][3]["parents"] == [parent]
    assert "parents" not in written["cards"][0]["processes"][0]  # none read: no key, as before
    assert loads_snapshot(json.dumps(written), "again.json") == snapshot
    # null is none read, as an absent key is; a string is no list of lines (exit 2, naming it).
    written["cards"][0]["processes"][3]["parents"] = None
    assert loads_snapshot(json.dumps(written), "null.json").card(0).processes[3].parents == ()
    written["cards"][0]["processes"][3]["parents"] = VOICES_SERVER
    with pytest.raises(SnapshotError, match=r"cards\[0\]\.processes\[3\]\.parents"):
        loads_snapshot(json.dumps(written), "string.json")
    # An older snapshot (no `parents`) reads as it did.
    assert load_snapshot(FV_ML1_SNAPSHOT).card(0).processes[3].parents == ()


def _engine_core_snapshot(tmp_path: Path, parents: list[str]) -> Path:
    """fv-ml1 after voices came up, its 10.49 GiB in an engine core under its API server."""
    data: dict[str, Any] = json.loads(FV_ML1_SNAPSHOT.read_text(encoding="utf-8"))
    voices = data["cards"][0]["processes"][3]
    assert voices["pid"] == 4121 and voices["cmdline"] == VOICES_SERVER
    voices["cmdline"] = ENGINE_CORE
    voices["parents"] = parents
    path = tmp_path / "engine-core.snapshot.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_snapshot_with_parents_goes_through_the_ledger_and_back(tmp_path: Path) -> None:
    snapshot = load_snapshot(_engine_core_snapshot(tmp_path, [VOICES_SERVER, "bash"]))
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        ledger.append(snapshot)
    with open_ledger(tmp_path / "l.sqlite", readonly=True) as ledger:
        back = ledger.latest("fv-ml1")
    assert back == snapshot
    assert back is not None and back.card(0).processes[3].parents == (VOICES_SERVER, "bash")


def test_a_version_5_ledger_reads_as_it_is_then_migrates_in_place(tmp_path: Path) -> None:
    path = tmp_path / "v5.sqlite"
    taken = int(load_snapshot(FV_ML1_SNAPSHOT).taken_at.timestamp()) - 60
    # A ledger as version 5 wrote it (no `parents` column), holding one process.
    with sqlite3.connect(path) as connection:
        for step in MIGRATIONS[:5]:
            if callable(step):
                step(connection)
            else:
                connection.executescript(step)
        connection.execute("PRAGMA user_version = 5")
        connection.execute(
            "INSERT INTO snapshots(id, host, taken_at_s, taken_at) VALUES (1, 'fv-ml1', ?, 'x')",
            (taken,),
        )
        connection.execute(
            "INSERT INTO cards(snapshot_id, idx, total_bytes, reserved_bytes, used_bytes, free_bytes)"
            " VALUES (1, 0, 100, 10, 30, 60)"
        )
        connection.execute(
            "INSERT INTO processes VALUES (1, 0, 4121, 30, ?, NULL)", (VOICES_SERVER,)
        )
    with open_ledger(path, readonly=True) as ledger:
        old = ledger.latest("fv-ml1")
    assert old is not None and old.card(0).processes[0].parents == ()
    newer = load_snapshot(_engine_core_snapshot(tmp_path, [VOICES_SERVER]))
    with open_ledger(path) as ledger:
        version = ledger.connection.execute("PRAGMA user_version").fetchone()[0]
        ledger.append(newer)
        assert ledger.latest("fv-ml1") == newer
        columns = {r[1] for r in ledger.connection.execute("PRAGMA table_info(processes)")}
    assert version == len(MIGRATIONS) == 8 and "parents" in columns
    with sqlite3.connect(path) as connection:
        stored = connection.execute(
            "SELECT parents FROM processes WHERE snapshot_id = 1"
        ).fetchone()
    assert stored == (None,)  # the old row has no parents: NULL, read as none


def test_the_exporter_attributes_an_engine_core_to_its_seat(
    tmp_path: Path, fv_ml1: Catalogue
) -> None:
    path = _engine_core_snapshot(tmp_path, [VOICES_SERVER])
    polled = recorded_poll(str(path), host=None, catalogue=fv_ml1)()
    seats = {p.pid: p.seat for p in polled.card(0).processes}
    assert seats[4121] == "vllm-voices"


@pytest.fixture
def check_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    taken = load_snapshot(FV_ML1_SNAPSHOT).taken_at
    monkeypatch.setattr(check_command, "utc_now", lambda: taken + timedelta(minutes=5))


@pytest.mark.usefixtures("check_clock")
def test_check_of_a_redeploy_frees_the_engine_cores_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["check", "vllm-voices", "--gpu", "0", "--catalogue", str(FV_ML1_CATALOGUE), "--json"]
    with_parent = _engine_core_snapshot(tmp_path, [VOICES_SERVER])
    assert main([*argv, "--snapshot", str(with_parent)]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert any("redeploy" in w and "pid 4121" in w for w in verdict["warnings"]), verdict
    # Without its parent's line the engine core is foreign: its 10.49 GiB are not freed.
    without = _engine_core_snapshot(tmp_path, [])
    assert main([*argv, "--snapshot", str(without)]) == 1
    refused = json.loads(capsys.readouterr().out)
    assert not any("redeploy" in w for w in refused["warnings"])


def test_ledger_shows_a_foreign_engine_cores_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    # A real server line (jyngjeon/multiagentsdebate, vllm-serve.sh), on no seat's port.
    stranger = (
        "vllm serve Qwen/Qwen3-14B --tensor-parallel-size 4 --host 0.0.0.0 --port 8000 "
        "--dtype bfloat16 --gpu-memory-utilization 0.90 --max-model-len 16384"
    )
    path = _engine_core_snapshot(tmp_path, [stranger])
    argv = ["ledger", "--catalogue", str(FV_ML1_CATALOGUE), "--snapshot", str(path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"{ENGINE_CORE} (parent: vllm serve Qwen/Qwen3-14B --tensor-parallel-size 4" in out
    assert main([*argv, "--json"]) == 0
    (host,) = json.loads(capsys.readouterr().out)["hosts"]
    (foreign,) = [p for p in host["foreign"] if p["pid"] == 4121]
    assert (foreign["cmdline"], foreign["parent"]) == (ENGINE_CORE, stranger)


def test_snapshot_replay_keeps_parents(tmp_path: Path) -> None:
    recorded = load_snapshot(_engine_core_snapshot(tmp_path, [VOICES_SERVER]))
    replayed: Snapshot = take_snapshot(
        FakeNvml.from_snapshot(recorded), recorded.taken_at, "fv-ml1"
    )
    assert replayed.card(0).processes[3].parents == (VOICES_SERVER,)


def test_init_matches_an_engine_core_by_its_servers_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPLAN_CATALOGUE", raising=False)
    path = _engine_core_snapshot(tmp_path, [VOICES_SERVER, "bash"])
    out = tmp_path / "starter.yaml"
    assert main(["init", "--from", str(path), "--out", str(out), "--no-calibrate"]) == 0
    starter = load_catalogue(out)
    attributed = attribute(load_snapshot(path), starter)
    (core,) = [p for p in attributed.card(0).processes if p.pid == 4121]
    seat = starter.seat(core.seat or "")
    assert seat.match is not None and match_seat(VOICES_SERVER, [seat]) == seat.name
    assert match_seat(ENGINE_CORE, [seat]) is None  # found by its server's line, not its title


def test_the_report_attributes_an_engine_core_stored_without_a_seat(
    tmp_path: Path, fv_ml1: Catalogue
) -> None:
    snapshot = load_snapshot(_engine_core_snapshot(tmp_path, [VOICES_SERVER]))
    assert snapshot.card(0).processes[3].seat is None  # stored as captured without a catalogue
    start = int(snapshot.taken_at.timestamp())
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        ledger.append(snapshot)
        conn = ledger.connection
        report_queries.prepare_window(conn, start, start + 60, _seat_matcher(fv_ml1))
        window = LedgerWindow(conn, report_queries.Span(start, start, 1))
        usage = {u.seat: u for u in window.seat_usage(start, start, 1)}
        foreign = [
            f.cmdline
            for f in foreign_usage(report_queries.foreign_processes(conn), by_command_line=True)
        ]
    assert usage["vllm-voices"].max_bytes == 11_261_706_240
    assert ENGINE_CORE not in foreign


def _core_on_card_1(parents: list[str]) -> Snapshot:
    """fv-ml1 with a 4 GiB `VLLM::EngineCore` (pid 777) more on card 1, under `parents`."""
    data: dict[str, Any] = json.loads(FV_ML1_SNAPSHOT.read_text(encoding="utf-8"))
    card = data["cards"][1]
    core = {"pid": 777, "used_bytes": 4 * 2**30, "cmdline": ENGINE_CORE, "parents": parents}
    card["processes"].append(core)
    card["used_bytes"] += core["used_bytes"]
    card["free_bytes"] -= core["used_bytes"]
    return loads_snapshot(json.dumps(data), "core-on-card-1.json")


@pytest.mark.parametrize(("parents", "verdict"), [(True, "pass"), (False, "refuse")])
def test_a_seatless_compose_service_frees_its_engine_core_by_its_servers_port(
    tmp_path: Path, fv_ml1: Catalogue, parents: bool, verdict: str
) -> None:
    server = "vllm serve m --port 9100 --gpu-memory-utilization 0.04 --kv-cache-memory 2G"
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        """
services:
  side:
    image: vllm/vllm-openai:v0.11.0
    command: [--model, m, --port, "9100", --gpu-memory-utilization, "0.04", --kv-cache-memory, 2G]
    environment: [CUDA_VISIBLE_DEVICES=1]
""",
        encoding="utf-8",
    )
    (service,) = load_compose(compose, {}).services
    result = check_service(fv_ml1, [_core_on_card_1([server] if parents else [])], service)
    # With its server's line the engine core is the service's own, freed for the redeploy;
    # with no parent read it is no service's, and its 4 GiB stay held.
    assert result.verdict.verdict == verdict, result.verdict.reasons
    assert any("pid 777" in w for w in result.verdict.warnings) is parents


def test_the_report_lists_a_foreign_engine_core_with_its_servers_line(
    tmp_path: Path, fv_ml1: Catalogue
) -> None:
    stranger = "vllm serve Qwen/Qwen3-14B --tensor-parallel-size 4 --host 0.0.0.0 --port 8000"
    snapshot = load_snapshot(_engine_core_snapshot(tmp_path, [stranger]))
    start = int(snapshot.taken_at.timestamp())
    with open_ledger(tmp_path / "l.sqlite") as ledger:
        ledger.append(snapshot)
        conn = ledger.connection
        report_queries.prepare_window(conn, start, start + 60, _seat_matcher(fv_ml1))
        (core,) = [
            f
            for f in foreign_usage(report_queries.foreign_processes(conn), by_command_line=True)
            if f.cmdline == ENGINE_CORE
        ]
    assert (core.card, core.max_bytes, core.parent) == (0, 11_261_706_240, stranger)
