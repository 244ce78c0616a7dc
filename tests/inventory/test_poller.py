"""The poller over FakeNvml scenarios: the measured H200, a lost GPU, a vanished PID, a v1-only driver."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from inventory.fake import (
    H200_FREE_BYTES,
    H200_RESERVED_BYTES,
    H200_TOTAL_BYTES,
    FakeNvml,
    h200_idle,
    h200_v1_only,
    lost_gpu,
    vanished_pid,
)
from inventory.nvml import NvmlUnavailableError, RawCard, RawProcess
from inventory.poller import default_host, take_snapshot
from inventory.proc import read_proc_cmdline
from inventory.snapshot import Snapshot, dumps_snapshot, loads_snapshot
from seats.model import Catalogue

NOW = datetime(2026, 9, 16, 14, 2, 11, 654321, tzinfo=UTC)


def no_proc(pid: int) -> str | None:
    return None


def test_h200_idle_card_has_the_measured_identities() -> None:
    # docs/facts.md §1: CUDA total = NVML total − v2 reserved; v2 used 0 on an idle card.
    snapshot = take_snapshot(h200_idle(), NOW, "h200", read_cmdline=no_proc)
    card = snapshot.card(0)
    assert card.total_bytes == H200_TOTAL_BYTES
    assert card.reserved_bytes == H200_RESERVED_BYTES
    assert card.used_bytes == 0
    assert card.free_bytes == H200_FREE_BYTES
    assert card.cuda_total_bytes == 150_109_880_320 == card.free_bytes
    assert snapshot.driver == "580.159.04"


def test_taken_at_is_cut_to_whole_seconds_in_utc() -> None:
    snapshot = take_snapshot(h200_idle(), NOW, "h200", read_cmdline=no_proc)
    assert snapshot.taken_at == datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)
    assert '"taken_at": "2026-09-16T14:02:11Z"' in dumps_snapshot(snapshot)


def test_v1_only_driver_records_reserve_as_unknown_and_used_as_v1() -> None:
    snapshot = take_snapshot(h200_v1_only(), NOW, "old", read_cmdline=no_proc)
    card = snapshot.card(0)
    assert card.reserved_bytes is None
    # docs/facts.md §1: on an idle card v1 `used` equals the v2 reserve.
    assert card.used_bytes == H200_RESERVED_BYTES
    assert card.cuda_total_bytes == H200_TOTAL_BYTES  # stricter for gates without the reserve


def test_lost_gpu_keeps_the_other_cards_and_never_shows_zeros() -> None:
    snapshot = take_snapshot(lost_gpu(lost=2, cards=4), NOW, "fv-ml1", read_cmdline=no_proc)
    assert [c.index for c in snapshot.cards] == [0, 1, 2, 3]
    lost = snapshot.card(2)
    assert lost.error == "GpuIsLost"
    assert (lost.total_bytes, lost.used_bytes, lost.free_bytes, lost.reserved_bytes) == (None,) * 4
    assert lost.processes == ()
    for index in (0, 1, 3):
        card = snapshot.card(index)
        assert card.error is None
        assert card.free_bytes is not None and card.free_bytes > 0
        assert len(card.processes) == 1
    # The JSON says null for the lost card, and reads back as the same snapshot.
    assert loads_snapshot(dumps_snapshot(snapshot), "x") == snapshot


def test_vanished_pid_is_kept_with_null_cmdline() -> None:
    snapshot = take_snapshot(vanished_pid(pid=4_000_000), NOW, "h", read_cmdline=read_proc_cmdline)
    (process,) = snapshot.card(0).processes
    assert process.pid == 4_000_000
    assert process.cmdline is None
    assert process.used_bytes == 1024 * 2**20
    assert process.seat is None


def test_attribution_at_capture_by_match_regex(
    fv_ml1: Catalogue, fv_ml1_snapshot: Snapshot
) -> None:
    source = FakeNvml.from_snapshot(fv_ml1_snapshot)
    snapshot = take_snapshot(source, NOW, "fv-ml1", catalogue=fv_ml1)
    seats = {p.pid: p.seat for p in snapshot.card(0).processes}
    assert seats == {
        4101: "cyberprev",
        4117: "gen-small",
        4130: "parakeet-stt",
        4121: "vllm-voices",
    }
    # Without a catalogue nothing is attributed at capture.
    bare = take_snapshot(source, NOW, "fv-ml1")
    assert all(p.seat is None for c in bare.cards for p in c.processes)


def test_unmatched_process_stays_foreign(fv_ml1: Catalogue) -> None:
    card = RawCard(
        index=0,
        total_bytes=100,
        reserved_bytes=0,
        used_bytes=10,
        free_bytes=90,
        processes=(RawProcess(pid=7, used_bytes=10),),
    )
    snapshot = take_snapshot(
        FakeNvml([card]),
        NOW,
        "fv-ml1",
        catalogue=fv_ml1,
        read_cmdline=lambda pid: "python3 train.py",
    )
    (process,) = snapshot.card(0).processes
    assert process.cmdline == "python3 train.py"
    assert process.seat is None


def test_process_with_unknown_bytes_stays_unknown() -> None:
    card = RawCard(
        index=0,
        total_bytes=100,
        reserved_bytes=0,
        used_bytes=10,
        free_bytes=90,
        processes=(RawProcess(pid=7, used_bytes=None),),
    )
    snapshot = take_snapshot(FakeNvml([card]), NOW, "h", read_cmdline=no_proc)
    assert snapshot.card(0).processes[0].used_bytes is None


def test_nvml_absent_is_cannot_decide() -> None:
    source = FakeNvml([], absent="the NVML library (libnvidia-ml.so.1) was not found")
    with pytest.raises(NvmlUnavailableError, match="libnvidia-ml") as caught:
        take_snapshot(source, NOW, "h")
    assert caught.value.exit_code == 3


def test_default_host_is_the_catalogues_only_host(fv_ml1: Catalogue) -> None:
    assert default_host(fv_ml1) == "fv-ml1"
    assert default_host(None)  # this machine's name


@pytest.mark.slow
def test_fake_does_not_import_the_poller_back() -> None:
    # The poller imports the fake (for $GPUPLAN_FAKE_NVML); a replay without recorded cmdlines
    # reads /proc through inventory.proc, so importing and using the fake never loads the poller.
    code = (
        "import sys; from inventory.fake import FakeNvml, h200_idle_card; "
        "FakeNvml([h200_idle_card(0)]).read_cmdline(1); "
        "assert 'inventory.poller' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
