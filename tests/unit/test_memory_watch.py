"""The GPU memory budget of a candidate's processes (judge/memory_watch.py, issue 24 item 4): the budget's
arithmetic, the watch against NVML's answers (a fake NVML here: the driver's replies, not ours; the real
one in tests/gpu/test_containment_gpu.py) and the worker's side of it with real forked workers."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from cuda_agent_mcp.evaluation.job import GIB, GpuMemoryPolicy
from cuda_agent_mcp.judge.memory_watch import CandidateMemory, MemoryWatch, watch_for_device
from cuda_agent_mcp.judge.worker_client import ForkedWorkerPool
from tests.processes import alive


class NVMLError(Exception):
    pass


class FakeNVML:
    """The process list NVML answers, from a dict the test changes (pid -> bytes held)."""

    def __init__(self) -> None:
        self.held: dict[int, int | None] = {}
        self.fails = False

    def nvmlDeviceGetHandleByUUID(self, name: str) -> str:
        if name != "GPU-known":
            raise NVMLError("Not Found")
        return "handle"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[SimpleNamespace]:
        if self.fails:
            raise NVMLError("Unknown Error")
        return [SimpleNamespace(pid=pid, usedGpuMemory=held) for pid, held in self.held.items()]


class Tree:
    """A worker as the watch sees it: the pids of its tree, and whether it was stopped."""

    def __init__(self, *pids: int) -> None:
        self.pids = set(pids)
        self.stopped = 0

    def gpu_pids(self) -> set[int]:
        return set() if self.stopped else self.pids

    def stop_now(self) -> None:
        self.stopped += 1


def test_the_budget_is_the_larger_of_a_share_of_the_device_and_what_the_task_needs() -> None:
    policy = GpuMemoryPolicy()
    device = 140 * GIB
    # a small task: the share of the device (1/16)
    assert policy.budget(out_bytes=1 << 20, reference_bytes=1 << 20, device_bytes=device) == device // 16
    # a large one: four times its outputs and the reference's working memory, and the allowance
    big = policy.budget(out_bytes=16 * GIB, reference_bytes=2 * GIB, device_bytes=device)
    assert big == 2 * GIB + 64 * GIB + 8 * GIB
    # an operator's fixed budget wins over both
    fixed = GpuMemoryPolicy(limit_bytes=3 * GIB)
    assert fixed.budget(out_bytes=16 * GIB, reference_bytes=2 * GIB, device_bytes=device) == 3 * GIB


def test_a_tree_over_its_budget_is_stopped_once_and_its_overrun_kept() -> None:
    nvml = FakeNVML()
    watch = MemoryWatch(nvml, "handle", poll_s=3600)  # polled by hand here
    honest, hog = Tree(10), Tree(20, 21)
    nvml.held = {10: 1 * GIB, 20: 1 * GIB, 21: 3 * GIB, 99: 50 * GIB}  # 99: someone else's, never counted
    try:
        watch.watch(honest, 2 * GIB)
        watch.watch(hog, 2 * GIB)  # its child's memory counts with it
        assert hog.stopped == 1 and honest.stopped == 0
        overrun = watch.overrun(hog)
        assert overrun is not None and overrun.held_bytes == 4 * GIB and overrun.processes == 2
        assert "4.00 GiB" in overrun.describe() and "2.00 GiB" in overrun.describe()
        assert watch.overrun(honest) is None
        watch.poll()
        assert hog.stopped == 1, "an overrun is acted on once"
        assert watch.peak_bytes() == 4 * GIB
    finally:
        watch.close()


def test_a_larger_batch_raises_the_budget_and_a_tree_is_watched_between_requests() -> None:
    nvml = FakeNVML()
    watch = MemoryWatch(nvml, "handle", poll_s=0.005)
    tree = Tree(30)
    nvml.held = {30: 3 * GIB}
    try:
        watch.watch(tree, 4 * GIB)
        assert tree.stopped == 0
        watch.watch(tree, 2 * GIB)  # a smaller batch later: the allocator still caches the larger one's
        watch.poll()
        assert tree.stopped == 0, "a budget never shrinks"
        nvml.held = {30: 5 * GIB}  # grows while nobody asks: the watch's own thread sees it
        deadline = time.monotonic() + 5
        while not tree.stopped and time.monotonic() < deadline:
            time.sleep(0.005)
        assert tree.stopped == 1
    finally:
        watch.close()


def test_a_watch_that_cannot_read_nvml_says_so_and_a_missing_watch_claims_no_limit() -> None:
    nvml = FakeNVML()
    nvml.fails = True
    watch, why = watch_for_device("known", nvml)
    assert watch is not None and why == ""
    memory = CandidateMemory(GpuMemoryPolicy(), 140 * GIB, watch, why)
    try:
        memory.limit(Tree(40), 0)
        assert watch.failed_polls >= 1
        assert "poll(s) failed" in memory.describe()
    finally:
        memory.close()
    none, why = watch_for_device("unknown", FakeNVML())
    assert none is None and why.startswith("unbounded: NVML cannot find the device")
    absent, why = watch_for_device("known", None)
    assert absent is None and "not importable" in why
    unbounded = CandidateMemory(GpuMemoryPolicy(), 140 * GIB, None, why)
    unbounded.limit(Tree(41), 0)  # nothing to enforce it with: nothing happens, nothing is claimed
    assert unbounded.describe() == why and unbounded.overrun(Tree(41)) is None


def test_a_forked_worker_names_its_tree_and_is_stopped_from_another_thread(tmp_path: Path) -> None:
    """The worker's side, with a real forked worker: its pids while it lives, nothing once reaped (so the
    watch can never signal a pid the kernel gave to someone else), and stop_now kills without reaping."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    pool = ForkedWorkerPool(scratch, {})
    worker = pool.take()
    try:
        pid = worker.process.pid
        assert pid in worker.gpu_pids()
        import threading

        stopper = threading.Thread(target=worker.stop_now)
        stopper.start()
        stopper.join(timeout=10)
        deadline = time.monotonic() + 10
        while worker.exit_status() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker.exit_status() is not None, "stop_now did not kill the worker"
    finally:
        worker.close()
    assert worker.gpu_pids() == set()
    worker.stop_now()  # after the reaping: a no-op, never a signal
    assert not alive(pid)


@pytest.mark.parametrize("held", [None, 0])
def test_a_process_nvml_reports_nothing_for_counts_as_holding_nothing(held: int | None) -> None:
    nvml = FakeNVML()
    nvml.held = {50: held}
    watch = MemoryWatch(nvml, "handle", poll_s=3600)
    tree = Tree(50)
    try:
        watch.watch(tree, 1)
        assert tree.stopped == 0 and watch.peak_bytes() == 0
    finally:
        watch.close()


def test_a_watch_that_never_read_nvml_claims_no_limit_and_one_that_did_says_what_it_saw() -> None:
    nvml = FakeNVML()
    nvml.fails = True
    memory = CandidateMemory(GpuMemoryPolicy(), 140 * GIB, MemoryWatch(nvml, "handle", poll_s=3600), "")
    tree = Tree(60)
    try:
        memory.limit(tree, 0)
        assert memory.describe().startswith("unbounded: NVML could not be read"), memory.describe()
        nvml.fails = False
        nvml.held = {60: GIB}
        memory.limit(tree, 0)
        assert memory.describe().startswith("at most 8.75 GiB"), memory.describe()
        assert "the most seen held 1.00 GiB; 1 poll(s) failed" in memory.describe()
    finally:
        memory.close()
