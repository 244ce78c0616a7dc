"""End to end, a fleet is the catalogue's hosts: a real Prometheus whose scrape jobs rename and
drop host labels as real ones do, read by `gpuplan plan` and `ledger`.

- fv-ml1's exporter is scraped by a job that sets its own `host` target label, so Prometheus
  keeps gpuplan's as `exported_host`;
- dgx-7 runs dcgm-exporter's main branch (`hostname`, no DCGM_FI_DEV_FB_TOTAL): used + free +
  reserved in whole MiB is 1 MiB short of its catalogue card_total;
- a dcgm-exporter started with --no-hostname: only its target address names it, and that is
  no catalogue host;
- fv-ml4 is in the catalogue and scraped by nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from inventory.prometheus.reader import read_fleet
from inventory.snapshot import load_snapshot, save_snapshot
from placement.cli.main import main
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
# Whole MiB: 0 + 143,155 + 615 = 143,770, one short of the H200's 143,771 MiB (docs/facts.md §1).
DGX = {"USED": 0, "FREE": 143155, "RESERVED": 615}


def dcgm_main_text(hostname: str | None) -> bytes:
    """dcgm-exporter main's exposition (labels as its render template writes them)."""
    lines = []
    for field, value in DGX.items():
        name = f"DCGM_FI_DEV_FB_{field}"
        lines += [
            f"# HELP {name} Framebuffer memory {field.lower()} (in MiB).",
            f"# TYPE {name} gauge",
        ]
        host = f',hostname="{hostname}"' if hostname else ""
        labels = (
            'gpu="0",UUID="GPU-dgx-0",pci_bus_id="00000000:18:00.0",device="nvidia0",'
            f'modelName="NVIDIA H200"{host},DCGM_FI_DRIVER_VERSION="580.159.04"'
        )
        lines.append(f"{name}{{{labels}}} {value}")
    return ("\n".join(lines) + "\n").encode()


@dataclass
class Setup:
    url: str
    catalogue: Path
    unnamed: str  # the --no-hostname exporter's host: its target address without port


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    binary = install_prometheus()
    if binary is None:
        pytest.skip("Debian's prometheus is not installed and could not be installed")
    folder = tmp_path_factory.mktemp("e2e-fleet-hosts")
    now = datetime.now(UTC).replace(microsecond=0)
    snapshot = folder / "fv-ml1.json"
    save_snapshot(load_snapshot(FV_ML1_SNAPSHOT).model_copy(update={"taken_at": now}), snapshot)
    data = yaml.safe_load(FV_ML1_CATALOGUE.read_text())
    data["hosts"]["dgx-7"] = {"cards": 1, "card_total": "143771 MiB", "cuda_context": "1277 MiB"}
    data["hosts"]["fv-ml4"] = {"cards": 4}
    data["seats"].append(
        {"name": "probe", "state": "planned", "host": "fv-ml4", "resident": "1 GiB"}
    )
    catalogue = folder / "fleet.yaml"
    catalogue.write_text(yaml.safe_dump(data))
    processes = Processes()
    named, unnamed = StaticMetrics(dcgm_main_text("dgx-7")), StaticMetrics(dcgm_main_text(None))
    try:
        port = exporter_port(start_exporter(processes, snapshot, catalogue=catalogue))
        jobs = (
            "  - job_name: gpuplan\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{port}'], labels: {{host: rack-4}}}}]\n"
            "  - job_name: dcgm\n"
            f"    static_configs: [{{targets: ['{named.target}', '{unnamed.target}']}}]\n"
        )
        url = start_prometheus(processes, binary, [], folder / "prom", scrape_configs=jobs)

        def scraped() -> bool:
            got = read_fleet(url, now=datetime.now(UTC), max_age=timedelta(days=1))
            return {s.host for s in got.snapshots} == {"fv-ml1", "dgx-7", "127.0.0.1"}

        wait_until(scraped, 25, "Prometheus to scrape the exporter and both dcgm-exporters")
        yield Setup(url, catalogue, "127.0.0.1")
    finally:
        processes.stop_all()
        named.close()
        unnamed.close()


@pytest.fixture
def gpuplan(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_plan_uses_only_the_catalogue_hosts(
    setup: Setup, gpuplan: Callable[..., tuple[int, str, str]]
) -> None:
    common = ["plan", "--catalogue", str(setup.catalogue), "--prometheus", setup.url]
    code, out, err = gpuplan(*common, "--json")
    assert code == 3, err  # probe is pinned to fv-ml4, which nothing scrapes
    plan = json.loads(out)
    assert plan["verdict"] == "unknown"
    assert plan["ignored_hosts"] == [setup.unnamed]
    (absent,) = plan["unusable_hosts"]
    assert (absent["host"], absent["kind"]) == ("fv-ml4", "absent")
    assert "hosts outside the catalogue: 127.0.0.1" in absent["reason"]
    # fv-ml1 through exported_host, dgx-7 through `hostname`: both planned on, nothing else.
    assert {c["host"] for c in plan["cards"]} == {"fv-ml1", "dgx-7"}
    verdicts = {s["seat"]: s for s in plan["seats"]}
    assert verdicts["probe"]["verdict"] == "unknown"
    assert verdicts["flash-next"]["verdict"] == "pass"
    assert verdicts["flash-next"]["host"] == "fv-ml1"
    # dgx-7's summed total is 1 MiB short of card_total: accepted, not "another machine".
    assert "another machine" not in err
    code, out, _ = gpuplan(*common)
    assert code == 3
    assert out.startswith(
        "unusable host fv-ml4 (absent): absent: no gpuplan_* or DCGM_FI_DEV_FB_FREE"
    )
    assert "ignored (not in the catalogue): 127.0.0.1" in out
    assert "UNKNOWN  probe: cannot be judged" in out


def test_ledger_shows_dgx_7_at_its_catalogue_total(
    setup: Setup, gpuplan: Callable[..., tuple[int, str, str]]
) -> None:
    code, out, err = gpuplan(
        "ledger", "--json", "--catalogue", str(setup.catalogue), "--prometheus", setup.url
    )
    assert code == 0, err
    view = json.loads(out)
    assert [h["host"] for h in view["hosts"]] == ["dgx-7", "fv-ml1"]
    (card,) = view["hosts"][0]["cards"]
    assert card["total_bytes"] == 143771 * MIB
    assert (card["reserved_bytes"], card["free_bytes"]) == (615 * MIB, 143155 * MIB)
    assert view["ignored_hosts"] == ["127.0.0.1"]
    assert [u["host"] for u in view["unusable_hosts"]] == ["fv-ml4"]
