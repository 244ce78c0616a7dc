"""The one door to the NVIDIA driver: the `NvmlSource` protocol and `PynvmlSource`, its real side.

Only this module imports pynvml (ruff TID251); everything else sees `RawCard` readings in bytes.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, TypeVar

from seats.errors import CannotDecideError, GpuplanError

T = TypeVar("T")

# NVML answers a v2 call it does not know with one of these; v1 is then all there is.
_V1_FALLBACK = {"FunctionNotFound", "NotSupported", "ArgumentVersionMismatch", "InvalidArgument"}
# Failures of nvmlInit that mean "there is no NVML here", not "a card is broken".
_ABSENT = {
    "LibraryNotFound": "the NVML library (libnvidia-ml.so.1) was not found; is the NVIDIA driver installed?",
    "DriverNotLoaded": "the NVIDIA kernel driver is not loaded",
    "NoPermission": "no permission to open the NVIDIA devices (/dev/nvidia*)",
    "LibRmVersionMismatch": "the NVML library and the loaded kernel driver differ in version; reboot or reload",
}


@dataclass(frozen=True)
class RawProcess:
    """One compute process as NVML lists it; `used_bytes` None when NVML cannot say."""

    pid: int
    used_bytes: int | None


@dataclass(frozen=True)
class RawCard:
    """One card's reading. With `error` set every figure is None (never a zero that looks free).

    `reserved_bytes` None with figures present means only NVML v1 answered: `used_bytes`
    then includes the driver's reserve (docs/facts.md §1).
    """

    index: int
    uuid: str | None = None
    name: str | None = None
    total_bytes: int | None = None
    reserved_bytes: int | None = None
    used_bytes: int | None = None
    free_bytes: int | None = None
    utilization_percent: int | None = None
    processes: tuple[RawProcess, ...] = ()
    error: str | None = None

    @classmethod
    def failed(cls, index: int, error: str) -> RawCard:
        """A card that could not be read, with the NVML error name (`GpuIsLost`)."""
        return cls(index=index, error=error)


@dataclass(frozen=True)
class MemoryReadings:
    """Both NVML memory answers of one card, for the identities of docs/facts.md §1."""

    v1_total_bytes: int
    v1_used_bytes: int
    v1_free_bytes: int
    v2_total_bytes: int | None
    v2_reserved_bytes: int | None
    v2_used_bytes: int | None
    v2_free_bytes: int | None


class NvmlSource(Protocol):
    """What the poller needs from NVML; `PynvmlSource` is the real one, `FakeNvml` the test one."""

    def driver_version(self) -> str: ...

    def nvml_version(self) -> str | None: ...

    def read_cards(self) -> list[RawCard]: ...


class NvmlUnavailableError(CannotDecideError):
    """NVML cannot be used at all on this machine (no driver, no library, no pynvml): exit 3."""


class NvmlCardError(GpuplanError):
    """One NVML call on one card failed; `nvml_error` is NVML's name for it (`GpuIsLost`)."""

    exit_code = CannotDecideError.exit_code

    def __init__(self, index: int, call: str, nvml_error: str) -> None:
        self.index = index
        self.call = call
        self.nvml_error = nvml_error
        super().__init__(f"card {index}: {call} failed with NVML error {nvml_error}")


def nvml_error_name(exc: BaseException) -> str:
    """`NVMLError_GpuIsLost` → `GpuIsLost`; an unmapped code → `Error<code>`."""
    name = type(exc).__name__
    if name.startswith("NVMLError_"):
        return name.removeprefix("NVMLError_")
    value = getattr(exc, "value", None)
    return f"Error{value}" if value is not None else name


def _text(value: object) -> str:
    # nvidia-ml-py returns str from most calls but bytes from a few (nvmlSystemGetNVMLVersion).
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _import_pynvml() -> ModuleType:
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        raise NvmlUnavailableError(
            "no NVML: the Python package nvidia-ml-py (module pynvml) is not installed"
        ) from exc


