"""Is the timed GPU ours alone (issue 24)? Asked of the driver, from outside every candidate process.

Before each timed phase (baselines included) and after it, the judge asks NVML which processes hold a
compute context on the device, and counts as foreign every one that is not its own (itself and its
descendants: the fork server and the workers it forked) and not an idle judge of this server (a judge is
recognised by its cgroup, `judge-*/main` of our hierarchy, which no candidate process can join).
Found before timing, the judge waits for it to go, for a bounded time; found afterwards, the timing is
discarded as the infrastructure's (`HarnessFault`, retried on a fresh judge). Neither is ever charged to
the candidate; processes a candidate left behind are its own rejection (`Judge._check_left_running`).
Where NVML cannot be asked, `GpuGuard.mode` says so and results carry it: never a claim of a check that
did not run.

A context is the evidence, not activity, because nothing better was seen working on the H200
(benchmarks/results/h200_containment_probe_4501cf7.json and the containment run of 608e089): NVML's
per-process utilization returned no sample for a foreign spinner, and a calibration kernel (a 1 GiB copy,
a bf16 matmul, timed with CUDA events) ran as fast beside one as alone. So an idle foreign process that
merely holds a context also delays timing, and fails it after `FOREIGN_WAIT_S`: fail closed.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent_mcp.judge.gpu_memory import nvml_module

# How long a phase waits for foreign work to leave before the job fails as the infrastructure's.
FOREIGN_WAIT_S = 30.0
POLL_S = 0.25


@dataclass(frozen=True)
class ForeignProcess:
    pid: int
    activity: str  # "a context holding 512 MiB"

    def describe(self) -> str:
        return f"pid {self.pid} ({self.activity})"


class GpuBusy(Exception):
    """Foreign work on the timed GPU: the infrastructure's, never the candidate's."""


def descendants(root: int) -> set[int]:
    """`root` and every process below it, from /proc (parents as the kernel records them)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, stack = {root}, [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def is_peer_judge(pid: int) -> bool:
    """A judge server of this machine's evaluator: its cgroup is the `main` leaf of a `judge-*` subtree in
    our hierarchy (isolation/cgroup.py's `delegate`), which only the root tool process can put it in."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            path = line.split(":", 2)[-1]
            parts = path.strip("/").split("/")
            if (
                len(parts) >= 3
                and parts[-1] == "main"
                and parts[-2].startswith("judge-")
                and "cuda-agent" in parts
            ):
                return True
    return False


class GpuGuard:
    """NVML's view of one device, for the judge's check that nobody else works on it."""

    def __init__(
        self, device_uuid: str, nvml: Any | None = None, *, own: Callable[[], set[int]] | None = None
    ) -> None:
        self.nvml = nvml if nvml is not None else nvml_module()
        self.own = own or (lambda: descendants(os.getpid()))
        self.handle: Any = None
        self.mode = "unchecked: NVML (nvidia-ml-py) is not importable in the judge"
        if self.nvml is None:
            return
        try:
            name = device_uuid if device_uuid.startswith("GPU-") else f"GPU-{device_uuid}"
            self.handle = self.nvml.nvmlDeviceGetHandleByUUID(name)
        except Exception as exc:
            self.mode = f"unchecked: NVML cannot find the device ({exc})"
            return
        self.mode = "nvml process list"

    @property
    def active(self) -> bool:
        return self.handle is not None

    def foreign(self) -> list[ForeignProcess]:
        """Processes not ours that hold a context on the device now."""
        if not self.active:
            return []
        try:  # a failing query is no evidence of a free GPU
            contexts = [
                (int(p.pid), int(p.usedGpuMemory or 0))
                for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
            ]
        except Exception as exc:
            raise GpuBusy(f"NVML could not list the processes on the GPU ({exc})") from None
        ours = self.own()
        return [
            ForeignProcess(pid, f"a context holding {held / 2**20:.0f} MiB")
            for pid, held in contexts
            if pid not in ours and not is_peer_judge(pid)
        ]

    def wait_until_free(self, *, limit_s: float = FOREIGN_WAIT_S) -> float:
        """Block until no foreign process holds a context on the device; returns the seconds waited.
        GpuBusy after `limit_s`."""
        started = time.monotonic()
        while found := self.foreign():
            if time.monotonic() - started > limit_s:
                raise GpuBusy(
                    f"foreign work on the GPU for over {limit_s:.0f} s before timing: {listing(found)}"
                )
            time.sleep(POLL_S)
        return time.monotonic() - started


def listing(found: list[ForeignProcess]) -> str:
    return ", ".join(p.describe() for p in found[:6]) + (
        f" and {len(found) - 6} more" if len(found) > 6 else ""
    )
