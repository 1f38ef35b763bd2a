"""On the GPU machine (issue 24): NVML shows the judge a foreign GPU spinner and the judge waits for it to
leave; a profile reports the check it ran and the cage its workers had, and a candidate whose extension
leaves a process running when imported is rejected with nothing left alive."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import torch

from cuda_agent_mcp.evaluation.judge_service import JudgePool
from cuda_agent_mcp.judge.gpu_guard import GpuGuard
from cuda_agent_mcp.tools import ProfileRequest, Session, VerifyRequest, profile_kernels, verify_kernels
from tests.conftest import EXAMPLES
from tests.processes import alive

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

SPINNER = (
    "import sys, time, torch\n"
    "torch.empty(1, device='cuda'); print('ready', flush=True)\n"
    "end = time.time() + float(sys.argv[1])\n"
    "while time.time() < end:\n"
    "    torch.cuda._sleep(10_000_000); torch.cuda.synchronize()\n"
)


# A process left at import, named so the test finds it from outside (the judge's /dev/shm is private).
LEFT_NAME = "cat-leftover"
LEAVE = r"""
#include <sys/prctl.h>
#include <unistd.h>
static void leave() {
  pid_t first = fork();
  if (first == 0) {
    setsid();
    if (fork() == 0) { prctl(PR_SET_NAME, "@NAME@", 0, 0, 0); for (;;) pause(); }
    _exit(0);
  }
}
static int started = (leave(), 0);
"""


def _named(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                entry.name.isdigit()
                and (entry / "comm").read_text().strip() == name
                and alive(int(entry.name))
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture
def relu_session(tmp_path: Path, shared_build_cache: Path) -> Iterator[Session]:
    """A session on a copy of the relu example (its workspace at tmp_path/ws), its judges closed after."""
    shutil.copytree(EXAMPLES / "relu", tmp_path / "ws")
    session = Session.open(tmp_path / "ws", cache_dir=shared_build_cache, judges=JudgePool(tmp_path / "logs"))
    try:
        yield session
    finally:
        session.judges.close()


def test_a_profile_says_what_guarded_it_and_a_process_left_at_import_is_rejected(
    tmp_path: Path, relu_session: Session
) -> None:
    session = relu_session
    profiled = anyio.run(profile_kernels, session, ProfileRequest(baselines="skip"))
    print("environment:", profiled.environment)
    assert profiled.verdict.status == "passed", profiled.verdict
    assert profiled.environment["gpu_exclusivity"].startswith("nvml"), profiled.environment
    assert "pids cgroup" in profiled.environment["worker_isolation"], profiled.environment
    assert "no pids cgroup" not in profiled.environment["worker_isolation"]
    (tmp_path / "ws" / "kernels" / "leave.cpp").write_text(LEAVE.replace("@NAME@", LEFT_NAME))
    verified = anyio.run(verify_kernels, session, VerifyRequest())
    assert verified.verdict.status == "rejected", verified.verdict
    assert verified.verdict.reason == "process_left_running", verified.verdict
    assert verified.verdict.evidence["processes_left"] >= 1
    deadline = time.monotonic() + 5
    while _named(LEFT_NAME) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _named(LEFT_NAME) == []


# 24 GiB allocated when the extension is imported and never freed: over the relu task's budget (the larger of
# 1/16 of the device, 8.8 GiB on an H200, and what its outputs and reference need).
HOG = r"""
#include <cuda_runtime.h>
static void* grab() {
  void* held = nullptr;
  cudaMalloc(&held, size_t(24) << 30);
  return held;
}
static void* held = grab();
"""


def test_a_candidate_holding_more_gpu_memory_than_its_budget_is_rejected_and_the_next_passes(
    tmp_path: Path, relu_session: Session
) -> None:
    session = relu_session
    honest = anyio.run(verify_kernels, session, VerifyRequest())
    limit = honest.environment["gpu_memory_limit"]
    print("honest:", limit)
    assert honest.verdict.status == "passed", honest.verdict
    assert limit.startswith("at most") and "the most seen held 0.00 GiB" not in limit, limit
    (tmp_path / "ws" / "kernels" / "hog.cpp").write_text(HOG)
    hog = anyio.run(verify_kernels, session, VerifyRequest())
    print("hog:", hog.verdict)
    assert hog.verdict.status == "rejected", hog.verdict
    assert hog.verdict.reason == "gpu_memory_exceeded", hog.verdict
    assert hog.verdict.evidence["held_bytes"] >= 24 << 30
    (tmp_path / "ws" / "kernels" / "hog.cpp").unlink()
    again = anyio.run(verify_kernels, session, VerifyRequest())
    print("again:", again.environment["gpu_memory_limit"])
    assert again.verdict.status == "passed", again.verdict


# Last in the file: the CUDA context this test makes stays in the pytest process, which a later test's
# judge would see as foreign work on the GPU (and wait for, 30 s, then fail).
def test_a_foreign_spinner_is_seen_and_timing_waits_for_it_to_leave() -> None:
    torch.empty(1, device="cuda")
    # Only this process is ours: the spinner is its child, standing in for another tenant's process.
    guard = GpuGuard(str(torch.cuda.get_device_properties(0).uuid), own=lambda: {os.getpid()})
    print("guard mode:", guard.mode)
    assert guard.active, guard.mode
    spinner = subprocess.Popen([sys.executable, "-c", SPINNER, "4"], stdout=subprocess.PIPE, text=True)
    try:
        assert spinner.stdout is not None and spinner.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        seen = guard.foreign()
        assert spinner.pid in [p.pid for p in seen], (guard.mode, seen)
        waited = guard.wait_until_free(limit_s=30)
        print(f"waited {waited:.2f} s for the spinner to leave")
        assert waited > 0.5 and spinner.poll() is not None
    finally:
        spinner.kill()
        spinner.wait()
    assert guard.foreign() == []
