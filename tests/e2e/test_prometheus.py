"""End to end: a real Prometheus scrapes `gpuplan exporter`s serving fake hosts, and gpuplan
reads the fleet back through its HTTP API — the same snapshots, plans and verdicts as from files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from inventory.attribution import attribute
from inventory.prometheus.reader import Fleet, read_fleet
from inventory.snapshot import Card, Process, Snapshot, load_snapshot, save_snapshot
from placement.cli.main import main
from seats.loader import load_catalogue
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT
from tests.e2e.harness import (
    Processes,
    StaticMetrics,
    exporter_port,
    install_prometheus,
    start_exporter,
    start_prometheus,
    wait_until,
)

pytestmark = pytest.mark.slow  # a real Prometheus server

MIB = 2**20
GIB = 2**30
# docs/facts.md §1: an NVIDIA H200, driver 580.159.04.
H200_TOTAL = 150_754_820_096
H200_RESERVED = 644_939_776
H200_FREE_IDLE = 150_109_880_320


@dataclass
class Fleet2:
    url: str
    snapshots: dict[str, Path]  # fresh host → its snapshot file
    stale_host: str
    catalogue: Path
    catalogue_with_stale: Path


def fv_ml2(now: datetime) -> Snapshot:
    """A second host: two H200s, one idle, one with a foreign 20 GiB process (+518 MiB context)."""
    held = 20 * GIB + 518 * MIB
    idle = Card(
        index=0,
        uuid="GPU-fv-ml2-0",
        name="NVIDIA H200",
        total_bytes=H200_TOTAL,
        reserved_bytes=H200_RESERVED,
        used_bytes=0,
        free_bytes=H200_FREE_IDLE,
    )
    busy = idle.model_copy(
        update={
            "index": 1,
            "uuid": "GPU-fv-ml2-1",
            "used_bytes": held,
            "free_bytes": H200_FREE_IDLE - held,
            "processes": (Process(pid=7001, used_bytes=held, cmdline="python train.py"),),
        }
    )
    return Snapshot(host="fv-ml2", taken_at=now, driver="580.159.04", cards=(idle, busy))


# dgx-7 has only NVIDIA's dcgm-exporter: two H200s in whole MiB, as nvidia-smi printed the idle
# card on an NVIDIA H200 (total 143,771, reserved 616, free 143,156); card 1 holds 20 GiB + 518 MiB.
DGX_CARDS = {
    0: {"USED": 0, "FREE": 143156, "RESERVED": 616, "TOTAL": 143771},
    1: {"USED": 20998, "FREE": 122158, "RESERVED": 616, "TOTAL": 143771},
}


def dcgm_text(host: str) -> bytes:
    """dcgm-exporter's exposition for `DGX_CARDS` (its label names and MiB units)."""
    lines = []
    for field in ("USED", "FREE", "RESERVED", "TOTAL"):
        name = f"DCGM_FI_DEV_FB_{field}"
        lines += [
            f"# HELP {name} Framebuffer memory {field.lower()} (in MiB).",
            f"# TYPE {name} gauge",
        ]
        for gpu, figures in DGX_CARDS.items():
            labels = (
                f'gpu="{gpu}",UUID="GPU-dgx-7-{gpu}",device="nvidia{gpu}",modelName="NVIDIA H200",'
                f'Hostname="{host}",DCGM_FI_DRIVER_VERSION="580.159.04"'
            )
            lines.append(f"{name}{{{labels}}} {figures[field]}")
    return ("\n".join(lines) + "\n").encode()


def dgx_snapshot(now: datetime) -> Snapshot:
    """What dgx-7's DCGM series say, as a snapshot file (MiB × 2^20, no processes)."""
    cards = tuple(
        Card(
            index=gpu,
            uuid=f"GPU-dgx-7-{gpu}",
            name="NVIDIA H200",
            total_bytes=f["TOTAL"] * MIB,
            reserved_bytes=f["RESERVED"] * MIB,
            used_bytes=f["USED"] * MIB,
            free_bytes=f["FREE"] * MIB,
        )
        for gpu, f in DGX_CARDS.items()
    )
    return Snapshot(host="dgx-7", taken_at=now, driver="580.159.04", cards=cards)


