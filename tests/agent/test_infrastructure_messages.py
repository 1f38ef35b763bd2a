"""Issue 19, item 2: when the environment fails (here: no GPU visible for device cuda), the policy gets
one short line that says so and whether retrying can help, never a judge's traceback. Issue 18: the
failure is not retried when it says retrying cannot help, and it ends the episode (truncated, masked)
in the agent loop and in KernelEnv alike."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.agent import EnvironmentSettings, load_trajectory, run_episode
from cuda_agent_mcp.agent.failures import InfraFailure, infrastructure_observation, with_infra_retries
from cuda_agent_mcp.env import KernelEnv
from cuda_agent_mcp.errors import GpuUnavailable
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tools import JudgeFailed
from tests.agent.scripted_llm import tool_call, turn

NO_GPU_LINE = "error (infrastructure, not your code; retrying will not help): no GPU is visible"
ON_CUDA = EnvironmentSettings(device="cuda", audit=False, baselines="skip")


def test_a_policy_asking_for_verify_without_a_gpu_ends_the_run_with_one_short_infrastructure_line(
    session, scripted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU visible, also on a GPU machine
    script = [turn(tool_call("verify", {"trials": 2})), turn(content="never asked for")]
    with scripted(script) as (llm, preset, client):
        result = anyio.run(
            lambda: run_episode(session, preset, client, tmp_path / "t.jsonl", settings=ON_CUDA)
        )
    assert (result.stop_reason, result.truncated) == ("infrastructure_error", True)
    assert (
        len(llm.requests) == 1 and result.error is not None and result.error.startswith("no GPU is visible")
    )
    record = next(r for r in load_trajectory(tmp_path / "t.jsonl").tools if r.name == "verify")
    assert record.infra_error  # never counted against the policy, dropped from fine-tuning data


def test_kernel_env_gives_the_same_line_and_masks_the_truncated_episode(
    session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    catalog = TaskCatalog([tmp_path / "reference.py"], include_bundled=False)  # the session's task
    env = KernelEnv(catalog=catalog, settings=ON_CUDA, root=tmp_path / "env")

    async def episode():
        await env.reset(catalog.list()[0].id)
        return await env.step({"name": "verify", "arguments": {"trials": 2}})

    step = anyio.run(episode)
    assert step.observation.startswith(NO_GPU_LINE) and "\n" not in step.observation
    assert "Traceback" not in step.observation
    assert step.truncated and not step.terminated and step.done and step.reward == 0.0
    assert (step.info.mask, step.info.failure, step.info.attempts) == (True, "infrastructure", 1)
    assert step.info.end_reason == "infrastructure_error"


def test_a_judge_traceback_reaches_the_policy_as_its_first_and_last_lines() -> None:
    failed = JudgeFailed(
        'the judge failed: Traceback (most recent call last):\n  File "run.py", line 26, in run_job\n'
        "RuntimeError: Found no NVIDIA driver on your system."
    )
    assert infrastructure_observation(failed) == (
        "error (infrastructure, not your code; try again later): the judge failed: "
        "RuntimeError: Found no NVIDIA driver on your system."
    )
    assert "retrying will not help" in infrastructure_observation(GpuUnavailable("test"))


def test_an_error_that_retrying_cannot_fix_is_not_retried() -> None:
    calls = []

    async def no_gpu() -> None:
        calls.append(1)
        raise GpuUnavailable("test")

    with pytest.raises(InfraFailure) as failure:
        anyio.run(lambda: with_infra_retries(no_gpu, retries=3, backoff_s=0))
    assert failure.value.attempts == 1 and len(calls) == 1
