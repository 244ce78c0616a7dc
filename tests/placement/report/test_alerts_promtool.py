"""The alert rules as Prometheus runs them: `promtool check rules`, and `promtool test rules` on
what `gpuplan exporter --textfile` writes for scenario snapshots of fv-ml1.

Each scenario changes the recorded fv-ml1 snapshot the way the incident would, exports it through
the exporter's own code (a recorded poll attributed by the catalogue, the textfile writer), turns
the textfile's samples into promtool input series (with the `job` and `instance` a scrape adds),
and expects, for every one of the seven alerts, exactly the alerts in
data/alerts/expected.yaml: its alert with its labels and annotations, and nothing else.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from inventory.prometheus.exporter import recorded_poll, write_textfile
from inventory.prometheus.metrics import SnapshotCollector, registry_for
from inventory.snapshot import Snapshot
from placement.fit.engines import gate_rule, requested_bytes
from placement.report.alerts import ALERTS, build_alerts, render_rules
from seats.loader import load_catalogue
from seats.model import Catalogue
from seats.units import GiB, MiB
from tests.conftest import FV_ML1_CATALOGUE, FV_ML1_SNAPSHOT

DATA = Path(__file__).parent / "data" / "alerts"
FLEET = DATA / "fleet-3.yaml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed (Debian: apt-get install prometheus); "
    "the rule files are not checked by Prometheus here",
)
STEPS = 20  # one sample a minute for 20 minutes; alerts are read at 10m, past `for: 5m`
EVAL_TIME = "10m"


# --- scenarios: the recorded fv-ml1 snapshot, changed as each incident would change it ------

Json = dict[str, Any]


def _card(snapshot: Json, index: int) -> Json:
    card: Json = snapshot["cards"][index]
    return card


def _take(card: Json, nbytes: int) -> None:
    """Card memory goes from free to used (negative: back)."""
    card["used_bytes"] += nbytes
    card["free_bytes"] -= nbytes


def healthy(s: Json) -> None:
    """fv-ml1 as recorded: every seat at its resident, card 3 empty."""


def notebook_on_card_3(s: Json) -> None:
    """A notebook takes 3 GiB of the card held whole for flash-next."""
    card = _card(s, 3)
    card["processes"].append(
        {"pid": 7001, "used_bytes": 3 * GiB, "cmdline": "python3 -m jupyter notebook --port 8888"}
    )
    _take(card, 3 * GiB)


def card_below_margin(s: Json) -> None:
    """Card 2 fills to 96 MiB free with memory no listed process holds."""
    card = _card(s, 2)
    _take(card, card["free_bytes"] - 96 * MiB)


def embed_drifts_up(s: Json) -> None:
    """embed grows 3 GiB past its declared resident (the issue's week)."""
    card = _card(s, 1)
    card["processes"][1]["used_bytes"] += 3 * GiB
    _take(card, 3 * GiB)


def gen_small_drifts_down(s: Json) -> None:
    """gen-small holds 4 GiB less than declared."""
    card = _card(s, 0)
    card["processes"][1]["used_bytes"] -= 4 * GiB
    _take(card, -4 * GiB)


def voices_gone(s: Json) -> None:
    """vllm-voices' process is gone; its card keeps the room free."""
    card = _card(s, 0)
    gone = card["processes"].pop(3)
    _take(card, -gone["used_bytes"])


def card_1_lost(s: Json) -> None:
    """Card 1 (chat-large and embed) falls off the bus: NVML says GpuIsLost."""
    index, uuid = _card(s, 1)["index"], _card(s, 1)["uuid"]
    s["cards"][1] = {"index": index, "uuid": uuid, "error": "GpuIsLost"}


def _poll_fails() -> Snapshot:
    raise RuntimeError("NVML: driver/library version mismatch")


# name → (how the snapshot changes; None: the poll fails; "absent": no series at all)
SCENARIOS: dict[str, Callable[[Json], None] | str | None] = {
    "healthy": healthy,
    "notebook-on-card-3": notebook_on_card_3,
    "card-below-margin": card_below_margin,
    "seat-drifts-up": embed_drifts_up,
    "seat-drifts-down": gen_small_drifts_down,
    "seat-down": voices_gone,
    "poll-fails": None,
    "no-series": "absent",
    "card-lost": card_1_lost,
}


def exported_text(change: Callable[[Json], None] | None, tmp_path: Path) -> str:
    """What `gpuplan exporter --from SNAPSHOT --catalogue … --textfile DIR` writes for the scenario."""
    catalogue = load_catalogue(FV_ML1_CATALOGUE)
    if change is None:
        collector = SnapshotCollector("fv-ml1", _poll_fails)
    else:
        snapshot = json.loads(FV_ML1_SNAPSHOT.read_text())
        change(snapshot)
        recorded = tmp_path / "scenario.snapshot.json"
        recorded.write_text(json.dumps(snapshot))
        poll = recorded_poll(str(recorded), host=None, catalogue=catalogue)
        collector = SnapshotCollector("fv-ml1", poll)
    folder = tmp_path / "textfile"
    folder.mkdir()
    return write_textfile(registry_for(collector), folder).read_text()


def input_series(text: str, *, job: str = "gpuplan", instance: str = "fv-ml1:9835") -> list[Json]:
    """The textfile's samples as promtool input series, constant over STEPS minutes."""
    series = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = {**sample.labels, "job": job, "instance": instance}
            inner = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()))
            series.append(
                {"series": f"{sample.name}{{{inner}}}", "values": f"{sample.value!r}x{STEPS}"}
            )
    return series


