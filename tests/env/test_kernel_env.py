"""KernelEnv and score_batch on the CPU: real workspaces, builds and judge; failures classified."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

import cuda_agent_mcp.env.scoring as scoring_module
import cuda_agent_mcp.tools.catalogue as catalogue_module
import cuda_agent_mcp.tools.gpu as gpu_module
from cuda_agent_mcp.env import KernelEnv, Solution, ToolCall, score_batch
from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tools import JudgeFailed
from tests.agent.conftest import CORRECT, CPU, KERNELS, SMALL_INPUTS, WRONG
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.nvcc


@pytest.fixture
def catalog(tmp_path: Path) -> TaskCatalog:
    task = tmp_path / "bias_add_relu.py"
    task.write_text((EXAMPLES / "bias_add_relu" / "model.py").read_text().replace(*SMALL_INPUTS))
    return TaskCatalog([task], include_bundled=False)


def _files(model_new: str) -> dict[str, str]:
    return {"model_new.py": model_new, **{f"kernels/{p.name}": p.read_text() for p in KERNELS.iterdir()}}


def _env(catalog: TaskCatalog, tmp_path: Path, **options) -> KernelEnv:
    return KernelEnv(catalog=catalog, settings=CPU, root=tmp_path / "env", **options)


def _writes(model_new: str) -> list[ToolCall]:
    return [
        ToolCall(name="write_file", arguments={"path": p, "content": c}) for p, c in _files(model_new).items()
    ]


def test_an_episode_steps_through_the_tool_layer_and_ends_on_submit(catalog, tmp_path: Path) -> None:
    env = _env(catalog, tmp_path)

    async def episode():
        observation = await env.reset(catalog.list()[0].id)
        steps = [await env.step(call) for call in _writes(CORRECT)]
        steps.append(await env.step({"name": "compile"}))
        steps.append(await env.step({"name": "write_file", "arguments": "{not json"}))
        steps.append(await env.step(ToolCall(name="submit", arguments={"trials": 2})))
        return observation, steps

    observation, steps = anyio.run(episode)
    # The preset's tools, as the agent loop offers them; `submit` is accepted all the same (below).
    assert [t["function"]["name"] for t in observation.tools] == env.preset.tools
    assert "bias" in observation.task and observation.system_prompt
    *middle, invalid, final = steps
    assert all(s.reward == 0.0 and not s.done and not s.truncated for s in [*middle, invalid])
    assert middle[-1].info.compile_ok is True
    assert (
        not invalid.info.valid and invalid.info.failure == "model" and "not valid JSON" in invalid.observation
    )
    assert final.done and final.info.verify_ok is True and final.info.failure is None
    assert final.terminated and not final.truncated and final.info.end_reason == "evaluated"
    # Baselines are skipped on the CPU, so the kernel is correct but untimed: milestones give FAIL.
    assert final.reward == -1.0
    with pytest.raises(UsageError, match="episode is over"):
        anyio.run(lambda: env.step({"name": "list_files"}))


def test_episodes_in_one_event_loop_lease_the_gpu_from_one_scheduler(
    catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rollouts a trainer runs at once must not time over each other: on device 'cuda' every KernelEnv
    session gets the running loop's scheduler; another loop (another trainer) gets its own; a scheduler
    given to the environment wins; on the CPU nothing is leased."""
    made: list[GpuScheduler] = []
    monkeypatch.setattr(
        gpu_module, "visible_gpu_scheduler", lambda: made.append(GpuScheduler([0])) or made[-1]
    )
    on_gpu = CPU.model_copy(update={"device": "cuda"})
    given = GpuScheduler([0])

    def envs() -> list[KernelEnv]:
        return [
            KernelEnv(catalog=catalog, settings=on_gpu, root=tmp_path / "a"),
            KernelEnv(catalog=catalog, settings=on_gpu, root=tmp_path / "b"),
            KernelEnv(catalog=catalog, settings=on_gpu, root=tmp_path / "c", scheduler=given),
            KernelEnv(catalog=catalog, settings=CPU, root=tmp_path / "d"),
        ]

    async def first_steps(batch: list[KernelEnv]) -> list[GpuScheduler | None]:
        for env in batch:
            env.start(catalog.list()[0].id)
            step = await env.step({"name": "list_files"})
            assert step.info.valid and not step.done
        return [env.session.scheduler if env.session else None for env in batch]

    first = anyio.run(first_steps, envs())
    second = anyio.run(first_steps, envs())
    assert first[0] is first[1] is made[0] and first[2] is given and first[3] is None
    assert second[0] is second[1] is made[1] and second[2] is given and len(made) == 2


