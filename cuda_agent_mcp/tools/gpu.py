"""What GPUs this machine has, from `nvidia-smi` (no torch, no CUDA context), plus known peak figures."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
from pathlib import Path
from weakref import WeakKeyDictionary

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.errors import GpuUnavailable
from cuda_agent_mcp.evaluation.datasheets import PEAK_BANDWIDTH_BYTES_PER_S
from cuda_agent_mcp.executors.scheduler import GpuScheduler


class GpuSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    name: str
    memory_mib: int | None
    driver: str | None
    peak_bandwidth_gb_s: float | None = Field(
        description="published DRAM bandwidth; the physical floor uses it"
    )


class GpuSpecs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    gpus: list[GpuSpec]
    note: str = ""


def gpu_specs() -> GpuSpecs:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return GpuSpecs(gpus=[], note="no nvidia-smi here: builds work, kernels cannot run on this machine")
    try:
        done = subprocess.run(
            [smi, "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return GpuSpecs(gpus=[], note=f"nvidia-smi failed: {exc}")
    gpus = []
    for line in done.stdout.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 4 or not fields[0].isdigit():
            continue
        bandwidth = next((b for key, b in PEAK_BANDWIDTH_BYTES_PER_S.items() if key in fields[1]), None)
        gpus.append(
            GpuSpec(
                index=int(fields[0]),
                name=fields[1],
                memory_mib=int(fields[2]) if fields[2].isdigit() else None,
                driver=fields[3] or None,
                peak_bandwidth_gb_s=bandwidth / 1e9 if bandwidth else None,
            )
        )
    return GpuSpecs(gpus=gpus, note="" if gpus else (done.stderr.strip()[:300] or "no GPU listed"))


def visible_gpu_scheduler() -> GpuScheduler | None:
    """One lease scheduler over this machine's GPUs (None without any): what a server, a trainer or a
    best-of-N run shares between its sessions, so timed work never overlaps on a GPU."""
    gpus = [g.index for g in gpu_specs().gpus]
    return GpuScheduler(gpus) if gpus else None


# Keyed by event loop: a scheduler serves one loop (its waiters are that loop's events).
_SHARED_SCHEDULERS: WeakKeyDictionary[object, GpuScheduler | None] = WeakKeyDictionary()


def shared_gpu_scheduler() -> GpuScheduler | None:
    """The scheduler over this machine's GPUs that everything in the running event loop shares, made on
    first use (None without a GPU). For callers that are not told which scheduler to use, such as each
    `KernelEnv` a trainer makes: two sessions that each lease nothing would time over each other's work."""
    try:
        loop: object = asyncio.get_running_loop()
    except RuntimeError:  # another async backend (trio): one scheduler per thread that runs it
        loop = threading.current_thread()
    if loop not in _SHARED_SCHEDULERS:
        _SHARED_SCHEDULERS[loop] = visible_gpu_scheduler()
    return _SHARED_SCHEDULERS[loop]


# The NVIDIA driver's control node (Linux), or the GPU paravirtualisation device of WSL 2.
DRIVER_NODES = (Path("/dev/nvidiactl"), Path("/dev/dxg"))


def gpu_absence() -> str | None:
    """Why this process cannot see a GPU, or None when it may (the judge finds out for sure). Cheap:
    no torch, no CUDA context, no nvidia-smi; asked before every evaluation on device 'cuda'."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.split(",")[0].strip() in ("", "-1", "none", "NoDevFiles"):
        return f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    if not any(node.exists() for node in DRIVER_NODES):
        return "no NVIDIA driver: /dev/nvidiactl is missing"
    return None


def require_gpu(*devices: str, scheduler: GpuScheduler | None = None) -> None:
    """Refuse device 'cuda' up front where no GPU is visible: one line that says what to do, instead of
    a judge that starts, fails in torch's CUDA initialisation and reports its traceback. A session with
    a scheduler has GPUs by construction (it leases one to each judge, whatever this process's
    CUDA_VISIBLE_DEVICES says), so it is not asked."""
    if scheduler is None and "cuda" in devices and (reason := gpu_absence()) is not None:
        raise GpuUnavailable(reason)