def expected_alerts() -> dict[str, list[Json]]:
    data: dict[str, list[Json]] = yaml.safe_load((DATA / "expected.yaml").read_text())
    return data


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def rule_file(catalogue: Catalogue, folder: Path) -> Path:
    path = folder / "gpuplan-alerts.yml"
    path.write_text(render_rules(build_alerts(catalogue), source="test"))
    return path


# --- promtool check rules ---------------------------------------------------------------


@needs_promtool
@pytest.mark.parametrize("catalogue", [FV_ML1_CATALOGUE, FLEET], ids=["fv-ml1", "fleet-3"])
def test_promtool_accepts_the_rule_file(catalogue: Path, tmp_path: Path) -> None:
    built = build_alerts(load_catalogue(catalogue))
    path = rule_file(load_catalogue(catalogue), tmp_path)
    checked = promtool("check", "rules", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(built.rules)} rules found" in checked.stdout


# --- promtool test rules ----------------------------------------------------------------


@pytest.mark.slow
@needs_promtool
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_each_scenario_fires_its_alert_and_nothing_else(scenario: str, tmp_path: Path) -> None:
    change = SCENARIOS[scenario]
    series = [] if isinstance(change, str) else input_series(exported_text(change, tmp_path))
    expected = expected_alerts()[scenario]
    fired = {alert["alertname"] for alert in expected}
    assert fired <= set(ALERTS)
    rules = rule_file(load_catalogue(FV_ML1_CATALOGUE), tmp_path)
    cases = [
        {
            "eval_time": EVAL_TIME,
            "alertname": name,
            "exp_alerts": [
                {k: v for k, v in alert.items() if k != "alertname"}
                for alert in expected
                if alert["alertname"] == name
            ],
        }
        for name in ALERTS
    ]
    test = {
        "rule_files": [rules.name],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": cases}],
    }
    test_file = tmp_path / "test.yml"
    test_file.write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 20))
    result = promtool("test", "rules", test_file)
    assert result.returncode == 0, f"{scenario}:\n{result.stdout}{result.stderr}"


@needs_promtool
def test_the_scenarios_are_what_the_exporter_writes(tmp_path: Path) -> None:
    # The healthy input is the recorded snapshot itself, attributed: every seat present.
    text = exported_text(healthy, tmp_path)
    seats = {
        s.labels["seat"]
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "gpuplan_process_used_bytes"
    }
    assert seats == {s.name for s in load_catalogue(FV_ML1_CATALOGUE).seats if s.state == "running"}
    # As recorded, only gen-small's restart: its gate on card 0, in fit's exact arithmetic.
    assert [a["exp_labels"]["seat"] for a in expected_alerts()["healthy"]] == ["gen-small"]
    catalogue = load_catalogue(FV_ML1_CATALOGUE)
    card = json.loads(FV_ML1_SNAPSHOT.read_text())["cards"][0]
    gen_small = next(s for s in catalogue.seats if s.name == "gen-small")
    util = gate_rule(gen_small.engine, propose=False).util
    assert util is not None
    request = requested_bytes(util, card["total_bytes"] - card["reserved_bytes"])
    own = next(p["used_bytes"] for p in card["processes"] if "--port 8023" in p["cmdline"])
    left = card["free_bytes"] + own - catalogue.hosts["fv-ml1"].cuda_context_bytes
    assert (request, left, request - left) == (48947024364, 39413874688, 9533149676)
    assert (
        f"{(request - left) / GiB:.4g}GiB"
        in expected_alerts()["healthy"][0]["exp_annotations"]["summary"]
    )


ODD = """
hosts:
  "gpu.box-1": {cards: 2, margin: 1 GiB}
reserves:
  - {name: 'hold "a"', host: "gpu.box-1", gpu: 1, bytes: 10 GiB, for: ['we"ird {{x}} $1 .*']}
seats:
  - {name: 'we"ird {{x}} $1 .*', host: "gpu.box-1", gpus: [0], resident: 1 GiB, state: running,
     match: 'x', engine: {kind: vllm}}
  - {name: "it's", host: "gpu.box-1", gpus: [0, 1], resident: 2 GiB, state: running, match: 'y'}
"""


@needs_promtool
def test_names_with_quotes_braces_and_dollars_stay_literal(tmp_path: Path) -> None:
    source = tmp_path / "odd.yaml"
    source.write_text(ODD)
    catalogue = load_catalogue(source)
    built = build_alerts(catalogue)
    path = rule_file(catalogue, tmp_path)
    checked = promtool("check", "rules", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    read = yaml.safe_load(path.read_text())["groups"][0]["rules"]
    assert [r["expr"] for r in read] == [r.expr for r in built.rules]
    assert read[0]["labels"]["reserve"] == 'hold "a"'
    # The reserve's own seat, matched as a regex of its escaped name: that name, nothing else.
    own = next(s for s in built.rules[0].selectors if s.metric == "gpuplan_process_used_bytes")
    series = {"__name__": own.metric, "host": "gpu.box-1", "gpu": "1"}
    assert own.selects({**series, "seat": 'we"ird {{x}} $1 .*'})
    assert not own.selects({**series, "seat": 'we"ird {{x}} $1 xyz'})
    assert '"seat", "we\\"ird {{x}} $$1 .*", "", ""' in read[3]["expr"]  # label_replace
