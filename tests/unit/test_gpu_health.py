"""The health probe and when the tool layer runs it."""

from __future__ import annotations

from types import SimpleNamespace

import anyio
import pytest

from cuda_agent_mcp.evaluation.job import JudgeReport
from cuda_agent_mcp.executors import health
from cuda_agent_mcp.executors.health import probe_gpu
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.results import Crashed, Passed, TimedOut, WrongOutput
from cuda_agent_mcp.tools import evaluate
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


def test_processes_of_ours_on_the_gpu_are_looked_for_only_by_a_lease_that_holds_it_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Beside other evaluations (shared leases) their live workers are processes of this server too: a
    probe that took them for leftovers drained the GPU under all of them (8 at once on the H200)."""
    asked: list[bool] = []

    def probe(gpu: int, *, look_for_leftovers: bool = True) -> str | None:
        asked.append(look_for_leftovers)
        return None

    monkeypatch.setattr(evaluate, "probe_gpu", probe)
    scheduler = GpuScheduler([0], shared_slots=4)
    session = SimpleNamespace(scheduler=scheduler)

    async def main() -> None:
        async with scheduler.lease("a", exclusive=False):
            await evaluate._check_gpu(session, 0)  # type: ignore[arg-type]
            async with scheduler.lease("b", exclusive=False):
                assert scheduler.holders(0) == 2
                await evaluate._check_gpu(session, 0)  # type: ignore[arg-type]
        async with scheduler.lease("c", exclusive=True):
            assert scheduler.holders(0) == 1
            await evaluate._check_gpu(session, 0)  # type: ignore[arg-type]

    anyio.run(main)
    assert asked == [True, False, True]
    assert scheduler.status() == {0: "idle"}  # no probe found a problem: nothing drained


def test_a_process_that_leaves_the_gpu_within_the_grace_is_no_leftover(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looks = iter([[4242], [4242], []])
    monkeypatch.setattr(health, "_our_processes_on", lambda gpu: next(looks))
    assert health._lasting_leftovers(0, grace_s=5.0) == []


def test_a_process_still_on_the_gpu_after_the_grace_is_a_leftover(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "_our_processes_on", lambda gpu: [4242])
    assert health._lasting_leftovers(0, grace_s=0.6) == [4242]
    monkeypatch.setattr(health, "_lasting_leftovers", lambda gpu, grace_s: [4242])
    monkeypatch.setattr(health.subprocess, "run", lambda *a, **k: SimpleNamespace(returncode=0, stderr=""))
    assert probe_gpu(0) == "processes of this server still hold GPU 0: [4242]"
    assert probe_gpu(0, look_for_leftovers=False) is None