def test_a_wrong_kernel_is_the_models_failure_and_the_turn_budget_forces_a_final_evaluation(
    catalog, tmp_path: Path
) -> None:
    env = _env(catalog, tmp_path, max_turns=len(_writes(WRONG)))

    async def episode():
        await env.reset(catalog.list()[0].id)
        return [await env.step(call) for call in _writes(WRONG)]

    *_, last = anyio.run(episode)
    assert last.done and last.info.tool == "submit"
    assert last.truncated and not last.terminated and last.info.end_reason == "turn_budget"
    assert last.info.verify_ok is False and last.info.failure == "model" and not last.info.mask
    assert last.reward == -1.0


def test_infrastructure_failures_are_retried_then_masked_never_scored(
    catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = catalogue_module.evaluate_kernels
    failures = {"left": 2}

    async def flaky(session, request, **kw):  # the judge dies twice, then works
        if failures["left"] > 0:
            failures["left"] -= 1
            raise JudgeFailed("the judge process exited with signal 9")
        return await real(session, request, **kw)

    monkeypatch.setattr(catalogue_module, "evaluate_kernels", flaky)
    monkeypatch.setattr("cuda_agent_mcp.agent.failures.anyio.sleep", lambda s: anyio.lowlevel.checkpoint())
    env = _env(catalog, tmp_path, infra_retries=2)

    async def episode(retries_left: int):
        failures["left"] = retries_left
        await env.reset(catalog.list()[0].id)
        for call in _writes(CORRECT):
            await env.step(call)
        return await env.step({"name": "submit", "arguments": {"trials": 2}})

    recovered = anyio.run(lambda: episode(2))
    assert recovered.info.attempts == 3 and recovered.info.verify_ok and not recovered.info.mask
    persistent = anyio.run(lambda: episode(99))
    assert persistent.done and persistent.info.mask and persistent.info.failure == "infrastructure"
    assert persistent.truncated and persistent.info.end_reason == "infrastructure_error"
    assert persistent.info.attempts == 3 and persistent.reward == 0.0


def test_score_batch_returns_rewards_in_order_with_whose_fault_each_failure_was(
    catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_id = catalog.list()[0].id
    broken_kernel = _files(CORRECT) | {"kernels/bias_add_relu.cu": "this is not CUDA\n"}
    solutions = [
        Solution(task=task_id, files=_files(CORRECT)),
        Solution(task=task_id, files=_files(WRONG)),
        Solution(task=task_id, files=broken_kernel),
        Solution(task="no/such/task", files=_files(CORRECT)),
    ]
    scores = anyio.run(lambda: score_batch(solutions, catalog=catalog, settings=CPU, concurrency=2, trials=2))
    assert [s.index for s in scores] == [0, 1, 2, 3]
    assert [s.status for s in scores] == ["passed", "wrong_output", "compile_failed", "bad_task"]
    assert [s.failure for s in scores[:3]] == [None, "model", "model"]
    # Each says why, as the verdict does: a trainer logging rejections sees their reasons.
    assert scores[0].message == "passed"
    assert "values outside" in scores[1].message
    assert scores[2].message and "no such task" not in scores[2].message
    assert scores[3].message
    assert not any(s.masked for s in scores)

    async def judge_down(session, request, **kw):
        raise JudgeFailed("no judge could start: CUDA driver unavailable")

    monkeypatch.setattr(scoring_module, "evaluate_kernels", judge_down)
    monkeypatch.setattr("cuda_agent_mcp.agent.failures.anyio.sleep", lambda s: anyio.lowlevel.checkpoint())
    (down,) = anyio.run(lambda: score_batch(solutions[:1], catalog=catalog, settings=CPU, infra_retries=1))
    assert (down.status, down.failure, down.masked, down.attempts) == (
        "infrastructure_error",
        "infrastructure",
        True,
        2,
    )


def test_with_a_seed_an_episodes_verify_replays_exactly_and_without_one_it_does_not(
    catalog, tmp_path: Path
) -> None:
    """Same seed, same actions: the same inputs, so the same wrong-output evidence; secret seeds differ."""

    def wrong_verify(seed: int | None, name: str) -> str:
        settings = CPU.model_copy(update={"seed": seed})
        env = KernelEnv(catalog=catalog, settings=settings, root=tmp_path / name)

        async def episode() -> str:
            await env.reset(catalog.list()[0].id)
            for call in _writes(WRONG):
                await env.step(call)
            step = await env.step(ToolCall(name="verify", arguments={"trials": 2}))
            return json.dumps(json.loads(step.observation)["verdict"])  # the evidence, not the wall times

        return anyio.run(episode)

    seeded = [wrong_verify(7, "a"), wrong_verify(7, "b")]
    unseeded = [wrong_verify(None, "c"), wrong_verify(None, "d")]
    assert "wrong_output" in seeded[0]
    assert seeded[0] == seeded[1]
    assert unseeded[0] != unseeded[1]
    assert wrong_verify(8, "e") != seeded[0]
