"""OpenEnv: `KernelEnv` as an OpenEnv environment server (FastAPI; one environment per WebSocket
session, so concurrent episodes never share a workspace).

    uvicorn --factory cuda_agent_mcp.adapters.openenv:create_openenv_app --port 8000

A client resets with the task (`reset(task_id=...)`) and steps with `{"tool": NAME, "arguments": {...}}`
(a tool of the reset observation, or `submit` to end the episode); observations carry the text the model
sees, the reward, `done` (OpenEnv's), `truncated` (the episode was ended by a limit, not by the policy's
final answer), and the step's info (metrics, whose fault a failure was, whether to mask it).
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import FastAPI
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from cuda_agent_mcp.agent.actions import EnvironmentSettings
from cuda_agent_mcp.env.kernel_env import KernelEnv, ToolCall
from cuda_agent_mcp.tasks import TaskCatalog


class KernelAction(Action):
    tool: str = Field(description="a tool name from the reset observation, or 'submit'")
    arguments: dict[str, Any] = Field(default_factory=dict)


class KernelObservation(Observation):
    text: str = ""
    task_id: str | None = None
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="OpenAI-style tool specs (on reset)"
    )
    truncated: bool = Field(
        default=False, description="a limit ended the episode (budget, invalid calls, infrastructure)"
    )
    info: dict[str, Any] = Field(default_factory=dict, description="per-step metrics, failure, mask")


class KernelState(State):
    task_id: str | None = None
    done: bool = False


class OpenEnvKernelEnvironment(Environment[KernelAction, KernelObservation, KernelState]):
    SUPPORTS_CONCURRENT_SESSIONS = True  # each instance has its own workspace

    def __init__(
        self, catalog: TaskCatalog | None = None, settings: EnvironmentSettings | None = None
    ) -> None:
        super().__init__()
        self._env = KernelEnv(catalog=catalog, settings=settings)
        self._state = KernelState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> KernelObservation:
        task = kwargs.get("task_id")
        if not isinstance(task, str):
            raise ValueError("reset needs task_id (a task id or a .py path the server can read)")
        start = self._env.start(task)
        self._state = KernelState(
            episode_id=episode_id or uuid.uuid4().hex, step_count=0, task_id=start.task_id
        )
        return KernelObservation(
            text=f"{start.system_prompt}\n\n{start.task}", task_id=start.task_id, tools=start.tools
        )

    def step(self, action: KernelAction, timeout_s: float | None = None, **kwargs: Any) -> KernelObservation:
        raise NotImplementedError("the server awaits step_async")

    async def step_async(
        self, action: KernelAction, timeout_s: float | None = None, **kwargs: Any
    ) -> KernelObservation:
        result = await self._env.step(ToolCall(name=action.tool, arguments=action.arguments))
        self._state.step_count += 1
        self._state.done = result.done
        return KernelObservation(
            text=result.observation,
            reward=result.reward,
            done=result.done,
            truncated=result.truncated,
            task_id=self._state.task_id,
            info=result.info.model_dump(),
        )

    @property
    def state(self) -> KernelState:
        return self._state

    def close(self) -> None:
        self._env.dispose()


def create_openenv_app(
    catalog: TaskCatalog | None = None,
    settings: EnvironmentSettings | None = None,
    max_concurrent_envs: int = 8,
) -> FastAPI:
    return create_app(
        lambda: OpenEnvKernelEnvironment(catalog=catalog, settings=settings),
        KernelAction,
        KernelObservation,
        env_name="cuda-agent",
        max_concurrent_envs=max_concurrent_envs,
        state_cls=KernelState,
    )
