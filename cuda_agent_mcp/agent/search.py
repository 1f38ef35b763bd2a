"""Best-of-N: independent trajectories in parallel, each in its own workspace, the best verified one
copied into the user's workspace. Seeds and temperatures are recorded per sample."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio

from cuda_agent_mcp.agent.actions import EnvironmentSettings
from cuda_agent_mcp.agent.loop import EpisodeResult, EventSink, Policy, rank_best, run_episode
from cuda_agent_mcp.agent.policy import Budgets, PolicyPreset
from cuda_agent_mcp.agent.snapshot import editable_files, restore
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.tools import Session
from cuda_agent_mcp.tools.gpu import visible_gpu_scheduler


async def best_of(
    session: Session,
    preset: PolicyPreset,
    policy: Policy,
    samples: int,
    trajectory_dir: Path,
    *,
    settings: EnvironmentSettings | None = None,
    budgets: Budgets | None = None,
    seed: int = 0,
    on_event: EventSink | None = None,
) -> tuple[EpisodeResult | None, list[EpisodeResult]]:
    """Run `samples` trajectories; the winner's files end up in `session`'s workspace."""
    scratch = session.workspace.root.parent / f".{session.workspace.root.name}.samples"
    # Samples share the GPUs through one scheduler: timed work never overlaps on a GPU.
    scheduler = session.scheduler or gpu_scheduler(settings or EnvironmentSettings())
    results: list[EpisodeResult | None] = [None] * samples

    async def one(index: int) -> None:
        sample = Session.create(
            session.task,
            scratch / f"sample-{index}",
            overwrite=True,
            language=session.workspace.language,  # a sample writes the language its workspace builds
            cache_dir=session.cache_dir,
            scheduler=scheduler,
        )
        restore(sample, editable_files(session))
        results[index] = await run_episode(
            sample,
            preset,
            policy,
            trajectory_dir / f"sample-{index}.jsonl",
            settings=settings,
            budgets=budgets,
            seed=seed + index,
            on_event=on_event,
        )

    try:
        async with anyio.create_task_group() as group:
            for index in range(samples):
                group.start_soon(one, index)
    finally:
        finished = [r for r in results if r is not None]
        winner = max((r for r in finished if r.best), key=lambda r: rank_best(r.best), default=None)  # type: ignore[arg-type]  # r.best set
        if winner is not None and winner.best is not None:
            restore(session, winner.best.files)
        shutil.rmtree(scratch, ignore_errors=True)
    return winner, finished


def gpu_scheduler(settings: EnvironmentSettings) -> GpuScheduler | None:
    """One scheduler over the visible GPUs for runs that evaluate on CUDA; None without a GPU."""
    return visible_gpu_scheduler() if settings.device == "cuda" else None
