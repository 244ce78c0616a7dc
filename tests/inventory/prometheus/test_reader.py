"""Reading a fleet from Prometheus: building snapshots from query answers, and every fault.

Query answers are made from the exporter's own exposition (parsed as Prometheus parses it),
so the reader is tested against what the exporter really writes; HTTP faults go through a
local server that answers as Prometheus's API does. tests/e2e runs a real Prometheus.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client.parser import text_string_to_metric_families

from inventory.attribution import attribute
from inventory.prometheus import metrics as m
from inventory.prometheus import reader as p
from inventory.prometheus.metrics import Reading, render
from inventory.prometheus.reader import QueryResults, Sample, build_fleet, read_fleet
from inventory.snapshot import Card, Snapshot
from placement.cli.sources import SourceOptions, resolve_snapshots
from seats.errors import BadInputError, CannotDecideError
from seats.model import Catalogue

NOW = datetime(2026, 9, 16, 14, 2, 30, tzinfo=UTC)
MIB = 2**20


def prom_value(number: float) -> str:
    """A float as Prometheus's JSON API writes it (strconv 'f', -1)."""
    if number != number:
        return "NaN"
    return f"{number:.0f}" if number == int(number) else repr(number)


def exported(
    snapshot: Snapshot, *, at: float, instance: str = "10.0.0.1:9835", job: str = "gpuplan"
) -> list[Sample]:
    """The series Prometheus holds after scraping an exporter serving `snapshot` at time `at`."""
    text = render(Reading(snapshot.host, snapshot, 0.003)).decode()
    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = {"__name__": sample.name, **sample.labels, "instance": instance, "job": job}
            out.append(Sample(labels, prom_value(sample.value), at))
    return out


def times_of(samples: list[Sample]) -> list[Sample]:
    """What `timestamp(gpuplan_poll_success)` answers: the sample time, name dropped."""
    return [
        Sample(
            {k: v for k, v in s.labels.items() if k != "__name__"},
            prom_value(s.at),
            NOW.timestamp(),
        )
        for s in samples
        if s.name == m.POLL_SUCCESS
    ]


def fleet_of(*snapshots: Snapshot, at: float | None = None) -> QueryResults:
    samples: list[Sample] = []
    for index, snapshot in enumerate(snapshots):
        samples += exported(snapshot, at=at or NOW.timestamp(), instance=f"10.0.0.{index}:9835")
    return QueryResults(gpuplan=samples, gpuplan_times=times_of(samples))


def build(results: QueryResults, **kwargs: object) -> p.Fleet:
    options: dict[str, object] = {"now": NOW, "max_age": timedelta(minutes=15), **kwargs}
    return build_fleet(results, **options)  # type: ignore[arg-type]


def without_cmdlines(snapshot: Snapshot) -> Snapshot:
    """Prometheus carries no cmdlines; processes come back ordered by pid."""
    cards = tuple(
        card.model_copy(
            update={
                "processes": tuple(
                    sorted(
                        (proc.model_copy(update={"cmdline": None}) for proc in card.processes),
                        key=lambda proc: proc.pid,
                    )
                )
            }
        )
        for card in snapshot.cards
    )
    return snapshot.model_copy(update={"cards": cards})


# Building snapshots from gpuplan's own metrics.


def test_round_trip_equals_the_snapshot(fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot) -> None:
    snapshot = attribute(fv_ml1_snapshot, fv_ml1)
    fleet = build(fleet_of(snapshot), expected_cards={"fv-ml1": 4})
    assert fleet.problems == () and fleet.warnings == ()
    (got,) = fleet.snapshots
    # Every byte figure, uuid, name, driver, seat and the recorded taken_at come back exactly.
    assert got == without_cmdlines(snapshot)
    assert got.card(0).processes[0].seat == "cyberprev"


def test_unattributed_processes_come_back_without_seat(fv_ml1_snapshot: Snapshot) -> None:
    (got,) = build(fleet_of(fv_ml1_snapshot)).snapshots
    assert {proc.seat for card in got.cards for proc in card.processes} == {None}


def test_taken_at_is_the_scrape_time_when_older_than_the_reading(fv_ml1_snapshot: Snapshot) -> None:
    # A live exporter reads at scrape time; Prometheus's sample time may be a little earlier.
    scraped = NOW - timedelta(seconds=20)
    live = fv_ml1_snapshot.model_copy(update={"taken_at": NOW})
    (got,) = build(fleet_of(live, at=scraped.timestamp())).snapshots
    assert got.taken_at == scraped


