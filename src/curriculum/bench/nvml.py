"""Clocks and throttle reasons through NVML (the `pynvml` of nvidia-ml-py).

Everything here degrades to "unknown": without NVML the clocks are None and
the reasons empty, and the bench runs on. NVML numbers devices its own way,
ignoring CUDA_VISIBLE_DEVICES, so the device is found by its PCI bus id.
"""

from __future__ import annotations

from typing import Any

from curriculum.results import Clocks

# NVML's clocks-event (throttle) reason bits, by the names the results use.
THROTTLE_REASONS: dict[int, str] = {
    0x0000000000000001: "gpu_idle",
    0x0000000000000002: "applications_clocks_setting",
    0x0000000000000004: "sw_power_cap",
    0x0000000000000008: "hw_slowdown",
    0x0000000000000010: "sync_boost",
    0x0000000000000020: "sw_thermal_slowdown",
    0x0000000000000040: "hw_thermal_slowdown",
    0x0000000000000080: "hw_power_brake_slowdown",
    0x0000000000000100: "display_clock_setting",
}
# Reasons that do not mean the clocks were held down while work ran: an idle
# card between launches, and clocks an administrator pinned on purpose.
BENIGN_REASONS = frozenset({"gpu_idle", "applications_clocks_setting"})


def reason_names(mask: int) -> list[str]:
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


def is_throttled(*clocks: Clocks) -> bool:
    """Whether any reading shows a reason other than the benign ones."""
    return any(set(c.throttle_reasons) - BENIGN_REASONS for c in clocks)


class Nvml:
    """NVML handle of one device; every read returns None when NVML fails."""

    def __init__(self, pci_bus_id: str | None) -> None:
        self._nvml: Any = None
        self._handle: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = self._find(pynvml, pci_bus_id)
            self._nvml = pynvml
        except Exception:  # NVML missing or refusing: clocks unknown
            self._nvml = None

    @staticmethod
    def _find(pynvml: Any, pci_bus_id: str | None) -> Any:
        if pci_bus_id:
            try:
                return pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
            except Exception:  # a bus-id format NVML rejects: try the only device
                if pynvml.nvmlDeviceGetCount() != 1:
                    raise
        return pynvml.nvmlDeviceGetHandleByIndex(0)

    @property
    def available(self) -> bool:
        return self._nvml is not None

    def _call(self, name: str, *args: Any) -> Any:
        if self._nvml is None:
            return None
        fn = getattr(self._nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(self._handle, *args)
        except Exception:  # a failed read is an unknown value
            return None

    def clocks(self) -> Clocks:
        if self._nvml is None:
            return Clocks(sm_mhz=None, mem_mhz=None, throttle_reasons=[])
        sm = self._call("nvmlDeviceGetClockInfo", self._nvml.NVML_CLOCK_SM)
        mem = self._call("nvmlDeviceGetClockInfo", self._nvml.NVML_CLOCK_MEM)
        mask = self._call("nvmlDeviceGetCurrentClocksEventReasons")
        if mask is None:
            mask = self._call("nvmlDeviceGetCurrentClocksThrottleReasons")
        return Clocks(
            sm_mhz=int(sm) if sm is not None else None,
            mem_mhz=int(mem) if mem is not None else None,
            throttle_reasons=reason_names(int(mask)) if mask is not None else [],
        )

    def max_clocks(self) -> tuple[int | None, int | None]:
        if self._nvml is None:
            return None, None
        sm = self._call("nvmlDeviceGetMaxClockInfo", self._nvml.NVML_CLOCK_SM)
        mem = self._call("nvmlDeviceGetMaxClockInfo", self._nvml.NVML_CLOCK_MEM)
        return (int(sm) if sm is not None else None, int(mem) if mem is not None else None)

    def driver(self) -> str | None:
        if self._nvml is None:
            return None
        try:
            version = self._nvml.nvmlSystemGetDriverVersion()
        except Exception:  # a failed read is an unknown value
            return None
        return version.decode() if isinstance(version, bytes) else str(version)