def write_catalogues(folder: Path) -> tuple[Path, Path]:
    """fv-ml1's catalogue plus fv-ml2 and a host-free planned seat; and one more with a stale fv-ml3."""
    data = yaml.safe_load(FV_ML1_CATALOGUE.read_text())
    data["hosts"]["fv-ml2"] = {"cards": 2, "cuda_context": "1277 MiB", "margin": "256 MiB"}
    data["hosts"]["dgx-7"] = {"cards": 2, "card_total": "143771 MiB", "cuda_context": "1277 MiB"}
    data["seats"].append(
        {
            "name": "batch-embed",
            "state": "planned",
            "resident": "20 GiB",
            "engine": {
                "kind": "vllm",
                "version": "0.11.0",
                "gpu_memory_utilization": 0.15,
                "kv_cache_memory": "8 GiB",
            },
        }
    )
    plain = folder / "fleet.yaml"
    plain.write_text(yaml.safe_dump(data))
    data["hosts"]["fv-ml3"] = {"cards": 4, "cuda_context": "1183 MiB"}
    data["seats"].append(
        {"name": "probe", "state": "planned", "host": "fv-ml3", "resident": "1 GiB"}
    )
    with_stale = folder / "fleet-with-stale.yaml"
    with_stale.write_text(yaml.safe_dump(data))
    return plain, with_stale


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet2]:
    binary = install_prometheus()
    if binary is None:
        pytest.skip(
            "Debian's prometheus is not installed and could not be installed (needs root and apt-get)"
        )
    folder = tmp_path_factory.mktemp("e2e-prometheus")
    now = datetime.now(UTC).replace(microsecond=0)
    files = {h: folder / f"{h}.json" for h in ("dgx-7", "fv-ml1", "fv-ml2")}
    save_snapshot(
        load_snapshot(FV_ML1_SNAPSHOT).model_copy(update={"taken_at": now}), files["fv-ml1"]
    )
    save_snapshot(fv_ml2(now), files["fv-ml2"])
    save_snapshot(dgx_snapshot(now), files["dgx-7"])
    catalogue, with_stale = write_catalogues(folder)
    processes = Processes()
    servers: list[StaticMetrics] = []
    try:
        # Started together (each is a Python start-up), then asked for their ports.
        exporters = [
            start_exporter(processes, files[h], catalogue=catalogue) for h in ("fv-ml1", "fv-ml2")
        ]
        # fv-ml3 serves the recorded 2026-09-16 snapshot: its figures keep their own, old time.
        exporters.append(
            start_exporter(processes, FV_ML1_SNAPSHOT, catalogue=with_stale, host="fv-ml3")
        )
        ports = [exporter_port(process) for process in exporters]
        dcgm = StaticMetrics(dcgm_text("dgx-7"))
        servers.append(dcgm)
        targets = [f"127.0.0.1:{p}" for p in ports] + [dcgm.target]
        url = start_prometheus(processes, binary, targets, folder / "prom")

        def scraped() -> bool:
            got = read_fleet(url, now=datetime.now(UTC), max_age=timedelta(days=3650))
            return {s.host for s in got.snapshots} == {"dgx-7", "fv-ml1", "fv-ml2", "fv-ml3"}

        wait_until(scraped, 25, "Prometheus to scrape the three exporters and dcgm-exporter")
        yield Fleet2(url, files, "fv-ml3", catalogue, with_stale)
    finally:
        processes.stop_all()
        for server in servers:
            server.close()