def test_old_recorded_snapshot_makes_the_host_stale(fv_ml1_snapshot: Snapshot) -> None:
    recorded = fv_ml1_snapshot.model_copy(update={"taken_at": NOW - timedelta(hours=2)})
    fleet = build(fleet_of(recorded))
    assert fleet.snapshots == ()
    assert [s.host for s in fleet.stale] == ["fv-ml1"]
    (problem,) = fleet.problems
    assert problem.kind == "stale"
    assert "7200 s ago" in problem.text and "--max-age 900 s" in problem.text


def test_v1_only_card_comes_back_with_null_reserve(fv_ml1_snapshot: Snapshot) -> None:
    card = fv_ml1_snapshot.card(1).model_copy(update={"reserved_bytes": None, "processes": ()})
    snapshot = fv_ml1_snapshot.model_copy(update={"cards": (fv_ml1_snapshot.card(0), card)})
    fleet = build(fleet_of(snapshot))
    (got,) = fleet.snapshots
    assert got.card(1).reserved_bytes is None
    assert got.card(1).used_bytes == card.used_bytes
    assert any("driver reserve unknown" in w for w in fleet.warnings)


def test_card_in_error_comes_back_in_error(fv_ml1_snapshot: Snapshot) -> None:
    lost = Card(index=1, uuid="GPU-lost", error="GpuIsLost")
    snapshot = fv_ml1_snapshot.model_copy(update={"cards": (fv_ml1_snapshot.card(0), lost)})
    (got,) = build(fleet_of(snapshot)).snapshots
    assert got.card(1) == lost


def test_two_hosts_are_two_snapshots(fv_ml1_snapshot: Snapshot) -> None:
    other = fv_ml1_snapshot.model_copy(update={"host": "fv-ml2"})
    fleet = build(fleet_of(fv_ml1_snapshot, other))
    assert [s.host for s in fleet.snapshots] == ["fv-ml1", "fv-ml2"]


# Faults: each names the host and the metric, and keeps the host out.


def drop(results: QueryResults, name: str, gpu: str | None = None) -> QueryResults:
    kept = [
        s
        for s in results.gpuplan
        if not (s.name == name and (gpu is None or s.labels.get("gpu") == gpu))
    ]
    return QueryResults(gpuplan=kept, gpuplan_times=results.gpuplan_times)


def test_missing_cards_make_the_host_incomplete(fv_ml1_snapshot: Snapshot) -> None:
    results = fleet_of(fv_ml1_snapshot)
    kept = [s for s in results.gpuplan if s.labels.get("gpu") not in ("2", "3")]
    fleet = build(QueryResults(gpuplan=kept, gpuplan_times=results.gpuplan_times))
    assert fleet.snapshots == ()
    (problem,) = fleet.problems
    assert problem.kind == "incomplete"
    assert problem.text == "fv-ml1: has 2 of 4 cards: no gpuplan_card_error series for gpu 2, 3"


def test_catalogue_card_count_is_used_when_the_exporter_does_not_say(
    fv_ml1_snapshot: Snapshot,
) -> None:
    results = drop(fleet_of(fv_ml1_snapshot), m.HOST_CARDS)
    kept = [s for s in results.gpuplan if s.labels.get("gpu") != "3"]
    results = QueryResults(gpuplan=kept, gpuplan_times=results.gpuplan_times)
    assert build(results).problems == ()  # nothing says there were 4
    (problem,) = build(results, expected_cards={"fv-ml1": 4}).problems
    assert "has 3 of 4 cards" in problem.text


def test_missing_figure_makes_the_host_incomplete(fv_ml1_snapshot: Snapshot) -> None:
    fleet = build(drop(fleet_of(fv_ml1_snapshot), m.CARD_FREE, gpu="1"))
    (problem,) = fleet.problems
    assert problem.text == "fv-ml1: gpu 1 lacks gpuplan_card_free_bytes"


def test_missing_reserve_on_a_v2_card_is_incomplete(fv_ml1_snapshot: Snapshot) -> None:
    (problem,) = build(drop(fleet_of(fv_ml1_snapshot), m.CARD_RESERVED, gpu="0")).problems
    assert problem.text == "fv-ml1: gpu 0 lacks gpuplan_card_reserved_bytes"


