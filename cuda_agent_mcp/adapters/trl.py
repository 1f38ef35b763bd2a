"""TRL: `GRPOTrainer(environment_factory=trl_environment(...))`.

TRL makes one instance per generation, calls `reset(**row)` with the dataset row (it needs a `task_id`
column), offers every other public method to the model as a tool (schemas from the type hints and
Google-style docstrings), and asks `get_reward()` for the reward. A reward of None is how TRL is told
to ignore a rollout: that is what an infrastructure failure returns.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cuda_agent_mcp.agent.actions import EnvironmentSettings
from cuda_agent_mcp.env.kernel_env import KernelEnv, StepResult, ToolCall
from cuda_agent_mcp.evaluation.reward import RewardSchedule
from cuda_agent_mcp.tasks import TaskCatalog


class TrlKernelEnvironment:
    """One episode per instance, over `KernelEnv`."""

    def __init__(self, env: KernelEnv) -> None:
        self._env = env
        self._final: StepResult | None = None

    def reset(self, **row: object) -> str:
        """Open a workspace for the row's task; the returned text is appended to the prompt."""
        task = row.get("task_id")
        if not isinstance(task, str):
            raise ValueError("each dataset row needs a 'task_id' column naming the task")
        self._final = None
        return self._env.start(task).task

    async def read_file(self, path: str) -> str:
        """Read a text file of the workspace.

        Args:
            path: A path inside the workspace, e.g. kernels/relu.cu.
        """
        return await self._step("read_file", path=path)

    async def write_file(self, path: str, content: str) -> str:
        """Create or replace a file of the workspace (model.py and the binding harness are protected).

        Args:
            path: A path inside the workspace, e.g. kernels/relu.cu or model_new.py.
            content: The whole new content of the file.
        """
        return await self._step("write_file", path=path, content=content)

    async def edit_file(self, path: str, old_text: str, new_text: str) -> str:
        """Replace exact text, which must occur once, in a workspace file.

        Args:
            path: A path inside the workspace.
            old_text: The exact text to replace.
            new_text: The text to put in its place.
        """
        return await self._step("edit_file", path=path, old_text=old_text, new_text=new_text)

    async def compile(self) -> str:
        """Build the workspace's kernels; diagnostics name file, line and column."""
        return await self._step("compile")

    async def verify(self) -> str:
        """Build, then check ModelNew against the reference on fresh secret inputs."""
        return await self._step("verify")

    async def evaluate(self) -> str:
        """Verify, time and score the workspace; this ends the episode."""
        return await self._step("evaluate")

    async def get_reward(self) -> float | None:
        """The episode's reward: its final evaluation (made now if the model never asked for one);
        None when the environment failed, so TRL leaves the rollout out."""
        if self._final is None:
            self._final = await self._env.step(ToolCall(name="submit"))
        return None if self._final.info.mask else self._final.reward

    async def _step(self, name: str, **arguments: object) -> str:
        if self._final is not None:
            return "The episode is over: the workspace was evaluated."
        result = await self._env.step(ToolCall(name=name, arguments=arguments))
        if result.done:
            self._final = result
        return result.observation


def trl_environment(
    *,
    catalog: TaskCatalog | None = None,
    settings: EnvironmentSettings | None = None,
    schedule: RewardSchedule = "milestones",
    max_turns: int | None = None,
    root: Path | None = None,
) -> Callable[[], TrlKernelEnvironment]:
    """The `environment_factory` for GRPOTrainer: each call makes a fresh environment."""
    counter = iter(range(1 << 62))

    def factory() -> TrlKernelEnvironment:
        directory = root / f"env-{next(counter)}" if root is not None else None
        return TrlKernelEnvironment(
            KernelEnv(
                catalog=catalog, settings=settings, schedule=schedule, max_turns=max_turns, root=directory
            )
        )

    return factory
