"""The verl adapter as verl's ToolAgentLoop calls it: create, execute, release per call, with verl's real
BaseTool and schemas; the episode shared by the tools of one trajectory."""

from __future__ import annotations

from types import SimpleNamespace

import anyio
import pytest

pytest.importorskip("verl")

from cuda_agent_mcp.adapters.verl import VerlKernelTool, compute_score
from cuda_agent_mcp.agent import load_policy
from tests.agent.conftest import CORRECT, KERNELS, SMALL_INPUTS
from tests.conftest import EXAMPLES
from tests.env.verl_calls import call_tool

pytestmark = pytest.mark.nvcc


def _agent_data(request_id: str) -> SimpleNamespace:
    """What the adapter reads of verl's AgentData (its request_id). The real class lives in verl's agent
    loop, whose import needs fastapi, which verl 0.9.1 does not declare."""
    return SimpleNamespace(request_id=request_id)


def test_a_trajectory_through_verl_tools_ends_with_the_evaluation_reward(tmp_path) -> None:
    task = tmp_path / "bias_add_relu.py"
    task.write_text((EXAMPLES / "bias_add_relu" / "model.py").read_text().replace(*SMALL_INPUTS))
    options = {"device": "cpu", "audit": False, "baselines": "skip"}
    tools = {name: VerlKernelTool({"tool": name, **options}) for name in ("write_file", "compile", "submit")}
    assert tools["write_file"].get_openai_tool_schema().function.name == "write_file"
    files = {"model_new.py": CORRECT, **{f"kernels/{p.name}": p.read_text() for p in KERNELS.iterdir()}}
    agent = _agent_data("trajectory-1")
    tool_rewards: list[float] = []

    async def call(name: str, arguments: dict) -> str:
        text, reward = await call_tool(tools[name], {"task_id": str(task)}, arguments, agent)
        tool_rewards.append(reward)
        return text

    async def trajectory() -> list[str]:
        texts = [await call("write_file", {"path": p, "content": c}) for p, c in files.items()]
        texts.append(await call("compile", {}))
        texts.append(await call("submit", {"trials": 2}))
        texts.append(await call("compile", {}))  # after the end
        return texts

    texts = anyio.run(trajectory)
    assert '"ok":true' in texts[-3] and '"status":"passed"' in texts[-2]
    assert texts[-1] == "The episode is over: the workspace was evaluated."
    assert (
        tool_rewards[:-2] == [0.0] * (len(files) + 1) and tool_rewards[-2] == -1.0
    )  # verified, untimed (CPU)
    assert compute_score("kernelbench", "", None, {"tool_rewards": tool_rewards[:-1]})["score"] == -1.0
    assert compute_score("kernelbench", "", None, {"tool_rewards": []}) == {"score": -1.0, "evaluated": False}


def test_the_example_tool_config_builds_every_tool() -> None:
    import importlib

    import yaml

    from tests.conftest import REPO

    config = yaml.safe_load((REPO / "examples" / "rl" / "verl_tools.yaml").read_text())
    names = []
    for entry in config["tools"]:
        module, _, cls = entry["class_name"].rpartition(".")
        tool = getattr(importlib.import_module(module), cls)(entry["config"], None)
        names.append(tool.name)
    assert names == load_policy("cuda-agent").tools  # the tools the agent loop and KernelEnv offer