def test_two_exporters_claiming_one_host_collide(fv_ml1_snapshot: Snapshot) -> None:
    first = exported(fv_ml1_snapshot, at=NOW.timestamp(), instance="10.0.0.1:9835")
    second = exported(fv_ml1_snapshot, at=NOW.timestamp(), instance="10.0.0.2:9835")
    fleet = build(QueryResults(gpuplan=first + second, gpuplan_times=times_of(first + second)))
    (problem,) = fleet.problems
    assert problem.kind == "collision"
    assert problem.text == (
        "fv-ml1: gpuplan_poll_success comes from two series that differ in instance "
        "'10.0.0.1:9835' vs '10.0.0.2:9835': two exporters answer for one host; give each its "
        "own host label (or pick another with --host-label)"
    )


def test_failed_poll_keeps_the_host_out() -> None:
    text = render(Reading("fv-ml1", None, 0.01, "NVML gone")).decode()
    samples = [
        Sample(
            {"__name__": s.name, **s.labels, "instance": "a:1", "job": "j"},
            prom_value(s.value),
            1.0,
        )
        for f in text_string_to_metric_families(text)
        for s in f.samples
    ]
    (problem,) = build(QueryResults(gpuplan=samples, gpuplan_times=times_of(samples))).problems
    assert problem.kind == "poll"
    assert "gpuplan_poll_success 0" in problem.text


def test_non_integer_bytes_are_refused(fv_ml1_snapshot: Snapshot) -> None:
    results = fleet_of(fv_ml1_snapshot)
    bent = [
        Sample(s.labels, "1.5e3" if s.name == m.CARD_FREE else s.value, s.at)
        for s in results.gpuplan
    ]
    bent = [Sample(s.labels, "1500.5", s.at) if s.name == m.CARD_USED else s for s in bent]
    (problem,) = build(QueryResults(gpuplan=bent, gpuplan_times=results.gpuplan_times)).problems
    assert problem.kind == "units"
    assert "gpuplan_card_used_bytes" in problem.text and "1500.5" in problem.text


def test_catalogue_host_without_series_is_absent(fv_ml1_snapshot: Snapshot) -> None:
    fleet = build(fleet_of(fv_ml1_snapshot), expected_cards={"fv-ml1": 4, "fv-ml2": 2})
    assert [s.host for s in fleet.snapshots] == ["fv-ml1"]
    (problem,) = fleet.problems
    assert (problem.host, problem.kind) == ("fv-ml2", "absent")


# DCGM exporter hosts.


def dcgm(
    host: str, cards: Mapping[int, Mapping[str, str]], at: float | None = None
) -> QueryResults:
    """Series as dcgm-exporter names them: FB figures in MiB, `Hostname`, `gpu`, `UUID`."""
    samples = []
    for gpu, figures in cards.items():
        for field, text in figures.items():
            labels = {
                "__name__": f"DCGM_FI_DEV_FB_{field}",
                "gpu": str(gpu),
                "UUID": f"GPU-dcgm-{gpu}",
                "modelName": "NVIDIA H200",
                "Hostname": host,
                "DCGM_FI_DRIVER_VERSION": "580.159.04",
                "instance": f"{host}:9400",
                "job": "dcgm",
            }
            samples.append(Sample(labels, text, at or NOW.timestamp()))
    times = [
        Sample({k: v for k, v in s.labels.items() if k != "__name__"}, prom_value(s.at), 0.0)
        for s in samples
        if s.name == p.DCGM_FREE
    ]
    return QueryResults(dcgm=samples, dcgm_times=times)


# The idle H200 in whole MiB, as nvidia-smi printed it on an NVIDIA H200 (driver 580.159.04):
# total 143,771, reserved 616, used 0, free 143,156. NVML's bytes (docs/facts.md §1): total
# 150,754,820,096 (143,771 MiB), reserve 644,939,776 (615.06 MiB), free 150,109,880,320
# (143,155.94 MiB). DCGM speaks whole MiB the same way.
H200_IDLE = {"USED": "0", "FREE": "143156", "RESERVED": "616"}


def test_dcgm_host_mib_become_exact_bytes() -> None:
    fleet = build(
        dcgm("dgx-7", {0: H200_IDLE, 1: {"USED": "20998", "FREE": "122158", "RESERVED": "616"}})
    )
    (got,) = fleet.snapshots
    assert got.host == "dgx-7" and got.driver == "580.159.04"
    card = got.card(0)
    # MiB → bytes is exact; what whole MiB lose is under 1 MiB per figure (either direction),
    # so the total (used + free + reserve) is within 2 MiB of NVML's.
    assert (card.used_bytes, card.free_bytes, card.reserved_bytes) == (0, 143156 * MIB, 616 * MIB)
    assert card.free_bytes is not None and card.reserved_bytes is not None
    assert abs(150_109_880_320 - card.free_bytes) < MIB
    assert abs(644_939_776 - card.reserved_bytes) < MIB
    assert card.total_bytes == 143772 * MIB
    assert abs(150_754_820_096 - (card.total_bytes or 0)) < 2 * MIB
    assert got.card(1).used_bytes == 20998 * MIB
    assert (card.uuid, card.name, card.processes) == ("GPU-dcgm-0", "NVIDIA H200", ())
    assert any(
        "dgx-7: read from DCGM exporter" in w and "no per-process data" in w for w in fleet.warnings
    )


