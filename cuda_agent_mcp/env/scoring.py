"""Batched scoring for single-turn RL: many (task, solution) pairs, rewards back in order.

Each solution gets its own workspace. All of them share one GPU scheduler over the visible GPUs, so
timed work holds a GPU alone while builds and other solutions' correctness checks overlap with it;
`concurrency` (default two per GPU) bounds how many solutions are in flight. Infrastructure failures are
retried by the episodes' rule (`agent/failures.py`; `settings.infra_retries` unless `infra_retries` is
given), then reported as such (`masked`), never as a bad reward for the model.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.agent.actions import EnvironmentSettings, evaluate_request
from cuda_agent_mcp.agent.failures import FailureKind, InfraFailure, verdict_failure, with_infra_retries
from cuda_agent_mcp.agent.search import gpu_scheduler
from cuda_agent_mcp.agent.snapshot import restore
from cuda_agent_mcp.bench.rows import verdict_message
from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.evaluation.reward import FAIL, RewardSchedule
from cuda_agent_mcp.results import EvalResult
from cuda_agent_mcp.tasks import Task, TaskCatalog
from cuda_agent_mcp.tools import Session, evaluate_kernels


class Solution(BaseModel):
    """A candidate: its editable files (model_new.py and kernels/...) for one task."""

    model_config = ConfigDict(frozen=True)

    task: str = Field(description="task id or .py path")
    files: dict[str, str]


class Score(BaseModel):
    index: int
    task_id: str
    reward: float
    status: str = Field(description="verdict status, or 'infrastructure_error'")
    failure: FailureKind | None = None
    masked: bool = Field(
        default=False, description="the environment failed: leave this sample out of the update"
    )
    attempts: int = 1
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    message: str = Field(default="", description="why: the deciding verdict's message, or the failure's")


async def score_batch(
    solutions: Sequence[Solution],
    *,
    catalog: TaskCatalog | None = None,
    settings: EnvironmentSettings | None = None,
    schedule: RewardSchedule = "milestones",
    concurrency: int | None = None,
    infra_retries: int | None = None,
    trials: int = 5,
) -> list[Score]:
    catalog = catalog or TaskCatalog.from_environment()
    settings = settings or EnvironmentSettings()
    scheduler = gpu_scheduler(settings)
    gpus = len(scheduler.status()) if scheduler is not None else 0
    limit = anyio.CapacityLimiter(concurrency or max(2 * gpus, 1))
    request = evaluate_request(settings, trials=trials, schedule=schedule)
    scores: list[Score | None] = [None] * len(solutions)
    root = Path(tempfile.mkdtemp(prefix="cuda-agent-score-"))

    async def one(index: int, solution: Solution) -> None:
        try:
            task: Task = catalog.get(solution.task)
        except CudaAgentError as exc:
            scores[index] = Score(
                index=index, task_id=solution.task, reward=FAIL, status="bad_task", message=str(exc)
            )
            return
        session = Session.create(
            task,
            root / f"solution-{index}",
            scheduler=scheduler,
            seed=settings.session_seed(index),
            language=settings.language,
        )
        restore(session, solution.files)

        async def evaluate() -> EvalResult:
            async with limit:
                return await evaluate_kernels(session, request)

        try:
            retries = settings.infra_retries if infra_retries is None else infra_retries
            result, attempts = await with_infra_retries(evaluate, retries)
        except InfraFailure as failure:
            scores[index] = Score(
                index=index,
                task_id=task.id,
                reward=0.0,
                status="infrastructure_error",
                failure="infrastructure",
                masked=True,
                attempts=failure.attempts,
                message=str(failure.cause),
            )
            return
        decisive = result.verify.verdict
        if decisive.status == "passed" and result.profile is not None:
            decisive = result.profile.verdict
        status = decisive.status
        scores[index] = Score(
            index=index,
            task_id=task.id,
            reward=result.reward,
            status=status,
            failure=verdict_failure(status),
            attempts=attempts,
            speedup_vs_eager=result.profile.speedup_vs_eager if result.profile else None,
            speedup_vs_compile=result.profile.speedup_vs_compile if result.profile else None,
            message=verdict_message(decisive),
        )
        shutil.rmtree(session.workspace.root, ignore_errors=True)

    try:
        async with anyio.create_task_group() as group:
            for index, solution in enumerate(solutions):
                group.start_soon(one, index, solution)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return [s for s in scores if s is not None]
