"""The exporter's metric families, textfile writing and the `gpuplan exporter` command.

Values are read back through prometheus-client's own text parser, so names, labels and
byte figures are checked as a Prometheus server would see them.
"""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from inventory.attribution import attribute
from inventory.prometheus import metrics as m
from inventory.prometheus.exporter import TEXTFILE_NAME, write_textfile
from inventory.prometheus.metrics import Reading, SnapshotCollector, registry_for, render
from inventory.snapshot import Card, Snapshot
from placement.cli.main import main
from seats.errors import BadInputError
from seats.model import Catalogue
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: bytes | str) -> Series:
    """Every sample as {(name, sorted labels): value}."""
    if isinstance(text, bytes):
        text = text.decode()
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(series: Series, name: str, **labels: str) -> float:
    """The one sample of `name` whose labels include `labels`."""
    found = [
        v
        for (n, ls), v in series.items()
        if n == name and all(dict(ls).get(k) == want for k, want in labels.items())
    ]
    assert len(found) == 1, f"{name} {labels}: {len(found)} samples"
    return found[0]


def names(series: Series) -> set[str]:
    return {name for name, _ in series}


def test_card_figures_are_exact_bytes(fv_ml1_snapshot: Snapshot) -> None:
    series = parse(render(Reading("fv-ml1", fv_ml1_snapshot, 0.004)))
    card = fv_ml1_snapshot.card(0)
    uuid = card.uuid or ""
    # docs/facts.md §3: NVML total 97,871 MiB, reserve 622 MiB, 1,871 MiB free on card 0.
    assert value(series, m.CARD_TOTAL, host="fv-ml1", gpu="0", uuid=uuid) == 97871 * 2**20
    assert value(series, m.CARD_RESERVED, gpu="0") == 622 * 2**20
    assert value(series, m.CARD_FREE, gpu="0") == card.free_bytes
    assert value(series, m.CARD_USED, gpu="0") == card.used_bytes
    assert value(series, m.CARD_MEMORY_VERSION, gpu="0") == 2
    assert value(series, m.CARD_ERROR, gpu="0", error="") == 0
    assert value(series, m.HOST_CARDS, host="fv-ml1") == 4
    assert value(series, m.POLL_SUCCESS, host="fv-ml1") == 1
    assert value(series, m.POLL_DURATION, host="fv-ml1") == pytest.approx(0.004)
    assert value(series, m.SNAPSHOT_TIMESTAMP) == fv_ml1_snapshot.taken_at.timestamp()
    assert value(series, m.HOST_INFO, driver="580.159.04") == 1


