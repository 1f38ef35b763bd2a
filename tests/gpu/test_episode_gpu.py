"""On a GPU: the agent loop and KernelEnv run an episode through the one episode core with the real
kernels, and both end it on `evaluate` with the judge's reward (issue 18)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from cuda_agent_mcp.agent import EnvironmentSettings, load_policy, load_trajectory, run_episode
from cuda_agent_mcp.agent.client import PolicyClient
from cuda_agent_mcp.env import KernelEnv
from cuda_agent_mcp.tasks import TaskCatalog, load_task_file
from cuda_agent_mcp.tools import Session
from tests.agent.scripted_llm import ScriptedLLM, serve, tool_call, turn
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

EXAMPLE = EXAMPLES / "bias_add_relu"
ON_GPU = EnvironmentSettings(device="cuda", audit=True, baselines="measure")
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"path": "model_new.py", "content": (EXAMPLE / "model_new.py").read_text()}),
    *(
        ("write_file", {"path": f"kernels/{p.name}", "content": p.read_text()})
        for p in sorted((EXAMPLE / "kernels").iterdir())
    ),
    ("compile", {}),
    ("evaluate", {"trials": 2}),
]


def _loop(tmp_path: Path, cache: Path) -> tuple[str, bool, float | None, bool]:
    pytest.importorskip("openai")  # the agent loop's client: the [agent] extra, absent on a bare GPU machine
    preset = load_policy("cuda-agent")
    task = load_task_file(EXAMPLE / "model.py", task_id="example/bias_add_relu")
    session = Session.create(task, tmp_path / "ws", cache_dir=cache)
    llm = ScriptedLLM(replies=[turn(tool_call(name, args)) for name, args in CALLS])
    with serve(llm):
        client = PolicyClient(preset, base_url=llm.url, api_key="test")
        result = anyio.run(
            lambda: run_episode(session, preset, client, tmp_path / "t.jsonl", settings=ON_GPU)
        )
    last = load_trajectory(tmp_path / "t.jsonl").tools[-1]
    return result.stop_reason, result.truncated, last.reward, last.verified


def _env(tmp_path: Path, cache: Path) -> tuple[str, bool, float | None, bool]:
    catalog = TaskCatalog([EXAMPLE / "model.py"], include_bundled=False)
    env = KernelEnv(catalog=catalog, settings=ON_GPU, root=tmp_path / "env")

    async def episode() -> Any:
        await env.reset(catalog.list()[0].id)
        for name, arguments in CALLS:
            step = await env.step({"name": name, "arguments": arguments})
        return step

    step = anyio.run(episode)
    assert step.terminated and not step.info.mask and step.info.attempts == 1
    return str(step.info.end_reason), step.truncated, step.reward, bool(step.info.verify_ok)


@pytest.mark.parametrize("front_end", [_loop, _env], ids=["agent loop", "KernelEnv"])
def test_an_episode_on_the_gpu_ends_on_evaluate_with_the_judges_reward(
    front_end: Any, tmp_path: Path, shared_build_cache: Path
) -> None:
    reason, truncated, reward, verified = front_end(tmp_path, shared_build_cache)
    assert (reason, truncated, verified) == ("evaluated", False, True)
    assert reward is not None and reward >= 1.0  # verified and timed: at least the "correct" milestone


def test_episodes_run_at_once_share_the_gpu_and_each_is_timed(tmp_path: Path) -> None:
    """What a trainer does: several KernelEnv rollouts in one event loop. They lease the GPU from one
    scheduler, so no profile is refused for another episode's work on the GPU (found at 7c58dce)."""
    catalog = TaskCatalog([EXAMPLE / "model.py"], include_bundled=False)
    envs = [KernelEnv(catalog=catalog, settings=ON_GPU, root=tmp_path / f"env-{i}") for i in range(3)]
    steps: list[Any] = [None] * len(envs)

    async def episode(index: int) -> None:
        env = envs[index]
        env.start(catalog.list()[0].id)
        for name, arguments in CALLS:
            steps[index] = await env.step({"name": name, "arguments": arguments})

    async def all_at_once() -> None:
        async with anyio.create_task_group() as group:
            for index in range(len(envs)):
                group.start_soon(episode, index)

    anyio.run(all_at_once)
    assert len({id(env.session.scheduler) for env in envs if env.session is not None}) == 1
    for step in steps:
        assert step.terminated and not step.info.mask, step.info
        assert step.info.verify_ok and step.info.speedup_vs_eager is not None, step.observation
