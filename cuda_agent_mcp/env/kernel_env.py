"""`KernelEnv`: the agent loop's environment for RL trainers, one episode at a time.

reset(task) gives the observation a policy starts from (system prompt, task, tool schemas); step(call)
runs one tool call through the same tool layer and answers (observation, reward, done, info). The
episode ends when the policy calls `evaluate` (or `submit`, its alias), or when the turn budget is
spent, in which case the workspace as it stands is evaluated. The final reward comes from the named
schedule; steps before it are worth 0.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.agent.actions import (
    ACTIONS,
    EnvironmentSettings,
    InvalidCall,
    evaluate_request,
    parse_call,
)
from cuda_agent_mcp.agent.context import truncate
from cuda_agent_mcp.agent.loop import task_prompt
from cuda_agent_mcp.agent.outcome import outcome_of
from cuda_agent_mcp.agent.policy import PolicyPreset, load_policy
from cuda_agent_mcp.env.failures import FailureKind, InfraFailure, verdict_failure, with_infra_retries
from cuda_agent_mcp.errors import CudaAgentError, UsageError
from cuda_agent_mcp.evaluation.reward import RewardSchedule
from cuda_agent_mcp.tasks import Task, TaskCatalog
from cuda_agent_mcp.tools import EvaluateRequest, Session, evaluate_kernels

SUBMIT = "submit"


def tool_spec(name: str) -> dict[str, Any]:
    """The OpenAI-style schema of one tool of the environment (`submit` included)."""
    if name != SUBMIT:
        return ACTIONS[name].openai_spec()
    return {
        "type": "function",
        "function": {
            "name": SUBMIT,
            "description": "End the episode: verify, profile and score the workspace as it is.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    }


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
    failure: FailureKind | None = Field(None, description="whose fault a failed step was")
    mask: bool = Field(False, description="an infrastructure failure persisted: do not learn from this step")
    attempts: int = 1
    error: str | None = None

    def masked_for(self, failure: InfraFailure) -> None:
        self.failure, self.mask, self.attempts, self.error = (
            "infrastructure",
            True,
            failure.attempts,
            str(failure),
        )


class StepResult(BaseModel):
    observation: str
    reward: float
    done: bool
    info: StepInfo


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
        infra_retries: int = 2,
        root: Path | None = None,
    ) -> None:
        self.catalog = catalog or TaskCatalog.from_environment()
        self.settings = settings or EnvironmentSettings()
        self.preset = load_policy(policy) if isinstance(policy, str) else policy
        self.schedule = schedule
        self.max_turns = max_turns or self.preset.budgets.max_turns
        self.infra_retries = infra_retries
        self._own_root = root is None
        self.root = root or Path(tempfile.mkdtemp(prefix="cuda-agent-env-"))
        self.session: Session | None = None
        self.turn = 0
        self.done = False
        self._episodes = 0

    @property
    def tool_names(self) -> list[str]:
        return [*self.preset.tools, SUBMIT]

    async def reset(self, task: str | Task) -> Observation:
        return self.start(task)

    def start(self, task: str | Task) -> Observation:
        """`reset` for callers that cannot await (it does no I/O worth awaiting)."""
        chosen = self.catalog.get(task) if isinstance(task, str) else task
        self._episodes += 1
        directory = self.root / f"episode-{self._episodes}"
        self.session = Session.create(
            chosen, directory, overwrite=True, seed=self.settings.session_seed(self._episodes)
        )
        self.turn, self.done = 0, False
        return Observation(
            system_prompt=self.preset.system_prompt(),
            task=task_prompt(self.session, self.preset),
            tools=[tool_spec(name) for name in self.tool_names],
            task_id=chosen.id,
        )

    async def step(self, call: ToolCall | dict[str, Any]) -> StepResult:
        session = self._active()
        call = call if isinstance(call, ToolCall) else ToolCall.model_validate(call)
        self.turn += 1
        arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
        info = StepInfo(turn=self.turn, tool=call.name, valid=False)
        if call.name in (SUBMIT, "evaluate"):
            return await self._final(session, info, trials=_trials(arguments))
        try:
            action, args = parse_call(call.name, arguments, self.preset.tools)
        except InvalidCall as invalid:
            info.failure, info.error = "model", str(invalid)
            return await self._after(session, f"error: {invalid}", info)
        info.valid = True
        try:
            result, info.attempts = await with_infra_retries(
                lambda: action.run(session, args, self.settings), self.infra_retries
            )
        except InfraFailure as failure:
            info.masked_for(failure)
            return await self._after(session, f"error (infrastructure, not your code): {failure.cause}", info)
        except CudaAgentError as exc:
            info.failure, info.error = "model", str(exc)
            return await self._after(session, f"error: {exc}", info)
        _describe(result, info)
        return await self._after(session, result.model_dump_json(exclude_none=True), info)

    async def close(self) -> None:
        self.dispose()

    def dispose(self) -> None:
        """Delete the workspaces (only when the environment made its own root)."""
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- internals ---------------------------------------------------------------------------

    def _active(self) -> Session:
        if self.session is None:
            raise UsageError("call reset(task) before step()")
        if self.done:
            raise UsageError("the episode is over: call reset(task) for the next one")
        return self.session

    async def _after(self, session: Session, observation: str, info: StepInfo) -> StepResult:
        """Every non-final step is worth 0; the turn budget ends the episode with a final evaluation."""
        text = truncate(observation, self.preset.context.max_tool_output_chars)
        if self.turn >= self.max_turns:
            final = await self._final(session, StepInfo(turn=self.turn, tool=SUBMIT, valid=True), trials=5)
            return StepResult(
                observation=text + "\n\n" + final.observation, reward=final.reward, done=True, info=final.info
            )
        return StepResult(observation=text, reward=0.0, done=False, info=info)

    async def _final(self, session: Session, info: StepInfo, trials: int) -> StepResult:
        self.done = True
        info.valid = True
        request: EvaluateRequest = evaluate_request(self.settings, trials=trials).model_copy(
            update={"reward_schedule": self.schedule}
        )
        try:
            result, info.attempts = await with_infra_retries(
                lambda: evaluate_kernels(session, request), self.infra_retries
            )
        except InfraFailure as failure:
            info.masked_for(failure)
            return StepResult(
                observation=f"error (infrastructure): {failure.cause}", reward=0.0, done=True, info=info
            )
        _describe(result, info)
        text = truncate(result.model_dump_json(exclude_none=True), self.preset.context.max_tool_output_chars)
        return StepResult(observation=text, reward=result.reward, done=True, info=info)


def _describe(result: BaseModel, info: StepInfo) -> None:
    """Per-step metrics from a tool result, and whose fault a failed verdict is."""
    outcome = outcome_of(result)
    info.compile_ok = outcome.compile_ok
    info.speedup_vs_eager, info.speedup_vs_compile = outcome.speedup_vs_eager, outcome.speedup_vs_compile
    if outcome.verify_status is not None:
        info.verify_ok = outcome.verified
    if outcome.compile_ok is False:
        info.failure = "model"
    elif outcome.verified and outcome.profile_status is not None:
        info.failure = verdict_failure(outcome.profile_status)
    else:
        info.failure = verdict_failure(outcome.verify_status)


def _trials(arguments: str) -> int:
    try:
        value = json.loads(arguments or "{}").get("trials", 5)
    except (ValueError, AttributeError):
        return 5
    return value if isinstance(value, int) and 1 <= value <= 20 else 5
