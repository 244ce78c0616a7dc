"""`FakeNvml`: an `NvmlSource` built from literal readings or a recorded snapshot, with named scenarios.

Serves tests and benchmarks without a GPU; the scenarios are the faults STYLE.md names.
"""

from __future__ import annotations

from collections.abc import Iterable

from inventory.nvml import NvmlUnavailableError, RawCard, RawProcess
from inventory.proc import read_proc_cmdline, read_proc_parents
from inventory.snapshot import Snapshot

MIB = 2**20
# docs/facts.md §1: an idle NVIDIA H200, driver 580.159.04.
H200_TOTAL_BYTES = 150_754_820_096
H200_RESERVED_BYTES = 644_939_776
H200_FREE_BYTES = 150_109_880_320
H200_DRIVER = "580.159.04"


class FakeNvml:
    """Answers `NvmlSource` calls from fixed cards; `absent` makes every call fail as NVML would."""

    def __init__(
        self,
        cards: Iterable[RawCard],
        *,
        driver: str = H200_DRIVER,
        nvml: str | None = "13.580.159.04",
        absent: str | None = None,
        cmdlines: dict[int, str | None] | None = None,
        parents: dict[int, tuple[str, ...]] | None = None,
    ) -> None:
        self.cards = tuple(cards)
        self.cmdlines = cmdlines
        self.parents = parents
        self.driver = driver
        self.nvml = nvml
        self.absent = absent
        self.reads = 0

    def _check(self) -> None:
        if self.absent is not None:
            raise NvmlUnavailableError(f"no NVML: {self.absent}")

    def driver_version(self) -> str:
        """The configured driver string."""
        self._check()
        return self.driver

    def nvml_version(self) -> str | None:
        """The configured NVML library version."""
        self._check()
        return self.nvml

    def read_cmdline(self, pid: int) -> str | None:
        """A replay's recorded cmdline; without recorded ones, this machine's /proc."""
        if self.cmdlines is None:
            return read_proc_cmdline(pid)
        return self.cmdlines.get(pid)

    def read_parents(self, pid: int) -> tuple[str, ...]:
        """A replay's recorded ancestors' lines; with no recorded cmdlines, this machine's /proc."""
        if self.cmdlines is None:
            return read_proc_parents(pid)
        return (self.parents or {}).get(pid, ())

    def read_cards(self) -> list[RawCard]:
        """The configured cards, in index order; counts the reads."""
        self._check()
        self.reads += 1
        return list(self.cards)

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> FakeNvml:
        """Replays a recorded snapshot's readings and cmdlines (its seats are attribution's; dropped)."""
        cards = [
            RawCard(
                index=card.index,
                uuid=card.uuid,
                name=card.name,
                total_bytes=card.total_bytes,
                reserved_bytes=card.reserved_bytes,
                used_bytes=card.used_bytes,
                free_bytes=card.free_bytes,
                utilization_percent=card.utilization_percent,
                processes=tuple(RawProcess(p.pid, p.used_bytes) for p in card.processes),
                error=card.error,
            )
            for card in snapshot.cards
        ]
        cmdlines = {p.pid: p.cmdline for card in snapshot.cards for p in card.processes}
        parents = {p.pid: p.parents for card in snapshot.cards for p in card.processes}
        return cls(
            cards,
            driver=snapshot.driver or "unknown",
            nvml=snapshot.nvml_version,
            cmdlines=cmdlines,
            parents=parents,
        )


def h200_idle_card(index: int = 0, processes: tuple[RawProcess, ...] = ()) -> RawCard:
    """The measured idle H200 of docs/facts.md §1 (v2: used 0, reserve 615 MiB)."""
    used = sum(p.used_bytes or 0 for p in processes)
    return RawCard(
        index=index,
        uuid=f"GPU-fake-h200-{index:04d}",
        name="NVIDIA H200",
        total_bytes=H200_TOTAL_BYTES,
        reserved_bytes=H200_RESERVED_BYTES,
        used_bytes=used,
        free_bytes=H200_FREE_BYTES - used,
        utilization_percent=0,
        processes=processes,
    )


def h200_idle() -> FakeNvml:
    """One idle H200 as measured (docs/facts.md §1)."""
    return FakeNvml([h200_idle_card(0)])


def h200_v1_only() -> FakeNvml:
    """The same idle H200 as a v1-only driver reports it: reserve unknown, counted in `used`."""
    card = h200_idle_card(0)
    v1 = RawCard(
        index=0,
        uuid=card.uuid,
        name=card.name,
        total_bytes=H200_TOTAL_BYTES,
        reserved_bytes=None,
        used_bytes=H200_RESERVED_BYTES,  # docs/facts.md: v1 used == v2 reserved on an idle card
        free_bytes=H200_FREE_BYTES,
        utilization_percent=0,
    )
    return FakeNvml([v1], driver="470.256.02")


def lost_gpu(lost: int = 2, cards: int = 4) -> FakeNvml:
    """`cards` busy H200s of which card `lost` answers NVMLError_GpuIsLost."""
    readings = [
        RawCard.failed(i, "GpuIsLost")
        if i == lost
        else h200_idle_card(i, (RawProcess(pid=4100 + i, used_bytes=20 * 2**30 + 518 * MIB),))
        for i in range(cards)
    ]
    return FakeNvml(readings)


def vanished_pid(pid: int = 999_999) -> FakeNvml:
    """One H200 listing a process whose PID is gone by the time /proc is read."""
    return FakeNvml([h200_idle_card(0, (RawProcess(pid=pid, used_bytes=1024 * MIB),))])
