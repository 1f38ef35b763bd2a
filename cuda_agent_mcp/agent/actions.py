"""The tools a policy may call: thin wrappers over the tool layer, with argument models the policy sees.

Evaluator settings that decide what counts as honest (device, the PyTorch-compute audit, the precision
check, the reward schedule) are the environment's, never the policy's: a model that could pass
`audit: false` would learn to.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent_mcp.tools import (
    CompileRequest,
    EvaluateRequest,
    ProfileRequest,
    Session,
    VerifyRequest,
    compile_kernels,
    edit_file,
    evaluate_kernels,
    list_files,
    profile_kernels,
    read_file,
    search_files,
    verify_kernels,
    write_file,
)
from cuda_agent_mcp.tools.run import RunRequest, run_command


class EnvironmentSettings(BaseModel):
    """How the loop's verify/profile/evaluate calls judge; set by whoever runs the loop."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: Literal["cuda", "cpu"] = "cuda"
    audit: bool = Field(True, description="refuse PyTorch compute in the candidate (off only in CPU tests)")
    baselines: Literal["cached", "measure", "skip"] = "cached"
    seed: int | None = Field(
        None,
        description="fix the evaluations' input seeds (derived per episode or solution) so verify verdicts "
        "replay exactly; None: secret random seeds. Never shown to the policy.",
    )

    def session_seed(self, index: int) -> int | None:
        """The seed of the `index`-th episode or solution run with these settings."""
        return None if self.seed is None else self.seed * 1_000_003 + index


class _Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PathArgs(_Args):
    path: str = Field(description="a path inside the workspace, e.g. kernels/relu.cu")


class WriteArgs(_Args):
    path: str = Field(description="a path inside the workspace, e.g. kernels/relu.cu")
    content: str = Field(description="the whole new content of the file")


class EditArgs(_Args):
    path: str = Field(description="a path inside the workspace")
    old_text: str = Field(description="exact text to replace; must occur once unless replace_all")
    new_text: str
    replace_all: bool = False


class ListArgs(_Args):
    pattern: str = Field("**/*", description="glob pattern")


class SearchArgs(_Args):
    regex: str
    pattern: str = Field("**/*", description="glob pattern of files to search")


class NoArgs(_Args):
    pass


class VerifyArgs(_Args):
    trials: int = Field(5, ge=1, le=20, description="input sets, each from a fresh secret seed")


class RunArgs(_Args):
    argv: list[str] = Field(min_length=1, description="command and arguments, e.g. ['python', 'tune.py']")
    timeout_s: float = Field(60.0, gt=0, le=600)


Runner = Callable[[Session, Any, EnvironmentSettings], Awaitable[BaseModel]]


@dataclass(frozen=True)
class Action:
    name: str
    description: str
    args: type[_Args]
    run: Runner
    uses_gpu: bool = False

    def openai_spec(self) -> dict[str, Any]:
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }


def _verify(session: Session, a: VerifyArgs, env: EnvironmentSettings) -> Awaitable[BaseModel]:
    return verify_kernels(session, VerifyRequest(trials=a.trials, device=env.device, audit=env.audit))


def _profile(session: Session, a: NoArgs, env: EnvironmentSettings) -> Awaitable[BaseModel]:
    return profile_kernels(session, ProfileRequest(device=env.device, baselines=env.baselines))


def _evaluate(session: Session, a: VerifyArgs, env: EnvironmentSettings) -> Awaitable[BaseModel]:
    return evaluate_kernels(session, evaluate_request(env, trials=a.trials))


def evaluate_request(env: EnvironmentSettings, trials: int = 5) -> EvaluateRequest:
    return EvaluateRequest(
        verify=VerifyRequest(trials=trials, device=env.device, audit=env.audit, sanitize="auto"),
        profile=ProfileRequest(device=env.device, baselines=env.baselines),
    )


ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        Action(
            "read_file", "Read a text file of the workspace.", PathArgs, lambda s, a, e: read_file(s, a.path)
        ),
        Action(
            "write_file",
            "Create or replace a workspace file (model.py and the binding harness are protected).",
            WriteArgs,
            lambda s, a, e: write_file(s, a.path, a.content),
        ),
        Action(
            "edit_file",
            "Replace exact text in a workspace file.",
            EditArgs,
            lambda s, a, e: edit_file(s, a.path, a.old_text, a.new_text, replace_all=a.replace_all),
        ),
        Action(
            "list_files",
            "Workspace files matching a glob.",
            ListArgs,
            lambda s, a, e: list_files(s, a.pattern),
        ),
        Action(
            "search_files",
            "Lines matching a regular expression in workspace files.",
            SearchArgs,
            lambda s, a, e: search_files(s, a.regex, a.pattern),
        ),
        Action(
            "compile",
            "Build the kernels (incremental); diagnostics give file:line:column.",
            NoArgs,
            lambda s, a, e: compile_kernels(s, CompileRequest()),
        ),
        Action(
            "verify",
            "Build, then check ModelNew against the reference on fresh secret inputs.",
            VerifyArgs,
            _verify,
            uses_gpu=True,
        ),
        Action(
            "profile",
            "Build, then time ModelNew against PyTorch eager and torch.compile.",
            NoArgs,
            _profile,
            uses_gpu=True,
        ),
        Action(
            "evaluate",
            "verify + profile + reward (-1 fail, 1 correct, 2 beats eager, 3 beats eager and torch.compile).",
            VerifyArgs,
            _evaluate,
            uses_gpu=True,
        ),
        Action(
            "run",
            "Run a command in the sandboxed workspace (e.g. a tuning script); stdout, stderr, exit code.",
            RunArgs,
            lambda s, a, e: run_command(s, RunRequest(argv=a.argv, timeout_s=a.timeout_s)),
        ),
    )
}


class InvalidCall(Exception):
    """A tool call the environment cannot run; its message is the observation the policy gets."""


def parse_call(name: str, arguments: str, allowed: list[str]) -> tuple[Action, _Args]:
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
