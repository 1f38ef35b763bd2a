"""Whose device memory it was: the judge's own measure of what a worker held when it ran out.

A worker that reports running out of memory is believed only when the judge, measuring for itself through
NVML (the driver's per-process accounting, which the worker cannot touch), finds the worker holding most of
the device. Otherwise other processes held it (another tenant, a judge that kept its buffers) and the
failure is the infrastructure's, never the candidate's (issue 23).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

# A candidate is taken to have run the device out of memory itself when its process held at least this
# share of the device's memory at the time: below it, others left it too little to work in.
CANDIDATE_SHARE = 0.5
GIB = 1024**3


@dataclass(frozen=True)
class MemoryAtFailure:
    worker_bytes: int  # what NVML says the worker's process held
    used_bytes: int  # held by every process on the device
    total_bytes: int

    @property
    def candidate_explains(self) -> bool:
        return self.worker_bytes >= CANDIDATE_SHARE * self.total_bytes

    def describe(self) -> str:
        others = max(self.used_bytes - self.worker_bytes, 0)
        return (
            f"the worker held {self.worker_bytes / GIB:.2f} GiB of the device's {self.total_bytes / GIB:.2f} GiB "
            f"and other processes {others / GIB:.2f} GiB"
        )


def memory_at_failure(device_uuid: str, pid: int | None) -> MemoryAtFailure | None:
    """NVML's account of `pid` on the device (named by its UUID: NVML's indices ignore
    CUDA_VISIBLE_DEVICES), or None where it cannot be measured (no NVML, no pid: then nothing can be
    charged to the candidate)."""
    if pid is None:
        return None
    nvml = _nvml()
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


def _nvml() -> Any:
    try:
        import pynvml  # nvidia-ml-py: on every machine with the driver's Python bindings
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    return pynvml