def test_dcgm_total_is_used_when_exported() -> None:
    fleet = build(dcgm("dgx-7", {0: {**H200_IDLE, "TOTAL": "143771"}}))
    assert fleet.snapshots[0].card(0).total_bytes == 150_754_820_096  # NVML's, to the byte


def test_dcgm_without_reserve_says_the_reserve_is_unknown() -> None:
    # dcgm-exporter's used is NVML v2's (the reserve excluded): without _RESERVED the reserve is
    # simply unknown, and used + free is short of the card by it.
    fleet = build(dcgm("dgx-7", {0: {"USED": "0", "FREE": "143156"}}))
    card = fleet.snapshots[0].card(0)
    assert card.reserved_bytes is None
    assert card.total_bytes == 143156 * MIB
    (note,) = [w for w in fleet.warnings if p.DCGM_RESERVED in w]
    assert note.startswith(f"dgx-7: no {p.DCGM_RESERVED} series, so the driver reserve is unknown")
    assert "used + free, which leaves out the unknown reserve" in note
    assert not any("used includes" in w for w in fleet.warnings)


def test_dcgm_without_reserve_takes_the_catalogue_total() -> None:
    fleet = build(
        dcgm("dgx-7", {0: {"USED": "0", "FREE": "143156"}}),
        card_totals={"dgx-7": 150_754_820_096},
    )
    card = fleet.snapshots[0].card(0)
    assert (card.total_bytes, card.reserved_bytes) == (150_754_820_096, None)
    # The reserve stays unknown: the CUDA total is the whole card (the stricter for gates).
    assert card.cuda_total_bytes == 150_754_820_096
    assert any("NVML total taken from hosts.dgx-7.card_total" in w for w in fleet.warnings)


# Whole MiB as DCGM rounds them: on an L40S used + free + reserved came 1 MiB short of the
# 46,068 MiB card (the figures); within 4 MiB the catalogue's card_total is the total.
L40S_CARD_TOTAL = 46_068 * MIB
L40S = {"USED": "0", "FREE": "45453", "RESERVED": "614"}


def test_dcgm_sum_within_4_mib_of_card_total_is_the_card() -> None:
    assert not build(dcgm("l40s-1", {0: L40S})).problems
    fleet = build(dcgm("l40s-1", {0: L40S}), card_totals={"l40s-1": L40S_CARD_TOTAL})
    card = fleet.snapshots[0].card(0)
    assert card.total_bytes == L40S_CARD_TOTAL
    assert (card.used_bytes, card.free_bytes, card.reserved_bytes) == (0, 45453 * MIB, 614 * MIB)


@pytest.mark.parametrize(
    ("offset_mib", "accepted"), [(-4, True), (4, True), (5, False), (-5, False)]
)
def test_dcgm_total_tolerance_is_4_mib(offset_mib: int, accepted: bool) -> None:
    summed = 46_067 * MIB
    fleet = build(dcgm("l40s-1", {0: L40S}), card_totals={"l40s-1": summed + offset_mib * MIB})
    total = fleet.snapshots[0].card(0).total_bytes
    assert total == (summed + offset_mib * MIB if accepted else summed)


def test_dcgm_values_in_bytes_are_refused() -> None:
    fleet = build(dcgm("dgx-7", {0: {"USED": "0", "FREE": "150109880320", "RESERVED": "615"}}))
    (problem,) = fleet.problems
    assert problem.kind == "units"
    assert problem.text.startswith('dgx-7: DCGM_FI_DEV_FB_FREE{gpu="0"} = 150109880320')
    assert "sending bytes" in problem.text


def test_dcgm_fractional_mib_are_refused() -> None:
    (problem,) = build(dcgm("dgx-7", {0: {"USED": "0.5", "FREE": "10", "RESERVED": "1"}})).problems
    assert problem.kind == "units" and "DCGM_FI_DEV_FB_USED" in problem.text


