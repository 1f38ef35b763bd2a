"""The judge holds a candidate's processes to a memory budget and rejects it beyond (issue 24, item 4), on the
CPU: the whole judge and real workers, with an NVML that reports each process's resident host memory as what
it holds (the only stand-in: the driver's accounting). The GPU test is tests/gpu/test_containment_gpu.py."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from types import SimpleNamespace

import pytest

from cuda_agent_mcp.evaluation.job import GIB, GpuMemoryPolicy
from cuda_agent_mcp.isolation.cgroup import pids_cgroup_root
from cuda_agent_mcp.judge.judge import Judge
from cuda_agent_mcp.judge.memory_watch import CandidateMemory, MemoryWatch
from cuda_agent_mcp.results import Passed, Rejected
from tests.evaluator.conftest import HONEST, honest_running


class ResidentMemoryNVML:
    """NVML's process list, answered with every process's resident memory (from /proc)."""

    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> list[SimpleNamespace]:
        found = []
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                rss = next(line for line in status.read_text().splitlines() if line.startswith("VmRSS:"))
            except (OSError, StopIteration):
                continue
            found.append(
                SimpleNamespace(pid=int(status.parent.name), usedGpuMemory=int(rss.split()[1]) * 1024)
            )
        return found


LIMIT = 2 * GIB  # a forked worker holds well under 1 GiB resident (torch is shared with its fork server)


@pytest.fixture
def watched(monkeypatch):
    """Every judge in the test watches its candidate workers' resident memory under LIMIT."""

    def candidate_memory(judge: Judge) -> CandidateMemory:
        watch = MemoryWatch(ResidentMemoryNVML(), "handle", poll_s=0.01)
        return CandidateMemory(GpuMemoryPolicy(limit_bytes=LIMIT), 0, watch, "")

    prop = cached_property(candidate_memory)
    prop.__set_name__(Judge, "candidate_memory")
    monkeypatch.setattr(Judge, "candidate_memory", prop)


def hog(where: str) -> str:
    """A candidate that fills 3 GiB (touched, so resident) and keeps it, in its call or in a child."""
    grab = "keep = b'x' * (3 << 30)  # written, so resident\n"
    if where == "call":
        body = "import time\n" + grab + "time.sleep(5)\n"
    else:  # a child the candidate forks: its memory is the candidate's too
        body = (
            "import os, time\n"
            "if os.fork() == 0:\n    " + grab.replace("\n", "\n    ") + "time.sleep(5)\n    os._exit(0)\n"
            "time.sleep(5)\n"
        )
    return honest_running(body)


def test_an_honest_candidate_passes_under_its_budget_and_the_result_says_what_bounded_it(
    run_judge, watched
) -> None:
    report = run_judge(HONEST)
    assert isinstance(report.verdict, Passed), report.verdict
    limit = report.environment["gpu_memory_limit"]
    assert limit.startswith("at most 2.00 GiB per candidate worker"), limit
    assert "the most seen held 0.00 GiB" not in limit, "the watch saw nothing of the worker"


@pytest.mark.parametrize(
    "where",
    [
        "call",
        pytest.param(
            "child",
            marks=pytest.mark.skipif(
                pids_cgroup_root() is None, reason="a child is found through its pids cgroup"
            ),
        ),
    ],
)
def test_a_candidate_over_its_budget_is_killed_and_rejected_for_it(run_judge, watched, where) -> None:
    report = run_judge(hog(where))
    assert isinstance(report.verdict, Rejected), report.verdict
    assert report.verdict.reason == "gpu_memory_exceeded", report.verdict
    assert report.verdict.evidence["budget_bytes"] == LIMIT
    assert report.verdict.evidence["held_bytes"] > LIMIT
    assert isinstance(run_judge(HONEST).verdict, Passed)


def test_off_the_gpu_no_limit_is_claimed(run_judge) -> None:
    report = run_judge(HONEST)
    assert report.environment["gpu_memory_limit"] == "not applicable (no GPU)"
