"""The judge's check that the timed GPU is its own (judge/gpu_guard.py), against NVML's answers: a fake
NVML here (these are the driver's replies, not ours), the real one in tests/gpu/test_gpu_guard_gpu.py."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from cuda_agent_mcp.judge import gpu_guard
from cuda_agent_mcp.judge.gpu_guard import GpuBusy, GpuGuard, descendants


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        self.value = value


class FakeNVML:
    """NVML's three calls the guard makes, answering from lists the test changes."""

    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_NOT_SUPPORTED = 3

    def __init__(self) -> None:
        self.contexts: list[SimpleNamespace] = []
        self.fails = False

    def nvmlDeviceGetHandleByUUID(self, name: str) -> str:
        assert name.startswith("GPU-")
        return "handle"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[SimpleNamespace]:
        if self.fails:
            raise NVMLError(999)
        return self.contexts


def context(pid: int, held: int | None = 1 << 20) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, usedGpuMemory=held)


OURS = {100, 101}


def test_every_foreign_context_counts_but_ours_and_idle_judges_of_this_server(monkeypatch) -> None:
    nvml = FakeNVML()
    nvml.contexts = [
        SimpleNamespace(pid=100, usedGpuMemory=1 << 30),
        SimpleNamespace(pid=400, usedGpuMemory=512 << 20),
        SimpleNamespace(pid=500, usedGpuMemory=None),
    ]
    monkeypatch.setattr(gpu_guard, "is_peer_judge", lambda pid: pid == 500)
    guard = GpuGuard("uuid", nvml, own=lambda: OURS)
    assert guard.mode == "nvml process list"
    assert [(p.pid, p.activity) for p in guard.foreign()] == [(400, "a context holding 512 MiB")]
    # NVML failing to answer is no evidence of a free GPU
    nvml.fails = True
    with pytest.raises(GpuBusy, match="could not list"):
        guard.foreign()


def test_foreign_work_delays_timing_until_it_leaves_and_fails_as_infrastructure_if_it_stays(
    monkeypatch,
) -> None:
    monkeypatch.setattr(gpu_guard, "POLL_S", 0.01)
    nvml = FakeNVML()
    guard = GpuGuard("uuid", nvml, own=lambda: OURS)
    polls = {"n": 0}
    real_foreign = guard.foreign

    def leaves_after_three():
        polls["n"] += 1
        nvml.contexts = [context(300)] if polls["n"] <= 3 else []
        return real_foreign()

    monkeypatch.setattr(guard, "foreign", leaves_after_three)
    assert guard.wait_until_free(limit_s=5) >= 0
    assert polls["n"] == 4
    nvml.contexts = [context(300)]
    monkeypatch.setattr(guard, "foreign", real_foreign)
    with pytest.raises(GpuBusy, match="pid 300"):
        guard.wait_until_free(limit_s=0.05)


def test_without_nvml_the_guard_says_it_did_not_check() -> None:
    guard = GpuGuard("uuid", None)
    if guard.nvml is not None:
        pytest.skip("NVML is importable here")
    assert not guard.active and guard.mode.startswith("unchecked")
    assert guard.foreign() == []


def test_our_processes_are_this_process_and_its_descendants() -> None:
    child = os.fork()
    if child == 0:
        import time

        time.sleep(5)
        os._exit(0)
    try:
        mine = descendants(os.getpid())
        assert os.getpid() in mine and child in mine
        assert os.getppid() not in mine
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)
