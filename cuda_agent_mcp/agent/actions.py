"""The tools a policy may call: the registry's policy tools (`tools/catalogue.py`), each with the argument
model the policy sees (a projection of the tool's request, with the request's limits), plus `submit`.

Evaluator settings that decide what counts as honest (device, the PyTorch-compute audit, the precision
check, the reward schedule) are the environment's, never the policy's: a model that could pass
`audit: false` would learn to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent_mcp.evaluation.reward import RewardSchedule
from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.tools import TOOLS, EvaluateRequest, Session, Tool

SUBMIT = "submit"
# The policy's final answer: either one ends the episode (docs/DECISIONS.md, "One episode core").
FINAL_ACTIONS = frozenset({"evaluate", SUBMIT})


class EnvironmentSettings(BaseModel):
    """How the loop's verify/profile/evaluate calls judge; set by whoever runs the loop."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: Literal["cuda", "cpu"] = "cuda"
    audit: bool = Field(
        default=True, description="refuse PyTorch compute in the candidate (off only in CPU tests)"
    )
    baselines: Literal["cached", "measure", "skip"] = "cached"
    seed: int | None = Field(
        default=None,
        description="fix the evaluations' input seeds (derived per episode or solution) so verify verdicts "
        "replay exactly; None: secret random seeds. Never shown to the policy.",
    )
    infra_retries: int = Field(
        default=2, ge=0, description="retries of a tool call whose infrastructure failure may pass"
    )
    language: KernelLanguage = Field(
        default="cuda",
        description="the kernel language new workspaces are laid out in (cuda, cupy or triton)",
    )

    def session_seed(self, index: int) -> int | None:
        """The seed of the `index`-th episode or solution run with these settings."""
        return None if self.seed is None else self.seed * 1_000_003 + index

    def judging(self) -> dict[str, Any]:
        """The request fields these settings choose, wherever a tool's request has them."""
        return {"device": self.device, "audit": self.audit, "baselines": self.baselines}


@dataclass(frozen=True)
class Action:
    """A registry tool as a policy calls it, under its own name (`submit` is `evaluate`)."""

    tool: Tool
    name: str
    description: str

    @property
    def args(self) -> type[BaseModel]:
        return self.tool.policy_args

    @property
    def uses_gpu(self) -> bool:
        return self.tool.uses_gpu

    @property
    def ends_episode(self) -> bool:
        return self.name in FINAL_ACTIONS

    def openai_spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.tool.policy_schema(),
            },
        }

    def request(
        self, args: BaseModel, settings: EnvironmentSettings, schedule: RewardSchedule | None = None
    ) -> BaseModel:
        """The tool's whole request: the policy's arguments, the environment's settings."""
        environment = settings.judging() | ({"reward_schedule": schedule} if schedule else {})
        return self.tool.request_for(args, environment)

    async def run(
        self,
        session: Session,
        args: BaseModel,
        settings: EnvironmentSettings,
        schedule: RewardSchedule | None = None,
    ) -> BaseModel:
        return await self.tool(session, self.request(args, settings, schedule))


def _actions() -> dict[str, Action]:
    actions = {
        tool.name: Action(
            tool,
            tool.name,
            tool.description + (" This ends the episode." if tool.name in FINAL_ACTIONS else ""),
        )
        for tool in TOOLS.exposed_on("policy")
    }
    overlap = {name for tool in TOOLS.exposed_on("policy") for name in tool.policy_args.model_fields} & set(
        EnvironmentSettings.model_fields
    )
    if overlap:  # a policy argument the environment also sets would be decided twice
        raise TypeError(f"policy arguments that are environment settings: {sorted(overlap)}")
    evaluate = actions["evaluate"]
    description = "End the episode: verify, profile and score the workspace as it is."
    actions[SUBMIT] = Action(evaluate.tool, SUBMIT, description)
    return actions


ACTIONS: dict[str, Action] = _actions()


def tool_specs(names: list[str]) -> list[dict[str, Any]]:
    """The OpenAI tool specs of the named actions, as a policy is offered them."""
    return [ACTIONS[name].openai_spec() for name in names]


def evaluate_request(
    env: EnvironmentSettings, trials: int = 5, schedule: RewardSchedule | None = None
) -> EvaluateRequest:
    """The evaluation the environment runs for a final answer (and `score_batch` for each solution)."""
    action = ACTIONS["evaluate"]
    request = action.request(action.args(trials=trials), env, schedule)
    assert isinstance(request, EvaluateRequest)
    return request


class InvalidCall(Exception):
    """A tool call the environment cannot run; its message is the observation the policy gets."""


def parse_call(name: str, arguments: str, allowed: list[str]) -> tuple[Action, BaseModel]:
    """The action and validated arguments of one tool call, or InvalidCall with a readable reason."""
    action = ACTIONS.get(name)
    if action is None or name not in allowed:
        raise InvalidCall(f"unknown tool {name!r}; available: {', '.join(allowed)}")
    try:
        raw = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        raise InvalidCall(f"arguments of {name} are not valid JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(raw, dict):
        raise InvalidCall(f"arguments of {name} must be a JSON object")
    try:
        return action, action.args.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidCall(f"invalid arguments for {name}: {problems}") from None
