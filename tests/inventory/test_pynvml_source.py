"""PynvmlSource against a faked pynvml: v2 memory with v1 fallback, a lost GPU, no NVML library.

The only test file that touches pynvml: its real error classes are kept, its driver calls replaced.
"""

from __future__ import annotations

import ctypes.util
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from inventory.nvml import NvmlCardError, NvmlUnavailableError, PynvmlSource
from inventory.poller import take_snapshot

NOW = datetime(2026, 9, 16, 14, 2, 11, tzinfo=UTC)
TOTAL = 150_754_820_096
RESERVED = 644_939_776  # docs/facts.md §1, the measured H200
GIB = 2**30


@dataclass
class FakeDriver:
    """Plays libnvidia-ml for `cards` H200s; `lost` cards raise GpuIsLost, `v1_only` lacks _v2."""

    cards: int = 4
    lost: set[int] = field(default_factory=set)
    v1_only: bool = False
    processes: dict[int, list[tuple[int, int | None]]] = field(default_factory=dict)
    no_utilization: bool = False
    calls: list[str] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in (
            "nvmlInit",
            "nvmlShutdown",
            "nvmlSystemGetDriverVersion",
            "nvmlSystemGetNVMLVersion",
            "nvmlDeviceGetCount",
            "nvmlDeviceGetHandleByIndex",
            "nvmlDeviceGetName",
            "nvmlDeviceGetUUID",
            "nvmlDeviceGetMemoryInfo",
            "nvmlDeviceGetUtilizationRates",
            "nvmlDeviceGetComputeRunningProcesses",
        ):
            monkeypatch.setattr(pynvml, name, getattr(self, name))

    def nvmlInit(self) -> None:
        self.calls.append("init")

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"

    def nvmlSystemGetNVMLVersion(self) -> bytes:
        return b"13.580.159.04"  # the real binding returns bytes here

    def nvmlDeviceGetCount(self) -> int:
        return self.cards

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def _alive(self, handle: int) -> None:
        if handle in self.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    def nvmlDeviceGetName(self, handle: int) -> str:
        self._alive(handle)
        return "NVIDIA H200"

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        self._alive(handle)
        return f"GPU-{handle:04d}"

    def _used(self, handle: int) -> int:
        return sum(b or 0 for _, b in self.processes.get(handle, []))

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None) -> Any:
        self._alive(handle)
        used = self._used(handle)
        free = TOTAL - RESERVED - used
        if version is None:
            return SimpleNamespace(total=TOTAL, used=used + RESERVED, free=free)
        assert version == pynvml.nvmlMemory_v2
        if self.v1_only:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return SimpleNamespace(
            version=version, total=TOTAL, reserved=RESERVED, used=used, free=free
        )

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        self._alive(handle)
        if self.no_utilization:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(gpu=37, memory=12)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:
        self._alive(handle)
        return [SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in self.processes.get(handle, [])]


def test_v2_memory_separates_the_reserve(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = FakeDriver(cards=1, processes={0: [(4121, 20 * GIB + 518 * 2**20)]})
    driver.install(monkeypatch)
    with PynvmlSource() as source:
        (card,) = source.read_cards()
        assert source.nvml_version() == "13.580.159.04"
    assert card.reserved_bytes == RESERVED
    assert card.used_bytes == 20 * GIB + 518 * 2**20
    assert card.free_bytes == TOTAL - RESERVED - card.used_bytes
    assert card.utilization_percent == 37
    assert [(p.pid, p.used_bytes) for p in card.processes] == [(4121, 20 * GIB + 518 * 2**20)]
    assert driver.calls == ["init", "shutdown"]


def test_v1_fallback_records_reserve_as_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeDriver(cards=1, v1_only=True).install(monkeypatch)
    with PynvmlSource() as source:
        (card,) = source.read_cards()
        memory = source.memory(0)
    assert card.reserved_bytes is None
    assert card.used_bytes == RESERVED  # v1 counts the reserve as used (docs/facts.md §1)
    assert card.total_bytes == TOTAL
    assert memory.v2_reserved_bytes is None and memory.v1_used_bytes == RESERVED


def test_gpu_is_lost_on_one_of_four_cards(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeDriver(cards=4, lost={1}, processes={0: [(10, GIB)], 2: [(20, 2 * GIB)]}).install(
        monkeypatch
    )
    with PynvmlSource() as source:
        snapshot = take_snapshot(source, NOW, "fv-ml1", read_cmdline=lambda pid: None)
    assert [c.error for c in snapshot.cards] == [None, "GpuIsLost", None, None]
    lost = snapshot.card(1)
    assert (lost.total_bytes, lost.used_bytes, lost.free_bytes) == (None, None, None)
    assert snapshot.card(0).used_bytes == GIB
    assert snapshot.card(2).used_bytes == 2 * GIB
    assert snapshot.card(3).free_bytes == TOTAL - RESERVED


def test_read_card_names_the_card_and_the_nvml_error(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeDriver(cards=2, lost={1}).install(monkeypatch)
    with PynvmlSource() as source, pytest.raises(NvmlCardError) as caught:
        source.read_card(1)
    assert caught.value.index == 1
    assert caught.value.nvml_error == "GpuIsLost"
    assert "card 1" in str(caught.value) and "GpuIsLost" in str(caught.value)


def test_unsupported_utilisation_is_none_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeDriver(cards=1, no_utilization=True).install(monkeypatch)
    with PynvmlSource() as source:
        (card,) = source.read_cards()
    assert card.error is None and card.utilization_percent is None


def test_unknown_process_bytes_stay_none(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeDriver(cards=1, processes={0: [(99, None)]}).install(monkeypatch)
    with PynvmlSource() as source:
        (card,) = source.read_cards()
    assert card.processes[0].used_bytes is None


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver is not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "permission"),
    ],
)
def test_nvml_absent_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, code: int, says: str
) -> None:
    def fail() -> None:
        raise pynvml.NVMLError(code)

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    with pytest.raises(NvmlUnavailableError, match=says) as caught:
        PynvmlSource().open()
    assert caught.value.exit_code == 3


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has NVML"
)
def test_real_pynvml_without_the_library() -> None:
    # No monkeypatching: the real binding on a machine without libnvidia-ml.
    with pytest.raises(NvmlUnavailableError, match=r"libnvidia-ml\.so\.1\) was not found"):
        PynvmlSource().open()
