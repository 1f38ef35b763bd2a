"""Whose device memory it was: the judge's own measure of what a worker held when it ran out.

An out-of-memory reported by a worker is the infrastructure's only when the judge, measuring for itself
(NVML: the driver's per-process accounting, which the worker cannot touch), finds other processes holding a
large share of the device (another tenant, a judge that kept its buffers) and the worker not holding most
of it. Otherwise it is the candidate's: its own demand, or an error it raised on a device with room to
spare (a worker cannot buy a retry by faking an out-of-memory on an uncrowded GPU) (issue 23).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from cuda_agent_mcp.evaluation.job import GIB

# A worker holding at least this share of the device ran it out of memory itself.
CANDIDATE_SHARE = 0.5
# Others holding less than this share left the worker enough room: the failure is its own.
CROWDED_SHARE = 0.25


@dataclass(frozen=True)
class MemoryAtFailure:
    worker_bytes: int | None  # what NVML says the worker's process held (None: not measured per process)
    used_bytes: int  # held by every process on the device
    total_bytes: int

    @property
    def others_bytes(self) -> int:
        """Held by other processes; without a per-process count, everything in use (the worker's share
        counted as others': the doubt goes to the candidate)."""
        return max(self.used_bytes - (self.worker_bytes or 0), 0)

    @property
    def candidates_fault(self) -> bool:
        if self.worker_bytes is not None and self.worker_bytes >= CANDIDATE_SHARE * self.total_bytes:
            return True
        return self.others_bytes < CROWDED_SHARE * self.total_bytes

    def describe(self) -> str:
        held = (
            f"the worker held {self.worker_bytes / GIB:.2f} GiB"
            if self.worker_bytes is not None
            else "the worker's share could not be measured"
        )
        return (
            f"{held} of the device's {self.total_bytes / GIB:.2f} GiB, other processes "
            f"{self.others_bytes / GIB:.2f} GiB"
        )


def memory_at_failure(device_uuid: str, pid: int | None) -> MemoryAtFailure | None:
    """NVML's account of `pid` on the device (named by its UUID: NVML's indices ignore
    CUDA_VISIBLE_DEVICES), or None where NVML cannot say (the caller falls back to the device's totals)."""
    if pid is None:
        return None
    nvml = nvml_module()
    if nvml is None:
        return None
    with contextlib.suppress(Exception):
        name = device_uuid if device_uuid.startswith("GPU-") else f"GPU-{device_uuid}"
        handle = nvml.nvmlDeviceGetHandleByUUID(name)
        info = nvml.nvmlDeviceGetMemoryInfo(handle)
        processes = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        held = sum(int(p.usedGpuMemory or 0) for p in processes if int(p.pid) == pid)
        return MemoryAtFailure(worker_bytes=held, used_bytes=int(info.used), total_bytes=int(info.total))
    return None


@cache
def nvml_module() -> Any:
    """pynvml initialised (once per process: every job's GPU guard asks), or None where the driver's
    Python bindings are missing or NVML fails."""
    try:
        import pynvml  # nvidia-ml-py: on every machine with the driver's Python bindings
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    return pynvml