def test_dcgm_card_missing_a_metric_is_incomplete() -> None:
    fleet = build(dcgm("dgx-7", {0: H200_IDLE, 1: {"USED": "0", "RESERVED": "616"}}))
    (problem,) = fleet.problems
    assert problem.text == "dgx-7: gpu 1 lacks DCGM_FI_DEV_FB_FREE"


def test_dcgm_missing_card_against_catalogue_is_incomplete() -> None:
    fleet = build(dcgm("dgx-7", {0: H200_IDLE}), expected_cards={"dgx-7": 8})
    (problem,) = fleet.problems
    assert "no series for gpu 1, 2, 3, 4, 5, 6, 7" in problem.text


def test_gpuplan_metrics_win_over_dcgm_for_one_host(fv_ml1_snapshot: Snapshot) -> None:
    ours = fleet_of(fv_ml1_snapshot)
    theirs = dcgm("fv-ml1", {0: H200_IDLE})
    both = QueryResults(ours.gpuplan, ours.gpuplan_times, theirs.dcgm, theirs.dcgm_times)
    fleet = build(both)
    (got,) = fleet.snapshots
    assert got.card(0).total_bytes == fv_ml1_snapshot.card(0).total_bytes
    assert fleet.warnings == ()


# HTTP: a local server answering as Prometheus's API does.


