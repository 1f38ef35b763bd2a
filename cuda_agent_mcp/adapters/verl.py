"""verl: each kernel tool as a `BaseTool`, and a `compute_score` reward function.

verl's ToolAgentLoop creates, executes and releases a tool instance for every call, so the episode (one
`KernelEnv` and its workspace) is keyed by the trajectory (`agent_data.request_id`) and shared by all the
tools of that trajectory. The task comes from the dataset row's `tools_kwargs` (`create_kwargs.task_id`
for each tool, see examples/rl/verl_tools.yaml). The tools and their schemas come from the tool registry
through `KernelEnv`'s actions. `evaluate` (or `submit`) ends the episode, as does a limit (the episode is
then evaluated as it stands); its reward is the tool reward, which `compute_score` reads back from
`extra_info["tool_rewards"]`.
"""

from __future__ import annotations

from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from cuda_agent_mcp.agent.actions import ACTIONS, EnvironmentSettings
from cuda_agent_mcp.env.kernel_env import KernelEnv, ToolCall
from cuda_agent_mcp.evaluation.reward import FAIL

# One environment per trajectory, shared by the tool objects (verl makes one object per tool); a
# trajectory whose episode ended answers every later call with a note instead of starting another.
_EPISODES: dict[str, KernelEnv] = {}
_FINISHED: set[str] = set()


class VerlKernelTool(BaseTool):
    """config: {"tool": NAME, "device": "cuda"|"cpu", "audit": bool, "baselines": ..., "max_turns": N}."""

    def __init__(self, config: dict[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        name = config["tool"]
        if name not in ACTIONS:
            raise ValueError(f"unknown kernel tool {name!r}; known: {', '.join(ACTIONS)}")
        # The registry's schema (its limits are in the descriptions too: verl's schema keeps only
        # type, description and enum); the call is validated against the limits either way.
        schema = tool_schema or OpenAIFunctionToolSchema.model_validate(ACTIONS[name].openai_spec())
        super().__init__(config, schema)
        self.settings = EnvironmentSettings(
            **{k: config[k] for k in ("device", "audit", "baselines") if k in config}
        )
        self.max_turns = config.get("max_turns")
        self._instances: dict[str, str] = {}  # instance id -> task id

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        instance_id, response = await super().create(instance_id)
        task = (kwargs.get("create_kwargs") or {}).get("task_id")
        if not isinstance(task, str):
            raise ValueError("tools_kwargs.<tool>.create_kwargs.task_id is required")
        self._instances[instance_id] = task
        return instance_id, response

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        agent_data = kwargs.get("agent_data")
        key = getattr(agent_data, "request_id", None) or instance_id
        if key in _FINISHED:
            return ToolResponse(text="The episode is over: the workspace was evaluated."), 0.0, {"done": True}
        env = _EPISODES.get(key)
        if env is None:
            env = KernelEnv(settings=self.settings, max_turns=self.max_turns)
            env.start(self._instances[instance_id])
            _EPISODES[key] = env
        result = await env.step(ToolCall(name=self.name, arguments=parameters))
        if result.done:
            _EPISODES.pop(key, None)
            _FINISHED.add(key)
            env.dispose()
        metrics = {
            **result.info.model_dump(),
            "done": result.done,
            "terminated": result.terminated,
            "truncated": result.truncated,
        }
        return ToolResponse(text=result.observation), result.reward, metrics

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The episode's reward: the final evaluation's, which is the last tool reward (every other step is
    worth 0), or FAIL when the policy never evaluated. verl passes the agent loop's `tool_rewards` in
    `extra_info`. A masked final evaluation (infrastructure failure) is worth 0 here: verl's reward
    function does not see the tool's metrics, where `mask` is."""
    rewards = list((extra_info or {}).get("tool_rewards", []))
    return {"score": rewards[-1] if rewards else FAIL, "evaluated": bool(rewards)}