def test_processes_carry_seat_or_foreign(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    raw = parse(render(Reading("fv-ml1", fv_ml1_snapshot, 0.0)))
    assert value(raw, m.PROCESS_USED, pid="4121", gpu="0") == 11261706240
    assert value(raw, m.PROCESS_USED, pid="4121", seat="foreign") == 11261706240

    attributed = parse(render(Reading("fv-ml1", attribute(fv_ml1_snapshot, fv_ml1), 0.0)))
    assert value(attributed, m.PROCESS_USED, pid="4121", seat="vllm-voices") == 11261706240
    seats = {dict(ls)["seat"] for n, ls in attributed if n == m.PROCESS_USED}
    assert "foreign" not in seats
    assert "embed" in seats


def test_v1_only_card_omits_reserved_and_says_so(fv_ml1_snapshot: Snapshot) -> None:
    card = fv_ml1_snapshot.card(1).model_copy(update={"reserved_bytes": None})
    snapshot = fv_ml1_snapshot.model_copy(update={"cards": (card,)})
    series = parse(render(Reading("fv-ml1", snapshot, 0.0)))
    assert m.CARD_RESERVED not in names(series)
    assert value(series, m.CARD_MEMORY_VERSION, gpu="1") == 1
    assert value(series, m.CARD_USED, gpu="1") == card.used_bytes


def test_card_in_error_exports_error_not_zeros(fv_ml1_snapshot: Snapshot) -> None:
    lost = Card(index=2, uuid="GPU-lost", error="GpuIsLost")
    cards = (fv_ml1_snapshot.card(0), lost)
    series = parse(
        render(Reading("fv-ml1", fv_ml1_snapshot.model_copy(update={"cards": cards}), 0.0))
    )
    assert value(series, m.CARD_ERROR, gpu="2", error="GpuIsLost") == 1
    assert value(series, m.CARD_INFO, gpu="2") == 1
    for name in (m.CARD_TOTAL, m.CARD_USED, m.CARD_FREE):
        assert not [ls for n, ls in series if n == name and dict(ls)["gpu"] == "2"]
    assert value(series, m.HOST_CARDS) == 2


def test_unknown_process_bytes_are_nan_not_zero(fv_ml1_snapshot: Snapshot) -> None:
    card = fv_ml1_snapshot.card(0)
    process = card.processes[0].model_copy(update={"used_bytes": None})
    card = card.model_copy(update={"processes": (process,)})
    snapshot = fv_ml1_snapshot.model_copy(update={"cards": (card,)})
    series = parse(render(Reading("fv-ml1", snapshot, 0.0)))
    assert math.isnan(value(series, m.PROCESS_USED, pid=str(process.pid)))


def test_failed_poll_is_a_zero_gauge_not_a_failed_scrape() -> None:
    errors: list[Exception] = []

    def poll() -> Snapshot:
        raise RuntimeError("NVML went away")

    collector = SnapshotCollector("fv-ml1", poll, on_error=errors.append)
    from prometheus_client.exposition import generate_latest

    series = parse(generate_latest(registry_for(collector)))
    assert value(series, m.POLL_SUCCESS, host="fv-ml1") == 0
    assert names(series) == {m.POLL_SUCCESS, m.POLL_DURATION}
    assert [str(e) for e in errors] == ["NVML went away"]


def test_collector_polls_on_every_scrape(fv_ml1_snapshot: Snapshot) -> None:
    calls: list[int] = []

    def poll() -> Snapshot:
        calls.append(1)
        return fv_ml1_snapshot

    registry = registry_for(SnapshotCollector("fv-ml1", poll))
    from prometheus_client.exposition import generate_latest

    generate_latest(registry)
    generate_latest(registry)
    assert len(calls) == 2


def test_textfile_is_written_atomically(tmp_path: Path, fv_ml1_snapshot: Snapshot) -> None:
    registry = registry_for(SnapshotCollector("fv-ml1", lambda: fv_ml1_snapshot))
    (tmp_path / TEXTFILE_NAME).write_text("old content\n")
    target = write_textfile(registry, tmp_path)
    assert target == tmp_path / TEXTFILE_NAME
    assert (
        value(parse(target.read_text()), m.CARD_FREE, gpu="3") == fv_ml1_snapshot.card(3).free_bytes
    )
    assert sorted(os.listdir(tmp_path)) == [TEXTFILE_NAME]  # no temporary left behind
    assert target.stat().st_mode & 0o777 == 0o644


def test_textfile_into_missing_directory_is_bad_input(
    tmp_path: Path, fv_ml1_snapshot: Snapshot
) -> None:
    registry = registry_for(SnapshotCollector("fv-ml1", lambda: fv_ml1_snapshot))
    with pytest.raises(BadInputError, match="no such directory"):
        write_textfile(registry, tmp_path / "absent")


# The command.


def test_cli_textfile_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "exporter",
            "--from",
            str(FV_ML1_SNAPSHOT),
            "--catalogue",
            str(FV_ML1_CATALOGUE),
            "--host",
            "fv-ml9",
            "--textfile",
            str(tmp_path),
        ]
    )
    assert code == 0
    series = parse((tmp_path / TEXTFILE_NAME).read_text())
    # Attribution follows the exported host: the catalogue has no seats on fv-ml9.
    assert value(series, m.PROCESS_USED, host="fv-ml9", pid="4130", seat="foreign") == 668991488
    assert "wrote" in capsys.readouterr().err

    code = main(
        [
            "exporter",
            "--from",
            str(FV_ML1_SNAPSHOT),
            "--catalogue",
            str(FV_ML1_CATALOGUE),
            "--textfile",
            str(tmp_path),
        ]
    )
    assert code == 0
    series = parse((tmp_path / TEXTFILE_NAME).read_text())
    assert value(series, m.PROCESS_USED, host="fv-ml1", seat="parakeet-stt") == 668991488


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--interval", "5"], "--interval goes with --textfile"),
        (["--from", "/nonexistent.json"], "no such file"),
        (["--port", "70000"], "--port must be"),
    ],
)
def test_cli_bad_input_exits_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["exporter", *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_without_nvml_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from inventory import nvml

    def absent(self: nvml.PynvmlSource) -> nvml.PynvmlSource:
        raise nvml.NvmlUnavailableError("no NVML: libnvidia-ml.so.1 not found")

    monkeypatch.setattr(nvml.PynvmlSource, "open", absent)
    assert main(["exporter", "--port", "0"]) == 3
    assert "no NVML" in capsys.readouterr().err


def test_cli_port_in_use_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["exporter", "--from", str(FV_ML1_SNAPSHOT), "--port", str(port)])
    assert code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.slow
def test_served_exporter_answers_scrapes_and_stops_on_sigterm() -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "placement",
            "exporter",
            "--port",
            "0",
            "--from",
            str(FV_ML1_SNAPSHOT),
        ],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
        assert found, line
        url = f"http://127.0.0.1:{found.group(1)}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            series = parse(response.read())
        assert value(series, m.CARD_FREE, host="fv-ml1", gpu="0") == 1961885696
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.slow
def test_textfile_loop_rewrites_until_sigterm(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "placement", "exporter", "--from", str(FV_ML1_SNAPSHOT)]
    process = subprocess.Popen(
        [*argv, "--textfile", str(tmp_path), "--interval", "0.2"],
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    target = tmp_path / TEXTFILE_NAME
    try:
        deadline = time.monotonic() + 20
        while not target.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        first = target.stat().st_mtime_ns
        while target.stat().st_mtime_ns == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert target.stat().st_mtime_ns != first  # rewritten on the interval
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert value(parse(target.read_text()), m.HOST_CARDS, host="fv-ml1") == 4
    assert sorted(os.listdir(tmp_path)) == [TEXTFILE_NAME]