def read_now(fleet: Fleet2, **kwargs: Any) -> Fleet:
    return read_fleet(fleet.url, now=datetime.now(UTC), max_age=timedelta(minutes=15), **kwargs)


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def gpuplan(capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """Run the gpuplan CLI in this process (the subprocess start-up would triple the test's time)."""

    def run(*argv: str) -> Ran:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


def comparable(snapshot: Snapshot) -> Snapshot:
    """What survives Prometheus: everything but cmdlines; processes by pid."""
    cards = tuple(
        card.model_copy(
            update={
                "processes": tuple(
                    sorted(
                        (p.model_copy(update={"cmdline": None}) for p in card.processes),
                        key=lambda p: p.pid,
                    )
                )
            }
        )
        for card in snapshot.cards
    )
    return snapshot.model_copy(update={"cards": cards})


def test_snapshots_through_prometheus_equal_the_files(fleet: Fleet2) -> None:
    catalogue = load_catalogue(fleet.catalogue)
    got = read_now(fleet, expected_cards={h: c.cards for h, c in catalogue.hosts.items()})
    assert [s.host for s in got.snapshots] == ["dgx-7", "fv-ml1", "fv-ml2"]
    assert [(p.host, p.kind) for p in got.problems] == [("fv-ml3", "stale")]
    assert [w.split(":")[0] for w in got.warnings] == ["dgx-7"]  # no per-process data there
    for snapshot in got.snapshots:
        direct = attribute(load_snapshot(fleet.snapshots[snapshot.host]), catalogue)
        if snapshot.host == "dgx-7":
            # DCGM carries no reading time: taken_at is Prometheus's sample time.
            assert direct.taken_at <= snapshot.taken_at <= datetime.now(UTC)
            direct = direct.model_copy(update={"taken_at": snapshot.taken_at})
        assert snapshot == comparable(direct)  # every byte, uuid, seat, driver and taken_at


def test_plan_through_prometheus_equals_the_plan_from_files(
    fleet: Fleet2, gpuplan: Callable[..., Ran]
) -> None:
    # A generous limit: on a loaded 2-core runner CBC can be starved past the 10 s default, and
    # a time-limited answer need not be the same placement twice.
    common = ["plan", "--json", "--time-limit", "120", "--catalogue", str(fleet.catalogue)]
    direct = gpuplan(
        *common,
        *[a for h in sorted(fleet.snapshots) for a in ("--snapshot", str(fleet.snapshots[h]))],
    )
    through = gpuplan(*common, "--prometheus", fleet.url)
    assert direct.returncode in (0, 1), direct.stderr
    assert through.returncode == direct.returncode, through.stderr
    # taken_at is dgx-7's sample time through Prometheus (the snapshots test pins the rest).
    drop = ("taken_at", "ignored_hosts")
    plan = json.loads(through.stdout)
    assert plan["optimal"] is True
    assert plan["ignored_hosts"] == ["fv-ml3"]  # scraped, but not in this catalogue
    assert _without_sources(plan, drop) == _without_sources(json.loads(direct.stdout), drop)
    assert {c["host"] for c in plan["cards"]} == {"dgx-7", "fv-ml1", "fv-ml2"}


def _without_sources(data: Any, also: tuple[str, ...] = ()) -> Any:
    """Drop keys that name where the cards were read from and when the command ran."""
    skip = ("source", "sources", "elapsed_s", "solve_s", "solver_seconds", "decided_at", *also)
    if isinstance(data, dict):
        return {k: _without_sources(v, also) for k, v in data.items() if k not in skip}
    if isinstance(data, list):
        return [_without_sources(v, also) for v in data]
    return data


def test_ledger_view_through_prometheus_equals_the_files(
    fleet: Fleet2, gpuplan: Callable[..., Ran]
) -> None:
    files = [a for h in sorted(fleet.snapshots) for a in ("--snapshot", str(fleet.snapshots[h]))]
    common = ["ledger", "--json", "--catalogue", str(fleet.catalogue)]
    direct = gpuplan(*common, *files)
    through = gpuplan(*common, "--prometheus", fleet.url)
    assert (direct.returncode, through.returncode) == (0, 0), through.stderr
    view = json.loads(through.stdout)
    assert [h["host"] for h in view["hosts"]] == ["dgx-7", "fv-ml1", "fv-ml2"]
    # Held, attributed, unexplained and plannable bytes: the same from either source; only the
    # foreign process's cmdline does not travel through Prometheus.
    assert view["hosts"][2]["foreign"][0]["cmdline"] is None
    drop = ("cmdline", "taken_at", "ignored_hosts")
    assert _without_sources(view, drop) == _without_sources(json.loads(direct.stdout), drop)
    # fv-ml3 is scraped by the same Prometheus but not in this catalogue: left out, and said so.
    assert view["ignored_hosts"] == ["fv-ml3"] and view["unusable_hosts"] == []
    assert "fv-ml3 is not in the catalogue: its cards are ignored" in through.stderr


def test_check_through_prometheus_matches_files_and_refuses_stale_hosts(
    fleet: Fleet2, gpuplan: Callable[..., Ran]
) -> None:
    base = [
        "check",
        "vllm-voices",
        "--gpu",
        "0",
        "--host",
        "fv-ml1",
        "--json",
        "--catalogue",
        str(fleet.catalogue_with_stale),
    ]
    direct = gpuplan(*base, "--snapshot", str(fleet.snapshots["fv-ml1"]))
    through = gpuplan(*base, "--prometheus", fleet.url)
    assert direct.returncode in (0, 1), direct.stderr
    assert through.returncode == direct.returncode, through.stderr
    assert json.loads(through.stdout)["verdict"] == json.loads(direct.stdout)["verdict"]

    stale = gpuplan(
        "check",
        "probe",
        "--gpu",
        "0",
        "--catalogue",
        str(fleet.catalogue_with_stale),
        "--prometheus",
        fleet.url,
    )
    assert stale.returncode == 3, stale.stderr
    assert "fv-ml3: stale" in stale.stderr


def test_unreachable_prometheus_exits_3(fleet: Fleet2, gpuplan: Callable[..., Ran]) -> None:
    done = gpuplan(
        "check",
        "vllm-voices",
        "--gpu",
        "0",
        "--catalogue",
        str(fleet.catalogue),
        "--prometheus",
        "http://127.0.0.1:9",
    )
    assert done.returncode == 3
    assert "Prometheus at http://127.0.0.1:9 is unreachable" in done.stderr


def test_snapshot_records_the_fleet_from_prometheus_into_the_ledger(
    fleet: Fleet2, gpuplan: Callable[..., Ran], tmp_path: Path
) -> None:
    from inventory.ledger.store import open_ledger

    db = tmp_path / "fleet.sqlite"
    common = ["snapshot", "--catalogue", str(fleet.catalogue), "--prometheus", fleet.url]
    first = gpuplan(*common, "--ledger", str(db))
    assert first.returncode == 0, first.stderr
    with open_ledger(db, readonly=True) as ledger:
        stored = {s.host: s for s in ledger.latest_per_host()}
    # fv-ml3 serves a recorded, old snapshot: stale for planning, still a true reading to keep.
    assert set(stored) == {"dgx-7", "fv-ml1", "fv-ml2", "fv-ml3"}
    catalogue = load_catalogue(fleet.catalogue)
    direct = attribute(load_snapshot(fleet.snapshots["fv-ml1"]), catalogue)
    assert stored["fv-ml1"] == comparable(direct)
    # Same samples again: the ledger keeps one snapshot per host and second, nothing twice.
    # The exporters' hosts carry their snapshot files' times; dgx-7's time is its last scrape's
    # (every second), so a scrape between the two reads may add one, and only one, of dgx-7.
    again = gpuplan(*common, "--ledger", str(db))
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already in ledger") >= 3
    added = again.stdout.count("stored in ledger")
    with open_ledger(db, readonly=True) as ledger:
        per_host = {h: [s.taken_at for s in ledger.snapshots(h)] for h in stored}
    assert added <= 1
    assert {h: len(times) for h, times in per_host.items()} == {
        "dgx-7": 1 + added,
        "fv-ml1": 1,
        "fv-ml2": 1,
        "fv-ml3": 1,
    }
    assert len(set(per_host["dgx-7"])) == len(per_host["dgx-7"])
    refused = gpuplan(*common, "--interval", "5")
    assert refused.returncode == 2
    assert "--prometheus reads a whole fleet once" in refused.stderr


def test_holds_from_a_ledger_beside_cards_from_prometheus(
    fleet: Fleet2, gpuplan: Callable[..., Ran], tmp_path: Path
) -> None:
    # Cards from Prometheus, holds from --ledger (DESIGN.md "Whole deploys"): fv-ml1's card 1
    # has 5.32 GiB of room; a 3 GiB approval there leaves 2.32 GiB for the next check.
    db = tmp_path / "deploys.sqlite"
    for name in ("tts-a", "tts-b"):
        (tmp_path / f"{name}.yaml").write_text(f"name: {name}\nhost: fv-ml1\nresident: 3 GiB\n")
    common = ["--gpu", "1", "--catalogue", str(fleet.catalogue), "--prometheus", fleet.url]
    first = gpuplan("check", "--add", str(tmp_path / "tts-a.yaml"), *common, "--ledger", str(db))
    assert first.returncode == 0, first.stdout + first.stderr
    second = gpuplan(
        "check", "--add", str(tmp_path / "tts-b.yaml"), *common, "--ledger", str(db), "--json"
    )
    assert second.returncode == 1, second.stdout + second.stderr
    reasons = json.loads(second.stdout)["reasons"]
    assert [r["rule"] for r in reasons] == ["hold"]
    assert "approved for tts-a" in reasons[0]["text"]
