"""A job's progress as wait_job reports it: its step, the share of its steps done, the last message."""

from __future__ import annotations

import threading

import anyio

from cuda_agent_mcp.build import BuildProgress
from cuda_agent_mcp.server.jobs import JobBoard, JobProgress
from cuda_agent_mcp.server.views import CompileView


def _run_through(kind, events: list[BuildProgress]) -> tuple[list[JobProgress], JobProgress]:
    """Start a job that emits `events` one at a time; the progress seen after each, then at the end."""
    board = JobBoard(budget_s=5.0)
    step, resume = threading.Semaphore(0), threading.Semaphore(0)

    async def work(progress):
        for event in events:
            progress(event)
            step.release()
            await anyio.to_thread.run_sync(resume.acquire)
        return CompileView(ok=True, summary="built", wall_s=0.1)

    job_id = board.start(kind, "s", "c", work)
    seen = []
    for _ in events:
        step.acquire()
        seen.append(board.state(job_id, "c").progress)
        resume.release()
    final = anyio.run(board.wait, job_id, "c", 5.0)
    return seen, final.progress


def test_an_evaluation_goes_through_build_verify_and_profile() -> None:
    events = [
        BuildProgress(stage="queue", message="waiting for a GPU: 1 ahead"),
        BuildProgress(stage="compile", message="compiled kernels/a.cu", done=1, total=2, file="kernels/a.cu"),
        BuildProgress(stage="done", message="built", done=2, total=2),
        BuildProgress(stage="verify", message="the judge checks ModelNew"),
        BuildProgress(stage="done", message="built (cached)", done=2, total=2),  # profile's own build
        BuildProgress(stage="profile", message="the judge times ModelNew"),
    ]
    seen, final = _run_through("evaluate", events)
    assert [(p.phase, p.percent) for p in seen] == [
        ("queue", 0),
        ("build", 16),
        ("build", 33),
        ("verify", 33),
        ("verify", 33),  # a cached rebuild does not move it back
        ("profile", 66),
    ]
    assert seen[1].message == "compile: compiled kernels/a.cu"
    assert (final.phase, final.percent) == ("done", 100)


def test_a_compile_counts_its_units() -> None:
    events = [BuildProgress(stage="compile", message=f"unit {i}", done=i, total=4) for i in (1, 2, 3)]
    seen, _ = _run_through("compile", events)
    assert [p.percent for p in seen] == [25, 50, 75]
