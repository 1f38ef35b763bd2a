"""How much GPU memory a candidate's processes may hold, and the watch that stops them beyond it (issue 24,
item 4). Measured from outside, never asked of the worker: NVML's per-process accounting (the driver's),
polled by a thread of the judge, over the worker and every process in its cage.

Why polling and not enforcement: the driver's only enforcement is MPS's per-client pinned-memory limit,
and MPS is a machine-wide daemon (not running on the machines we are lent,
benchmarks/results/h200_memory_probe_91322a3.json) whose clients every judge and worker would become, with
effects on timing and CUDA IPC nobody has measured. So the budget is a line drawn by
measurement: an allocation held for longer than one poll (`POLL_S`) is seen, the worker tree is killed at
once, and the verdict names the limit. An allocation shorter than that can go unseen; what it does to a
concurrent evaluation (an out-of-memory there) is that evaluation's infrastructure fault, retried, never its
verdict (`gpu_memory.py`).

What NVML counts, measured on the H200 (same file): a process's own allocations, torch's or raw
`cuMemAlloc`, and its context (about 520 MiB); not what it maps from another process over CUDA IPC (the
judge's inputs cost a worker nothing).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from cuda_agent_mcp.evaluation.job import GIB, GpuMemoryPolicy

POLL_S = 0.02  # one NVML process list costs about 0.02 ms on the H200


class Watched(Protocol):
    """What the watch needs of a worker (judge/worker_client.py's Worker)."""

    def gpu_pids(self) -> set[int]: ...

    def stop_now(self) -> None: ...


@dataclass(frozen=True)
class Overrun:
    held_bytes: int
    budget_bytes: int
    processes: int

    def describe(self) -> str:
        return (
            f"the candidate's {self.processes} process(es) held {self.held_bytes / GIB:.2f} GiB of GPU memory, "
            f"over this task's budget of {self.budget_bytes / GIB:.2f} GiB"
        )


@dataclass
class _Entry:
    budget_bytes: int
    peak_bytes: int = 0
    overrun: Overrun | None = None


class MemoryWatch:
    """One thread per judge, polling NVML for every worker it was asked to watch; a worker over its budget
    is killed (`stop_now`: signals only, safe from this thread) and its overrun kept for the judge's verdict."""

    def __init__(self, nvml: Any, device_handle: Any, *, poll_s: float = POLL_S) -> None:
        self.nvml = nvml
        self.handle = device_handle
        self.poll_s = poll_s
        self._entries: dict[Watched, _Entry] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Looks that failed (NVML errors) and that succeeded: a watch that cannot see is reported, not trusted.
        self.failed_polls = 0
        self.good_polls = 0

    def watch(self, worker: Watched, budget_bytes: int) -> None:
        """Watch `worker` from now on under `budget_bytes`, or the largest budget it had before: its allocator
        keeps what an earlier, larger batch needed (torch caches freed blocks), so a budget never shrinks."""
        with self._lock:
            entry = self._entries.setdefault(worker, _Entry(budget_bytes))
            entry.budget_bytes = max(entry.budget_bytes, budget_bytes)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gpu-memory-watch", daemon=True)
            self._thread.start()
        self.poll()  # at once: a worker already over its new budget is stopped before it is asked anything

    def overrun(self, worker: Watched) -> Overrun | None:
        with self._lock:
            entry = self._entries.get(worker)
            return entry.overrun if entry is not None else None

    def peak_bytes(self) -> int:
        """The most any watched worker was seen holding."""
        with self._lock:
            return max((e.peak_bytes for e in self._entries.values()), default=0)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def poll(self) -> None:
        """One look at the device: each watched worker's processes and what NVML says they hold."""
        with self._lock:
            entries = list(self._entries.items())
        if not entries:
            return
        try:
            held_by = self._held_by_pid()
        except Exception:
            self.failed_polls += 1
            return
        self.good_polls += 1
        for worker, entry in entries:
            try:
                pids = worker.gpu_pids()
            except Exception:  # a container the engine cannot list: this look saw nothing of it
                self.failed_polls += 1
                continue
            held = sum(held_by.get(pid, 0) for pid in pids)
            with self._lock:
                entry.peak_bytes = max(entry.peak_bytes, held)
                over = entry.overrun is None and held > entry.budget_bytes
                if over:
                    entry.overrun = Overrun(held, entry.budget_bytes, len([p for p in pids if p in held_by]))
            if over:
                worker.stop_now()

    def _held_by_pid(self) -> dict[int, int]:
        held: dict[int, int] = {}
        for process in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
            held[int(process.pid)] = held.get(int(process.pid), 0) + int(process.usedGpuMemory or 0)
        return held

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            with contextlib.suppress(Exception):  # the watch must never take the judge down
                self.poll()


def watch_for_device(device_uuid: str, nvml: Any) -> tuple[MemoryWatch | None, str]:
    """A watch over the device named by its UUID, or None and why not."""
    if nvml is None:
        return None, "unbounded: NVML (nvidia-ml-py) is not importable in the judge"
    try:
        name = device_uuid if device_uuid.startswith("GPU-") else f"GPU-{device_uuid}"
        return MemoryWatch(nvml, nvml.nvmlDeviceGetHandleByUUID(name)), ""
    except Exception as exc:
        return None, f"unbounded: NVML cannot find the device ({exc})"


class CandidateMemory:
    """The judge's side of the budget: what each candidate worker may hold now, the watch that holds it to
    that, and what the result says of it. Without a watch (no GPU, no NVML), or with one that never read
    NVML, nothing is bounded, and `describe` says so: never a claim of a limit that was not in force."""

    def __init__(
        self, policy: GpuMemoryPolicy, device_bytes: int, watch: MemoryWatch | None, why_not: str
    ) -> None:
        self.policy = policy
        self.device_bytes = device_bytes
        self.watch = watch
        self.why_not = why_not
        self.reference_bytes = 0  # the reference's peak working memory for one call, as the judge ran it
        self.largest_budget = 0

    def limit(self, worker: Watched, out_bytes: int) -> None:
        """Hold `worker` to the budget of a batch returning `out_bytes` of outputs, from now on."""
        if self.watch is None:
            return
        budget = self.policy.budget(
            out_bytes=out_bytes, reference_bytes=self.reference_bytes, device_bytes=self.device_bytes
        )
        self.largest_budget = max(self.largest_budget, budget)
        self.watch.watch(worker, budget)

    def overrun(self, worker: Watched) -> Overrun | None:
        return self.watch.overrun(worker) if self.watch is not None else None

    def describe(self) -> str:
        if self.watch is None:
            return self.why_not
        if not self.largest_budget:
            return "bounded by NVML, but no candidate worker ran"
        blind = f"; {self.watch.failed_polls} poll(s) failed" if self.watch.failed_polls else ""
        if not self.watch.good_polls:
            return f"unbounded: NVML could not be read{blind}"
        return (
            f"at most {self.largest_budget / GIB:.2f} GiB per candidate worker and its processes, read by NVML "
            f"every {self.watch.poll_s * 1e3:.0f} ms; the most seen held {self.watch.peak_bytes() / GIB:.2f} GiB"
            f"{blind}"
        )

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
