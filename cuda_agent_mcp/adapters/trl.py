"""TRL: `GRPOTrainer(environment_factory=trl_environment(...))`.

TRL makes one instance per generation, calls `reset(**row)` with the dataset row (it needs a `task_id`
column), offers every other public method to the model as a tool (schemas from the type hints and
Google-style docstrings), and asks `get_reward()` for the reward. The tool methods are made from the
tool registry when the factory is built: one per tool of the preset, with the policy's arguments as
keyword parameters and their limits in the docstring (transformers' schemas cannot carry them; the
arguments are validated against them all the same). A reward of None is how TRL is told to ignore a
rollout: that is what an infrastructure failure returns. `untimed_reward` is for rule sets where nothing
can be timed (a CPU judge, cuda_agent_mcp/training/rules.py): a candidate that verified earns it instead
of FAIL.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from cuda_agent_mcp.agent.actions import ACTIONS, SUBMIT, Action, EnvironmentSettings
from cuda_agent_mcp.agent.policy import PolicyPreset, load_policy
from cuda_agent_mcp.env.kernel_env import KernelEnv, StepResult, ToolCall
from cuda_agent_mcp.evaluation.reward import RewardSchedule
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tools.registry import as_function, keyword_parameters

OVER = "The episode is over: the workspace was evaluated."


class TrlKernelEnvironment:
    """One episode per instance, over `KernelEnv`. `environment_class` adds the tool methods."""

    def __init__(self, env: KernelEnv, untimed_reward: float | None = None) -> None:
        self._env = env
        self._untimed_reward = untimed_reward
        self._final: StepResult | None = None

    def reset(self, **row: object) -> str:
        """Open a workspace for the row's task; the returned text is appended to the prompt."""
        task = row.get("task_id")
        if not isinstance(task, str):
            raise ValueError("each dataset row needs a 'task_id' column naming the task")
        self._final = None
        return self._env.start(task).task

    async def get_reward(self) -> float | None:
        """The episode's reward: its final evaluation (made now if the model never asked for one);
        None when the environment failed, so TRL leaves the rollout out."""
        if self._final is None:
            self._final = await self._env.step(ToolCall(name=SUBMIT))
        info = self._final.info
        if info.mask:
            return None
        if self._untimed_reward is not None and info.verify_ok and info.speedup_vs_eager is None:
            return self._untimed_reward
        return self._final.reward

    async def _step(self, name: str, arguments: dict[str, Any]) -> str:
        if self._final is not None:
            return OVER
        result = await self._env.step(ToolCall(name=name, arguments=arguments))
        if result.done:
            self._final = result
        return result.observation


def environment_class(tools: list[str]) -> type[TrlKernelEnvironment]:
    """A `TrlKernelEnvironment` class whose public methods are the named tools."""
    clashes = sorted(set(tools) & {"reset", "get_reward"})
    if clashes:
        raise ValueError(f"tools {clashes} would hide TRL's own methods")
    methods = {name: _tool_method(ACTIONS[name]) for name in tools}
    return type("TrlKernelEnvironment", (TrlKernelEnvironment,), methods)


def environment_tools(instance: TrlKernelEnvironment) -> list[Callable[..., Awaitable[str]]]:
    """The bound tool methods GRPOTrainer offers the model, in its order (public functions of the class
    by name, `reset` and `get_reward` left out): what its chat template renders in the system turn."""
    return [
        getattr(instance, name)
        for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def _tool_method(action: Action) -> Callable[..., Awaitable[str]]:
    async def method(self: TrlKernelEnvironment, **arguments: Any) -> str:
        return await self._step(action.name, arguments)

    fields = action.args.model_fields
    arguments = [f"    {name}: {info.description}" for name, info in fields.items()]
    doc = "\n".join([action.description, *(["", "Args:", *arguments] if arguments else [])])
    receiver = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    signature = inspect.Signature([receiver, *keyword_parameters(action.args)], return_annotation=str)
    return as_function(method, action.name, doc, signature)


def trl_environment(
    *,
    catalog: TaskCatalog | None = None,
    settings: EnvironmentSettings | None = None,
    policy: str | PolicyPreset = "cuda-agent",
    schedule: RewardSchedule = "milestones",
    max_turns: int | None = None,
    root: Path | None = None,
    untimed_reward: float | None = None,
) -> Callable[[], TrlKernelEnvironment]:
    """The `environment_factory` for GRPOTrainer: each call makes a fresh environment whose tools are the
    preset's (the agent loop's and `KernelEnv`'s)."""
    preset = load_policy(policy) if isinstance(policy, str) else policy
    environment = environment_class(list(preset.tools))
    counter = iter(range(1 << 62))

    def factory() -> TrlKernelEnvironment:
        directory = root / f"env-{next(counter)}" if root is not None else None
        return environment(
            KernelEnv(
                catalog=catalog,
                settings=settings,
                policy=preset,
                schedule=schedule,
                max_turns=max_turns,
                root=directory,
            ),
            untimed_reward,
        )

    return factory