class PynvmlSource:
    """NVML through nvidia-ml-py. `open()` initialises NVML once; `close()` shuts it down.

    Each reading matches `nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.reserved,
    memory.used,memory.free,utilization.gpu` and `--query-compute-apps=pid,used_memory`.
    """

    def __init__(self, module: ModuleType | None = None) -> None:
        self._nvml = module
        self._open = False

    def open(self) -> PynvmlSource:
        """Initialise NVML; `NvmlUnavailableError` says what is missing."""
        if self._open:
            return self
        nvml = self._nvml if self._nvml is not None else _import_pynvml()
        self._nvml = nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            name = nvml_error_name(exc)
            why = _ABSENT.get(name, f"nvmlInit failed with NVML error {name}")
            raise NvmlUnavailableError(f"no NVML: {why}") from exc
        except OSError as exc:  # a broken libnvidia-ml can fail inside ctypes itself
            raise NvmlUnavailableError(f"no NVML: loading libnvidia-ml failed: {exc}") from exc
        self._open = True
        return self

    def close(self) -> None:
        """Shut NVML down (safe to call twice)."""
        if self._open and self._nvml is not None:
            self._open = False
            # Shutting down is best effort: the readings are already taken.
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()

    def __enter__(self) -> PynvmlSource:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _module(self) -> Any:
        if not self._open:
            self.open()
        return self._nvml

    def _call(self, index: int, call: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        nvml = self._module
        try:
            return fn(*args, **kwargs)
        except nvml.NVMLError as exc:
            raise NvmlCardError(index, call, nvml_error_name(exc)) from exc

    def _system(self, call: str) -> Any:
        """A call about the whole machine; NvmlUnavailableError naming it where it fails."""
        nvml = self._module
        try:
            return getattr(nvml, call)()
        except nvml.NVMLError as exc:
            raise NvmlUnavailableError(
                f"no NVML: {call} failed with {nvml_error_name(exc)}"
            ) from exc

    def driver_version(self) -> str:
        """The kernel driver's version, e.g. `580.159.04`."""
        return _text(self._system("nvmlSystemGetDriverVersion"))

    def nvml_version(self) -> str | None:
        """The NVML library's version, e.g. `13.580.159.04`, or None when it will not say."""
        nvml = self._module
        try:
            return _text(nvml.nvmlSystemGetNVMLVersion())
        except nvml.NVMLError:
            return None

    def card_count(self) -> int:
        """How many cards NVML sees."""
        return int(self._system("nvmlDeviceGetCount"))

    def read_cards(self) -> list[RawCard]:
        """Every card; a card whose reading fails comes back as `RawCard.failed` (the rest intact)."""
        cards: list[RawCard] = []
        for index in range(self.card_count()):
            try:
                cards.append(self.read_card(index))
            except NvmlCardError as exc:
                cards.append(RawCard.failed(index, exc.nvml_error))
        return cards

    def _handle(self, index: int) -> Any:
        nvml = self._module
        return self._call(
            index, "nvmlDeviceGetHandleByIndex", nvml.nvmlDeviceGetHandleByIndex, index
        )

    def memory(self, index: int) -> MemoryReadings:
        """NVML v1 and (where the driver has it) v2 memory of one card, unprocessed."""
        nvml = self._module
        handle = self._handle(index)
        v1 = self._call(index, "nvmlDeviceGetMemoryInfo", nvml.nvmlDeviceGetMemoryInfo, handle)
        v2 = self._memory_v2(index, handle)
        return MemoryReadings(
            v1_total_bytes=int(v1.total),
            v1_used_bytes=int(v1.used),
            v1_free_bytes=int(v1.free),
            v2_total_bytes=None if v2 is None else int(v2.total),
            v2_reserved_bytes=None if v2 is None else int(v2.reserved),
            v2_used_bytes=None if v2 is None else int(v2.used),
            v2_free_bytes=None if v2 is None else int(v2.free),
        )

    def _memory_v2(self, index: int, handle: Any) -> Any | None:
        # v2 separates the driver's reserve from `used`; older drivers and bindings lack it.
        nvml = self._module
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is None:
            return None
        try:
            return nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
        except TypeError:
            return None  # a binding whose nvmlDeviceGetMemoryInfo takes no version
        except nvml.NVMLError as exc:
            name = nvml_error_name(exc)
            if name in _V1_FALLBACK:
                return None
            raise NvmlCardError(index, "nvmlDeviceGetMemoryInfo_v2", name) from exc

    def read_card(self, index: int) -> RawCard:
        """One card: name, UUID, memory (v2, else v1), utilisation, compute processes."""
        nvml = self._module
        handle = self._handle(index)
        name = _text(self._call(index, "nvmlDeviceGetName", nvml.nvmlDeviceGetName, handle))
        uuid = _text(self._call(index, "nvmlDeviceGetUUID", nvml.nvmlDeviceGetUUID, handle))
        v2 = self._memory_v2(index, handle)
        if v2 is not None:
            total, reserved, used, free = (
                int(v2.total),
                int(v2.reserved),
                int(v2.used),
                int(v2.free),
            )
        else:
            v1 = self._call(index, "nvmlDeviceGetMemoryInfo", nvml.nvmlDeviceGetMemoryInfo, handle)
            total, reserved, used, free = int(v1.total), None, int(v1.used), int(v1.free)
        utilization: int | None
        try:
            utilization = int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except nvml.NVMLError as exc:
            # Utilisation is a nicety (MIG and some vGPUs do not report it); memory is not.
            if nvml_error_name(exc) != "NotSupported":
                raise NvmlCardError(
                    index, "nvmlDeviceGetUtilizationRates", nvml_error_name(exc)
                ) from exc
            utilization = None
        listed = self._call(
            index,
            "nvmlDeviceGetComputeRunningProcesses",
            nvml.nvmlDeviceGetComputeRunningProcesses,
            handle,
        )
        processes = tuple(
            RawProcess(
                pid=int(p.pid),
                # pynvml turns NVML_VALUE_NOT_AVAILABLE into None; keep it None, never 0.
                used_bytes=None if p.usedGpuMemory is None else int(p.usedGpuMemory),
            )
            for p in listed
        )
        return RawCard(
            index=index,
            uuid=uuid,
            name=name,
            total_bytes=total,
            reserved_bytes=reserved,
            used_bytes=used,
            free_bytes=free,
            utilization_percent=utilization,
            processes=processes,
        )
