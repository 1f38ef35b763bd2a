"""`score_batch` over a Ray cluster: one actor per GPU (Ray gives each its own CUDA_VISIBLE_DEVICES), or
CPU actors when scoring on the CPU. Each actor runs the ordinary `score_batch` on the solutions it is
handed, so a cluster and one machine compute the same verdicts. An actor that dies takes only its
solutions with it: they come back as infrastructure failures (masked), never as model failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from cuda_agent_mcp.agent.actions import EnvironmentSettings
from cuda_agent_mcp.env.scoring import Score, Solution, score_batch
from cuda_agent_mcp.evaluation.reward import RewardSchedule

ACTOR_PREFIX = "cuda-agent-evaluator-"


class _Evaluator:
    """The actor: scores what it is given with the local code path."""

    def score(self, solutions: list[dict[str, Any]], options: dict[str, Any]) -> list[dict[str, Any]]:
        batch = [Solution.model_validate(s) for s in solutions]
        settings = EnvironmentSettings.model_validate(options.pop("settings"))
        scores = anyio.run(lambda: score_batch(batch, settings=settings, **options))
        return [s.model_dump() for s in scores]


def score_batch_ray(
    solutions: Sequence[Solution],
    *,
    settings: EnvironmentSettings | None = None,
    schedule: RewardSchedule = "milestones",
    actors: int | None = None,
    trials: int = 5,
    infra_retries: int | None = None,
    address: str | None = None,
) -> list[Score]:
    """Spread `solutions` over Ray actors (default: one per GPU of the cluster, or per 2 CPUs when
    scoring on the CPU); scores come back in the order of `solutions`."""
    import ray

    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    settings = settings or EnvironmentSettings()
    on_gpu = settings.device == "cuda"
    resources = ray.cluster_resources()
    count = actors or max(int(resources.get("GPU", 0)) if on_gpu else int(resources.get("CPU", 1)) // 2, 1)
    remote = ray.remote(num_gpus=1 if on_gpu else 0, num_cpus=1)(_Evaluator)
    # Named, so an operator (or a test) can find and inspect one: cuda-agent-evaluator-<i>.
    pool = [remote.options(name=f"{ACTOR_PREFIX}{i}").remote() for i in range(count)]
    shares: list[list[int]] = [list(range(len(solutions)))[i::count] for i in range(count)]
    options = {
        "settings": settings.model_dump(),
        "schedule": schedule,
        "trials": trials,
        "infra_retries": infra_retries,
    }
    pending = {
        actor.score.remote([solutions[i].model_dump() for i in share], dict(options)): share
        for actor, share in zip(pool, shares, strict=True)
        if share
    }
    scores: dict[int, Score] = {}
    for ref, share in pending.items():
        try:
            for local, data in zip(share, ray.get(ref), strict=True):
                scores[local] = Score.model_validate({**data, "index": local})
        except (
            ray.exceptions.RayActorError,
            ray.exceptions.WorkerCrashedError,
            ray.exceptions.RayTaskError,
        ) as exc:
            for local in share:
                scores[local] = Score(
                    index=local,
                    task_id=solutions[local].task,
                    reward=0.0,
                    status="infrastructure_error",
                    failure="infrastructure",
                    masked=True,
                    message=f"the Ray actor scoring it failed: {type(exc).__name__}",
                )
    for actor in pool:
        ray.kill(actor)
    return [scores[i] for i in range(len(solutions))]
