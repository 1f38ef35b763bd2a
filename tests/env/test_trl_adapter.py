"""The TRL adapter as GRPOTrainer uses it: tools discovered from public methods with schemas built by
transformers from their docstrings, async tools awaited with keyword arguments, get_reward at the end."""

from __future__ import annotations

import inspect
from pathlib import Path

import anyio
import pytest

pytest.importorskip("trl")
from transformers.utils import get_json_schema

import cuda_agent_mcp.tools.catalogue as catalogue_module
from cuda_agent_mcp.adapters.trl import TrlKernelEnvironment, trl_environment
from cuda_agent_mcp.agent import load_policy
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tools import JudgeFailed
from tests.agent.conftest import CORRECT, CPU, KERNELS, SMALL_INPUTS
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.nvcc


def _tools(instance: TrlKernelEnvironment) -> dict[str, object]:
    """What GRPOTrainer offers the model: public functions of the class other than reset/get_reward."""
    return {
        name: getattr(instance, name)
        for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    }


@pytest.fixture
def factory(tmp_path: Path):
    task = tmp_path / "bias_add_relu.py"
    task.write_text((EXAMPLES / "bias_add_relu" / "model.py").read_text().replace(*SMALL_INPUTS))
    return trl_environment(
        catalog=TaskCatalog([task], include_bundled=False), settings=CPU, root=tmp_path / "envs"
    )


def test_every_tool_has_a_schema_transformers_can_build(factory) -> None:
    tools = _tools(factory())
    assert set(tools) == set(load_policy("cuda-agent").tools)  # the agent loop's and KernelEnv's
    schemas = {name: get_json_schema(tool) for name, tool in tools.items()}
    assert schemas["write_file"]["function"]["parameters"]["required"] == ["path", "content"]
    assert all(inspect.iscoroutinefunction(tool) for tool in tools.values())  # TRL awaits them on its loop


def test_one_episode_as_grpo_drives_it_and_a_judge_outage_gives_no_reward(
    factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"model_new.py": CORRECT, **{f"kernels/{p.name}": p.read_text() for p in KERNELS.iterdir()}}

    async def episode() -> tuple[str, float | None, str]:
        env = factory()
        prompt = env.reset(task_id="file/bias_add_relu", prompt="ignored")
        tools = _tools(env)
        for path, content in files.items():
            await tools["write_file"](path=path, content=content)
        compiled = await tools["compile"]()
        return prompt, await env.get_reward(), compiled

    prompt, reward, compiled = anyio.run(episode)
    assert "ModelNew" in prompt and '"ok":true' in compiled
    assert reward == -1.0  # verified but untimed on the CPU: the milestones' FAIL, a real reward

    async def judge_down(session, request, **kw):
        raise JudgeFailed("the judge process exited with signal 9")

    monkeypatch.setattr(catalogue_module, "evaluate_kernels", judge_down)
    monkeypatch.setattr("cuda_agent_mcp.agent.failures.anyio.sleep", lambda s: anyio.lowlevel.checkpoint())

    async def outage() -> float | None:
        env = factory()
        env.reset(task_id="file/bias_add_relu")
        return await env.get_reward()

    assert anyio.run(outage) is None  # TRL drops a None reward instead of learning from it
