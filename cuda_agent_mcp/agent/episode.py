"""One episode step, written once: the agent loop and `KernelEnv` run every tool call of a policy here.

A step parses the call against the tools the episode allows, runs it through the tool layer (an
infrastructure failure is retried while it says retrying may help: `failures.with_infra_retries`), sorts
errors by whose fault they are, builds the observation and says whether the episode ended. Runs in the
tool process. The end rule, the same for both (docs/DECISIONS.md, "One episode core"):

- terminated, the episode ended from within: the policy's final answer (`evaluate`, or its alias
  `submit`) was judged (`evaluated`), or the policy stopped calling tools (`policy_finished`);
- truncated, a limit from outside cut it: an infrastructure failure that persisted through the retries
  (`infrastructure_error`, masked: it says nothing about the policy), consecutive invalid calls
  (`invalid_tool_calls`), a budget (`turn_budget`, `token_budget`, `wall_time_budget`,
  `gpu_time_budget`), or the policy's endpoint failing (`endpoint_error`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from cuda_agent_mcp.agent.actions import Action, EnvironmentSettings, InvalidCall, parse_call
from cuda_agent_mcp.agent.context import truncate
from cuda_agent_mcp.agent.failures import (
    FailureKind,
    InfraFailure,
    infrastructure_observation,
    verdict_failure,
    with_infra_retries,
)
from cuda_agent_mcp.agent.outcome import Outcome, outcome_of
from cuda_agent_mcp.agent.policy import Budgets
from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.evaluation.reward import RewardSchedule
from cuda_agent_mcp.tools import Session

EndReason = Literal[
    "evaluated",
    "policy_finished",
    "infrastructure_error",
    "invalid_tool_calls",
    "turn_budget",
    "token_budget",
    "wall_time_budget",
    "gpu_time_budget",
    "endpoint_error",
]
TERMINATING: frozenset[str] = frozenset({"evaluated", "policy_finished"})


def is_truncation(reason: str | None) -> bool:
    """Whether an end reason is a limit from outside (Gymnasium's `truncated`), not the task's end."""
    return reason is not None and reason not in TERMINATING


@dataclass
class Counters:
    """What the budgets are measured on. The front-end counts turns (a completion in the loop, a step
    in `KernelEnv`) and tokens (the loop); the episode counts the rest."""

    turn: int = 0
    tokens: int = 0
    gpu_s: float = 0.0
    invalid_calls: int = 0
    invalid_streak: int = 0
    started: float = field(default_factory=time.monotonic)


@dataclass
class Step:
    """One call's outcome: what the policy reads (`observation`) and what the front-end records."""

    name: str
    arguments: str
    valid: bool = False
    observation: str = ""
    result: BaseModel | None = None
    error: str | None = None
    failure: FailureKind | None = None
    infra_error: bool = False
    attempts: int = 1
    wall_s: float = 0.0
    ends: EndReason | None = None

    @property
    def outcome(self) -> Outcome:
        return outcome_of(self.result) if self.result is not None else Outcome()


class Episode:
    """The calls of one episode on one session, with its counters and budgets."""

    def __init__(
        self,
        session: Session,
        settings: EnvironmentSettings,
        *,
        allowed: Sequence[str],
        budgets: Budgets,
        max_output_chars: int,
        schedule: RewardSchedule | None = None,
        counters: Counters | None = None,
    ) -> None:
        self.session = session
        self.settings = settings
        self.allowed = list(allowed)
        self.budgets = budgets
        self.max_output_chars = max_output_chars
        self.schedule = schedule
        self.counters = counters or Counters()

    async def call(self, name: str, arguments: str) -> Step:
        """Parse and run one call of the policy. A malformed or unknown call is the model's failure."""
        try:
            action, args = parse_call(name, arguments, self.allowed)
        except InvalidCall as invalid:
            self.counters.invalid_calls += 1
            self.counters.invalid_streak += 1
            return Step(name, arguments, observation=f"error: {invalid}", error=str(invalid), failure="model")
        self.counters.invalid_streak = 0
        return await self.run(action, args, name=name, arguments=arguments)

    async def run(
        self,
        action: Action,
        args: BaseModel,
        *,
        name: str | None = None,
        arguments: str = "{}",
        final: bool | None = None,
    ) -> Step:
        """Run an action with validated arguments. `final` overrides whether a result ends the episode
        (the text format's per-answer evaluation does not; a forced final evaluation does)."""
        step = Step(name or action.name, arguments, valid=True)
        started = time.monotonic()
        try:
            step.result, step.attempts = await with_infra_retries(
                lambda: action.run(self.session, args, self.settings, self.schedule),
                self.settings.infra_retries,
            )
        except InfraFailure as failure:
            # Not the policy's doing: one line for it, the whole message for the record, and the end of
            # the episode (nothing after it could be judged fairly).
            step.observation = infrastructure_observation(failure.cause)
            step.error, step.infra_error, step.attempts = str(failure.cause), True, failure.attempts
            step.failure, step.ends = "infrastructure", "infrastructure_error"
        except CudaAgentError as exc:  # refused arguments (a protected file, a path outside): the policy's
            step.observation, step.error, step.failure = f"error: {exc}", str(exc), "model"
        else:
            assert step.result is not None
            step.observation = step.result.model_dump_json(exclude_none=True)
            step.failure = failure_of(step.outcome)
            if action.ends_episode if final is None else final:
                step.ends = "evaluated"
        step.wall_s = round(time.monotonic() - started, 3)
        if action.uses_gpu:
            self.counters.gpu_s += step.wall_s
        step.observation = truncate(step.observation, self.max_output_chars)
        return step

    def limit_reached(self) -> EndReason | None:
        """The first limit from outside the episode has reached, if any."""
        counters, budgets = self.counters, self.budgets
        if counters.invalid_streak >= budgets.max_invalid_calls:
            return "invalid_tool_calls"
        if counters.turn >= budgets.max_turns:
            return "turn_budget"
        if counters.tokens >= budgets.max_tokens:
            return "token_budget"
        if time.monotonic() - counters.started >= budgets.max_wall_s:
            return "wall_time_budget"
        if counters.gpu_s >= budgets.max_gpu_s:
            return "gpu_time_budget"
        return None


def failure_of(outcome: Outcome) -> FailureKind | None:
    """Whose fault a result's failure is: a failed build or any verdict but `passed` is the model's."""
    if outcome.compile_ok is False:
        return "model"
    if outcome.verified and outcome.profile_status is not None:
        return verdict_failure(outcome.profile_status)
    return verdict_failure(outcome.verify_status)
