"""`KernelEnv`: the agent loop's environment for RL trainers, one episode at a time.

reset(task) gives the observation a policy starts from (system prompt, task, tool schemas); step(call)
runs one tool call through the episode core the agent loop uses too (`agent/episode.py`) and answers
Gymnasium's way: observation, reward, `terminated` (the policy's final answer, `evaluate` or its alias
`submit`, was judged), `truncated` (a limit from outside ended the episode: the turn budget or another of
the preset's budgets, consecutive invalid calls, a persisting infrastructure failure), `done` (either
one, for callers written before the split) and info. An episode a limit ends is evaluated as its
workspace stands, unless the infrastructure failed (then the reward is 0 and `mask` is set). Each step
counts as a turn. The final reward comes from the named schedule; steps before it are worth 0.

On device 'cuda' every episode leases its GPU from one scheduler (`scheduler`, or else the one the running
event loop shares, `tools/gpu.py`), so the rollouts a trainer runs at once never time over each other.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from cuda_agent_mcp.agent.actions import ACTIONS, SUBMIT, EnvironmentSettings, tool_specs
from cuda_agent_mcp.agent.episode import EndReason, Episode, Step
from cuda_agent_mcp.agent.failures import FailureKind
from cuda_agent_mcp.agent.loop import task_prompt
from cuda_agent_mcp.agent.policy import PolicyPreset, load_policy
from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.evaluation.reward import RewardSchedule
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.tasks import Task, TaskCatalog
from cuda_agent_mcp.tools import Session
from cuda_agent_mcp.tools.gpu import shared_gpu_scheduler


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    arguments: str | dict[str, Any] = "{}"
    call_id: str = ""


class Observation(BaseModel):
    system_prompt: str
    task: str
    tools: list[dict[str, Any]]
    task_id: str


class StepInfo(BaseModel):
    turn: int
    tool: str
    valid: bool
    compile_ok: bool | None = None
    verify_ok: bool | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    failure: FailureKind | None = Field(default=None, description="whose fault a failed step was")
    mask: bool = Field(
        default=False, description="an infrastructure failure persisted: do not learn from this step"
    )
    attempts: int = 1
    error: str | None = None
    end_reason: EndReason | None = Field(default=None, description="what ended the episode at this step")


class StepResult(BaseModel):
    observation: str
    reward: float
    terminated: bool = Field(default=False, description="the policy's final answer was judged")
    truncated: bool = Field(
        default=False,
        description="a limit from outside ended the episode (budget, invalid calls, infrastructure)",
    )
    info: StepInfo

    @computed_field  # type: ignore[prop-decorator]  # mypy: a decorator above @property (pydantic's documented form)
    @property
    def done(self) -> bool:
        """The episode is over, either way (Gymnasium's `done` before the split)."""
        return self.terminated or self.truncated


class KernelEnv:
    """One episode at a time over a private workspace (`root` or a temporary directory)."""

    def __init__(
        self,
        *,
        catalog: TaskCatalog | None = None,
        settings: EnvironmentSettings | None = None,
        policy: str | PolicyPreset = "cuda-agent",
        schedule: RewardSchedule = "milestones",
        max_turns: int | None = None,
        infra_retries: int | None = None,
        root: Path | None = None,
        scheduler: GpuScheduler | None = None,
    ) -> None:
        self.catalog = catalog or TaskCatalog.from_environment()
        self.settings = settings or EnvironmentSettings()
        if infra_retries is not None:
            self.settings = self.settings.model_copy(update={"infra_retries": infra_retries})
        self.preset = load_policy(policy) if isinstance(policy, str) else policy
        self.schedule = schedule
        budgets = self.preset.budgets
        self.budgets = budgets.model_copy(update={"max_turns": max_turns}) if max_turns else budgets
        self._own_root = root is None
        self.root = root or Path(tempfile.mkdtemp(prefix="cuda-agent-env-"))
        self.scheduler = scheduler
        self.session: Session | None = None
        self.episode: Episode | None = None
        self.done = False
        self._episodes = 0
        # The last call's full result (a BuildResult, EvalResult, ...): for front-ends that report where
        # an episode's time went (benchmarks/rollout_throughput.py); the policy never sees it.
        self.last_step: Step | None = None

    @property
    def max_turns(self) -> int:
        return self.budgets.max_turns

    @property
    def tool_names(self) -> list[str]:
        """The tools offered to the policy: the preset's, as the agent loop offers them."""
        return list(self.preset.tools)

    @property
    def turn(self) -> int:
        return self.episode.counters.turn if self.episode is not None else 0

    async def reset(self, task: str | Task) -> Observation:
        return self.start(task)

    def start(self, task: str | Task) -> Observation:
        """`reset` for callers that cannot await (it does no I/O worth awaiting)."""
        chosen = self.catalog.get(task) if isinstance(task, str) else task
        self._episodes += 1
        directory = self.root / f"episode-{self._episodes}"
        self.session = Session.create(
            chosen,
            directory,
            overwrite=True,
            seed=self.settings.session_seed(self._episodes),
            language=self.settings.language,
        )
        # `submit` is always accepted: it is how a trainer ends an episode the policy left open.
        allowed = [*self.tool_names, *([SUBMIT] if SUBMIT not in self.tool_names else [])]
        self.episode = Episode(
            self.session,
            self.settings,
            allowed=allowed,
            budgets=self.budgets,
            max_output_chars=self.preset.context.max_tool_output_chars,
            schedule=self.schedule,
        )
        self.done = False
        return Observation(
            system_prompt=self.preset.system_prompt(self.settings.language),
            task=task_prompt(self.session, self.preset),
            tools=tool_specs(self.tool_names),
            task_id=chosen.id,
        )

    async def step(self, call: ToolCall | dict[str, Any]) -> StepResult:
        episode = self._active()
        self._lease_gpus_from_scheduler()
        call = call if isinstance(call, ToolCall) else ToolCall.model_validate(call)
        episode.counters.turn += 1
        arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
        step = await episode.call(call.name, arguments)
        self.last_step = step
        if step.ends is not None:
            self.done = True
            return StepResult(
                observation=step.observation,
                reward=_reward(step),
                terminated=step.ends == "evaluated",
                truncated=step.ends != "evaluated",
                info=self._info(step),
            )
        limit = episode.limit_reached()
        if limit is not None:
            return await self._truncate(episode, step.observation, limit)
        return StepResult(observation=step.observation, reward=0.0, info=self._info(step))

    async def close(self) -> None:
        self.dispose()

    def dispose(self) -> None:
        """Delete the workspaces (only when the environment made its own root)."""
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- internals ---------------------------------------------------------------------------

    def _lease_gpus_from_scheduler(self) -> None:
        """Attach the shared scheduler on the first step (it belongs to the event loop the steps run in,
        which `start` may not run in: TRL resets from its own thread)."""
        session = self.session
        if session is not None and session.scheduler is None and self.settings.device == "cuda":
            session.scheduler = self.scheduler or shared_gpu_scheduler()

    def _active(self) -> Episode:
        if self.episode is None:
            raise UsageError("call reset(task) before step()")
        if self.done:
            raise UsageError("the episode is over: call reset(task) for the next one")
        return self.episode

    async def _truncate(self, episode: Episode, text: str, limit: EndReason) -> StepResult:
        """A limit ended the episode: the workspace as it stands is evaluated for the reward."""
        self.done = True
        submit = ACTIONS[SUBMIT]
        final = await episode.run(submit, submit.args(), final=True)
        self.last_step = final
        info = self._info(final)
        if not final.infra_error:
            info.end_reason = limit
        return StepResult(
            observation=f"{text}\n\n{final.observation}", reward=_reward(final), truncated=True, info=info
        )

    def _info(self, step: Step) -> StepInfo:
        outcome = step.outcome
        return StepInfo(
            turn=self.turn,
            tool=step.name,
            valid=step.valid,
            compile_ok=outcome.compile_ok,
            verify_ok=outcome.verified if outcome.verify_status is not None else None,
            speedup_vs_eager=outcome.speedup_vs_eager,
            speedup_vs_compile=outcome.speedup_vs_compile,
            failure=step.failure,
            mask=step.infra_error,
            attempts=step.attempts,
            error=step.error,
            end_reason=step.ends,
        )


def _reward(step: Step) -> float:
    """A judged final answer's reward; 0 for an episode the infrastructure ended (masked)."""
    reward = step.outcome.reward
    return reward if step.ends == "evaluated" and reward is not None else 0.0