class FakePrometheus:
    """Answers /api/v1/query from `answers` (query → (status, body)); records the queries."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, bytes]] = {}
        self.default: tuple[int, bytes] = (200, _vector([]))
        self.seen: list[dict[str, list[str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                params = urllib.parse.parse_qs(url.query)
                outer.seen.append(params)
                status, body = outer.answers.get(params.get("query", [""])[0], outer.default)
                if url.path != "/api/v1/query":
                    status, body = 404, b"404 page not found"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()

    def serve(self, results: QueryResults) -> None:
        for promql, samples in zip(
            p.QUERIES,
            (results.gpuplan, results.gpuplan_times, results.dcgm, results.dcgm_times),
            strict=True,
        ):
            self.answers[promql] = (200, _vector(samples))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _vector(samples: list[Sample]) -> bytes:
    result = [{"metric": dict(s.labels), "value": [s.at, s.value]} for s in samples]
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    ).encode()


@pytest.fixture
def fake_prometheus() -> Iterator[FakePrometheus]:
    server = FakePrometheus()
    try:
        yield server
    finally:
        server.close()


def read(url: str, **kwargs: object) -> p.Fleet:
    options: dict[str, object] = {"now": NOW, "max_age": timedelta(minutes=15), **kwargs}
    return read_fleet(url, **options)  # type: ignore[arg-type]


def test_read_fleet_over_http(fake_prometheus: FakePrometheus, fv_ml1_snapshot: Snapshot) -> None:
    fake_prometheus.serve(fleet_of(fv_ml1_snapshot))
    (got,) = read(fake_prometheus.url + "/").snapshots
    assert got == without_cmdlines(fv_ml1_snapshot)
    assert [q["query"][0] for q in fake_prometheus.seen] == list(p.QUERIES)
    # Every query is evaluated at the one `now`, so the answers agree with each other.
    assert {q["time"][0] for q in fake_prometheus.seen} == {f"{NOW.timestamp():.3f}"}


def test_unreachable_prometheus_exits_3() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(
        CannotDecideError, match=rf"Prometheus at http://127.0.0.1:{port} is unreachable"
    ):
        read(f"http://127.0.0.1:{port}")


def test_query_error_names_the_query(fake_prometheus: FakePrometheus) -> None:
    body = json.dumps({"status": "error", "errorType": "execution", "error": "query timed out"})
    fake_prometheus.answers[p.GPUPLAN_QUERY] = (503, body.encode())
    with pytest.raises(CannotDecideError) as caught:
        read(fake_prometheus.url)
    assert str(caught.value) == (
        f"Prometheus at {fake_prometheus.url}: query {p.GPUPLAN_QUERY} failed: execution: query timed out"
    )


def test_not_prometheus_exits_3(fake_prometheus: FakePrometheus) -> None:
    with pytest.raises(CannotDecideError, match="is not JSON"):
        read(fake_prometheus.url + "/grafana")


def test_bad_url_is_bad_input() -> None:
    with pytest.raises(BadInputError, match="expected a URL like http://prometheus:9090"):
        read("prometheus:9090")


# Through the shared source options.


def test_plan_source_leaves_stale_hosts_out(
    fake_prometheus: FakePrometheus,
    fv_ml1_snapshot: Snapshot,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fresh = fv_ml1_snapshot.model_copy(update={"host": "fv-ml2", "taken_at": NOW})
    old = fv_ml1_snapshot.model_copy(update={"taken_at": NOW - timedelta(hours=1)})
    fake_prometheus.serve(fleet_of(old, fresh))
    cards = resolve_snapshots(SourceOptions(prometheus=fake_prometheus.url), None, NOW)
    assert [s.host for s in cards.snapshots] == ["fv-ml2"]
    assert list(cards.unusable) == ["fv-ml1"]
    assert cards.origin("fv-ml2") == f"Prometheus {fake_prometheus.url}"
    assert "fv-ml1: stale" in capsys.readouterr().err


def test_a_needed_stale_host_exits_3(
    fake_prometheus: FakePrometheus, fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    old = fv_ml1_snapshot.model_copy(update={"taken_at": NOW - timedelta(hours=1)})
    fake_prometheus.serve(fleet_of(old))
    with pytest.raises(CannotDecideError, match=r"fv-ml1: stale.*cannot check on that host"):
        resolve_snapshots(
            SourceOptions(prometheus=fake_prometheus.url), fv_ml1, NOW, needed_host="fv-ml1"
        )


def test_a_needed_fresh_host_passes_other_hosts_by(
    fake_prometheus: FakePrometheus, fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    fresh = fv_ml1_snapshot.model_copy(update={"taken_at": NOW})
    old = fv_ml1_snapshot.model_copy(
        update={"host": "fv-ml2", "taken_at": NOW - timedelta(hours=1)}
    )
    fake_prometheus.serve(fleet_of(fresh, old))
    source = SourceOptions(prometheus=fake_prometheus.url)
    fleet = fv_ml1.model_copy(update={"hosts": {**fv_ml1.hosts, "fv-ml2": fv_ml1.hosts["fv-ml1"]}})
    cards = resolve_snapshots(source, fleet, NOW, needed_host="fv-ml1")
    assert [s.host for s in cards.snapshots] == ["fv-ml1"]
    assert list(cards.unusable) == ["fv-ml2"] and cards.unusable["fv-ml2"].kind == "stale"
    with pytest.raises(CannotDecideError, match=r"fv-ml2: stale"):
        resolve_snapshots(source, fleet, NOW, every_host_needed=True)
    # Outside the catalogue, the same stale host is ignored and blocks nothing.
    cards = resolve_snapshots(source, fv_ml1, NOW, every_host_needed=True)
    assert (cards.ignored, dict(cards.unusable)) == (("fv-ml2",), {})


def test_dcgm_bytes_reads_mib_up_to_the_largest_plausible_card() -> None:
    def reading(value: str) -> Sample:
        return Sample({"__name__": p.DCGM_FREE, "gpu": "3"}, value, 0.0)

    assert p._dcgm_bytes("dgx-7", 3, None) is None
    assert p._dcgm_bytes("dgx-7", 3, reading("NaN")) is None
    assert p._dcgm_bytes("dgx-7", 3, reading("143156")) == 143156 * MIB
    assert p._dcgm_bytes("dgx-7", 3, reading(str(2**24 - 1))) == (2**24 - 1) * MIB
    with pytest.raises(p._HostFault) as caught:
        p._dcgm_bytes("dgx-7", 3, reading(str(2**24)))
    assert caught.value.kind == "units"
    assert caught.value.text.startswith(f'{p.DCGM_FREE}{{gpu="3"}} = {2**24}: DCGM reports MiB')


# Host identity: DESIGN.md's label order, or --host-label.


def relabel(results: QueryResults, change: Mapping[str, str | None]) -> QueryResults:
    """Every series with labels renamed (`old: new`) or dropped (`old: None`), as a scrape job may."""

    def moved(sample: Sample) -> Sample:
        labels = dict(sample.labels)
        for old, new in change.items():
            value = labels.pop(old, None)
            if new is not None and value is not None:
                labels[new] = value
        return Sample(labels, sample.value, sample.at)

    return QueryResults(
        *(
            [moved(s) for s in answer]
            for answer in (results.gpuplan, results.gpuplan_times, results.dcgm, results.dcgm_times)
        )
    )


def test_exported_host_wins_over_a_scrape_targets_host(fv_ml1_snapshot: Snapshot) -> None:
    # The scrape job sets its own `host` target label: Prometheus keeps gpuplan's as exported_host.
    results = relabel(fleet_of(fv_ml1_snapshot), {"host": "exported_host"})
    results = QueryResults(
        *(
            [Sample({**s.labels, "host": "rack-4"}, s.value, s.at) for s in answer]
            for answer in (results.gpuplan, results.gpuplan_times)
        )
    )
    fleet = build(results, expected_cards={"fv-ml1": 4})
    assert [s.host for s in fleet.snapshots] == ["fv-ml1"] and fleet.problems == ()


@pytest.mark.parametrize("label", ["Hostname", "hostname"])
def test_dcgm_hostname_either_spelling(label: str) -> None:
    # dcgm-exporter 4.x writes Hostname; its main branch renamed it hostname (NVIDIA/dcgm-exporter#655).
    results = relabel(dcgm("dgx-7", {0: H200_IDLE}), {"Hostname": label})
    assert [s.host for s in build(results).snapshots] == ["dgx-7"]


def test_dcgm_without_hostname_is_its_instance_without_port() -> None:
    # dcgm-exporter --no-hostname: the scrape target is all that names the node.
    results = relabel(dcgm("dgx-7", {0: H200_IDLE}), {"Hostname": None})
    fleet = build(results, expected_cards={"dgx-7": 1})
    assert [s.host for s in fleet.snapshots] == ["dgx-7"]  # instance "dgx-7:9400"


def test_host_label_names_another_label() -> None:
    results = relabel(dcgm("dgx-7", {0: H200_IDLE}), {"Hostname": "node"})
    assert [s.host for s in build(results, host_label="node").snapshots] == ["dgx-7"]
    # Without it, instance names the host; with a label no series has, every series is left out.
    fleet = build(results, host_label="kubernetes_node")
    assert fleet.snapshots == ()
    assert fleet.warnings == (
        "3 series have no kubernetes_node label and are left out "
        "(first: DCGM_FI_DEV_FB_USED from instance dgx-7:9400 (job dcgm))",
    )


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"exported_host": "a", "host": "b", "Hostname": "c"}, "a"),
        ({"host": "b", "Hostname": "c", "hostname": "d"}, "b"),
        ({"Hostname": "c", "hostname": "d", "instance": "e:9400"}, "c"),
        ({"hostname": "d", "instance": "e:9400"}, "d"),
        ({"instance": "e:9400"}, "e"),
        ({"instance": "[fd00::7]:9400"}, "fd00::7"),
        ({"instance": "bare"}, "bare"),
        ({"host": "", "instance": "e:1"}, "e"),
        ({}, None),
    ],
)
def test_host_of_follows_designs_order(labels: dict[str, str], expected: str | None) -> None:
    assert p.host_of(labels) == expected


def test_absent_host_names_the_labels_and_the_hosts_outside_the_catalogue() -> None:
    results = relabel(dcgm("dgx-7", {0: H200_IDLE}), {"Hostname": None, "instance": None})
    results = QueryResults(
        dcgm=[
            Sample({**s.labels, "instance": "10.0.0.7:9400"}, s.value, s.at) for s in results.dcgm
        ],
        dcgm_times=[
            Sample({**s.labels, "instance": "10.0.0.7:9400"}, s.value, s.at)
            for s in results.dcgm_times
        ],
    )
    (problem,) = build(results, expected_cards={"dgx-7": 1}).problems
    assert (problem.host, problem.kind) == ("dgx-7", "absent")
    assert problem.text == (
        "dgx-7: absent: no gpuplan_* or DCGM_FI_DEV_FB_FREE series names it (hosts are read from "
        "labels exported_host, host, Hostname, hostname, else instance without its port); "
        "Prometheus has series of hosts outside the catalogue: 10.0.0.7"
    )


# MIG and time-slicing: dcgm-exporter repeats a card's `gpu` label per MIG instance or per pod.


def with_labels(results: QueryResults, **extra: str) -> list[Sample]:
    return [Sample({**s.labels, **extra}, s.value, s.at) for s in results.dcgm]


def test_mig_instances_are_named_as_mig_not_two_exporters() -> None:
    # Labels as dcgm-exporter writes a MIG instance: GPU_I_PROFILE, GPU_I_ID after modelName.
    card = dcgm("dgx-7", {0: {"USED": "0", "FREE": "9856"}})
    first = with_labels(card, GPU_I_PROFILE="1g.10gb", GPU_I_ID="1")
    second = with_labels(card, GPU_I_PROFILE="1g.10gb", GPU_I_ID="2")
    (problem,) = build(QueryResults(dcgm=first + second, dcgm_times=card.dcgm_times)).problems
    assert problem.kind == "mig"
    assert "MIG / time-slicing: gpuplan plans whole cards" in problem.text
    assert "two exporters" not in problem.text


def test_one_mig_instance_per_card_is_still_mig() -> None:
    card = dcgm("dgx-7", {0: {"USED": "0", "FREE": "9856"}})
    only = with_labels(card, GPU_I_PROFILE="3g.40gb", GPU_I_ID="1")
    (problem,) = build(QueryResults(dcgm=only, dcgm_times=card.dcgm_times)).problems
    assert problem.kind == "mig"
    assert problem.text == (
        "dgx-7: gpu 0 is in MIG mode (DCGM_FI_DEV_FB_USED has GPU_I_PROFILE '3g.40gb', "
        "GPU_I_ID '1'); MIG / time-slicing: gpuplan plans whole cards"
    )


def test_time_sliced_card_repeated_per_pod_is_named_as_such() -> None:
    # dcgm-exporter with shared GPUs writes each pod's copy of the card's series (pod, namespace,
    # container, vgpu).
    card = dcgm("dgx-7", {0: H200_IDLE})
    first = with_labels(card, pod="train-a-7f8d4b", namespace="ml", container="tf", vgpu="0")
    second = with_labels(card, pod="train-b-x9k2p", namespace="ml", container="tf", vgpu="1")
    (problem,) = build(QueryResults(dcgm=first + second, dcgm_times=card.dcgm_times)).problems
    assert problem.kind == "mig"
    assert problem.text.startswith(
        'dgx-7: DCGM_FI_DEV_FB_USED{gpu="0"} comes from two series that differ in '
        "pod 'train-a-7f8d4b' vs 'train-b-x9k2p', vgpu '0' vs '1'"
    )
    assert problem.text.endswith(
        "the card is shared out; MIG / time-slicing: gpuplan plans whole cards"
    )


def test_one_pod_per_card_is_an_ordinary_card() -> None:
    card = dcgm("dgx-7", {0: H200_IDLE})
    labelled = with_labels(card, pod="vllm-0", namespace="serve", container="vllm")
    fleet = build(QueryResults(dcgm=labelled, dcgm_times=card.dcgm_times))
    assert fleet.problems == () and [s.host for s in fleet.snapshots] == ["dgx-7"]


def test_two_dcgm_exporters_on_one_host_name_instance_and_job() -> None:
    card = dcgm("dgx-7", {0: H200_IDLE})
    first = with_labels(card, instance="10.0.0.7:9400")
    second = with_labels(card, instance="10.0.0.8:9400", job="dcgm-2")
    (problem,) = build(QueryResults(dcgm=first + second, dcgm_times=card.dcgm_times)).problems
    assert problem.kind == "collision"
    assert "differ in instance '10.0.0.7:9400' vs '10.0.0.8:9400', job 'dcgm' vs 'dcgm-2'" in (
        problem.text
    )


# Hosts outside the catalogue decide nothing: their figures neither warn nor refuse.


def _twin_uuids(snapshot: Snapshot, host: str) -> Snapshot:
    cards = list(snapshot.cards)
    cards[3] = cards[3].model_copy(update={"uuid": cards[1].uuid})
    return snapshot.model_copy(update={"host": host, "cards": tuple(cards)})


def test_a_host_outside_the_catalogue_is_not_checked(
    fake_prometheus: FakePrometheus, fv_ml1_snapshot: Snapshot
) -> None:
    other = _twin_uuids(fv_ml1_snapshot, "lab-box")
    fake_prometheus.serve(fleet_of(fv_ml1_snapshot, other))
    inside = read(fake_prometheus.url, expected_cards={"fv-ml1": 4, "lab-box": 4})
    assert [w for w in inside.warnings if "same UUID" in w] == [
        f"Prometheus at {fake_prometheus.url}: host lab-box: cards lab-box:1 and lab-box:3 have "
        f"the same UUID {other.cards[1].uuid} (a copied or hand-edited snapshot?)"
    ]
    outside = read(fake_prometheus.url, expected_cards={"fv-ml1": 4})
    assert not [w for w in outside.warnings if "same UUID" in w]
    # Impossible figures (a free over 2⁶⁰ B) are exit 2 for a catalogue host, nothing outside it.
    cards = list(other.cards)
    cards[0] = cards[0].model_copy(update={"free_bytes": 2**61})
    fake_prometheus.serve(
        fleet_of(fv_ml1_snapshot, other.model_copy(update={"cards": tuple(cards)}))
    )
    with pytest.raises(BadInputError, match="lab-box"):
        read(fake_prometheus.url, expected_cards={"fv-ml1": 4, "lab-box": 4})
    assert read(fake_prometheus.url, expected_cards={"fv-ml1": 4}).snapshots
