"""The health probe and when the tool layer runs it."""

from __future__ import annotations

import pytest

from cuda_agent_mcp.evaluation.job import JudgeReport
from cuda_agent_mcp.executors.health import probe_gpu
from cuda_agent_mcp.results import Crashed, Passed, TimedOut, WrongOutput
from cuda_agent_mcp.tools.evaluate import needs_health_check
from tests.conftest import _gpu_problem


@pytest.mark.parametrize(
    ("verdict", "infra_error", "expected"),
    [
        (Crashed(phase="call", kind="cuda_error", message="illegal memory access"), None, True),
        (Crashed(phase="call", kind="process_exited", message="exit status -11"), None, True),
        (TimedOut(phase="call", limit_s=30), None, True),
        (Passed(trials=5, max_abs_error=0, max_rel_error=0), "judge died", True),
        (Crashed(phase="call", kind="exception", message="ValueError"), None, False),
        (WrongOutput(phase="verify", trial=0, distribution="task", message="off"), None, False),
        (Passed(trials=5, max_abs_error=0, max_rel_error=0), None, False),
    ],
)
def test_the_gpu_is_probed_after_crashes_timeouts_and_judge_failures_only(
    verdict, infra_error, expected
) -> None:
    report = JudgeReport(verdict=verdict, gpu="x", infra_error=infra_error)
    assert needs_health_check(report) is expected


@pytest.mark.skipif(_gpu_problem() is None, reason="this machine has a GPU")
def test_on_a_machine_without_a_working_gpu_the_probe_says_why() -> None:
    reason = probe_gpu(0, timeout_s=120)
    assert reason is not None and reason.startswith("the probe kernel on GPU 0 failed:")


@pytest.mark.gpu
def test_a_healthy_gpu_passes_the_probe() -> None:
    assert probe_gpu(0) is None
