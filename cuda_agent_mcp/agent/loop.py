"""One trajectory: the policy proposes tool calls (or, for text-format policies, whole files), the
episode core (`episode.py`) runs them through the tool layer, and the loop keeps the best verified kernel.

The run ends by the episode core's rule: `evaluate` (the final answer), the policy stopping, a budget,
invalid calls, a persisting infrastructure failure or the endpoint failing. Every end is clean: the
trajectory gets its end record and the workspace holds the best verified version (or, when nothing was
verified, the files as they were before the run). Text-format policies have each answer evaluated
without ending the run; an answer without files ends it."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from cuda_agent_mcp import __version__
from cuda_agent_mcp.agent.actions import ACTIONS, EnvironmentSettings, parse_call, tool_specs
from cuda_agent_mcp.agent.client import Completion, EndpointError
from cuda_agent_mcp.agent.context import FEEDBACK_PREFIX, trim, truncate
from cuda_agent_mcp.agent.episode import Counters, Episode, is_truncation
from cuda_agent_mcp.agent.failures import infrastructure_observation
from cuda_agent_mcp.agent.outcome import Outcome
from cuda_agent_mcp.agent.policy import Budgets, PolicyPreset
from cuda_agent_mcp.agent.snapshot import code_hash, editable_files, fenced_files, restore
from cuda_agent_mcp.agent.trajectory import (
    Best,
    EndRecord,
    Header,
    MessageRecord,
    RunTotals,
    ToolRecord,
    Trajectory,
    TrajectoryWriter,
)
from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.tools import Session, write_file

__all__ = ["EpisodeEvent", "EpisodeResult", "Policy", "infrastructure_observation", "run_episode"]


class Policy(Protocol):
    """What the loop needs from an endpoint (PolicyClient, or a test double)."""

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        seed: int | None,
        temperature: float,
    ) -> Completion: ...


class EpisodeEvent(BaseModel):
    """Progress for a live view: one per turn and per tool call."""

    turn: int
    kind: str
    tool: str | None = None
    detail: str = ""
    compile_ok: bool | None = None
    best_verified: bool = False
    best_reward: float | None = None
    best_speedup_vs_eager: float | None = None
    best_speedup_vs_compile: float | None = None
    gpu_queue: str | None = Field(
        default=None, description="the shared GPU scheduler's state, when there is one"
    )


class EpisodeResult(RunTotals):
    trajectory: str
    workspace: str
    seed: int | None
    temperature: float


EventSink = Callable[[EpisodeEvent], None]


@dataclass
class _State:
    """What the loop keeps beside the episode's counters: the best verified files and how it ended."""

    counters: Counters = field(default_factory=Counters)
    best: Best | None = None
    compile_ok: bool | None = None
    error: str | None = None

    @property
    def turn(self) -> int:
        return self.counters.turn


@dataclass
class _Run:
    """What every step of one run works on."""

    session: Session
    preset: PolicyPreset
    episode: Episode
    messages: list[dict[str, Any]]
    state: _State
    writer: TrajectoryWriter
    emit: EventSink

    def event(self, kind: str, *, tool: str | None = None, detail: str = "") -> None:
        best = self.state.best
        scheduler = self.session.scheduler
        self.emit(
            EpisodeEvent(
                turn=self.state.turn,
                kind=kind,
                tool=tool,
                detail=detail,
                compile_ok=self.state.compile_ok,
                best_verified=best is not None,
                best_reward=best.reward if best else None,
                best_speedup_vs_eager=best.speedup_vs_eager if best else None,
                best_speedup_vs_compile=best.speedup_vs_compile if best else None,
                gpu_queue=scheduler.describe() if scheduler is not None else None,
            )
        )

    def answer(self, message: dict[str, Any], record: ToolRecord) -> None:
        """Send an observation back to the policy and record the step and the message as sent (a resumed
        run continues the conversation from the message records: every tool call needs its answer)."""
        message["content"] = truncate(message["content"], self.preset.context.max_tool_output_chars)
        self.messages.append(message)
        self.writer.write(record)
        self.writer.write(MessageRecord(turn=self.state.turn, message=message))


def task_prompt(session: Session, preset: PolicyPreset) -> str:
    reference = (session.workspace.root / "model.py").read_text()
    files = ", ".join(sorted(editable_files(session))) or "none yet"
    return task_statement(
        session.task.id, reference, preset.action_format, files, language=session.workspace.language
    )


# The files a text-format answer holds, by kernel language (a CuPy workspace has no host code; a Triton
# workspace's kernels are in model_new.py).
_ANSWER_FILES: dict[KernelLanguage, str] = {
    "cuda": "```cuda kernels/my_op.cu, ```cpp kernels/my_op_binding.cpp and ```python model_new.py",
    "cupy": "```cuda kernels/my_op.cu and ```python model_new.py",
    "triton": "```python model_new.py (its @triton.jit kernels and ModelNew)",
}

# Where a language's kernels are written: a Triton workspace has no kernels/ directory.
_KERNELS_WHERE: dict[KernelLanguage, str] = {
    "cuda": "CUDA kernels in kernels/",
    "cupy": "CUDA kernels in kernels/",
    "triton": "Triton kernels (@triton.jit) in model_new.py",
}


def task_statement(
    task_id: str,
    reference: str,
    action_format: str,
    files: str = "none yet",
    *,
    language: KernelLanguage = "cuda",
) -> str:
    """What the policy is asked: the task, the reference program and how to answer."""
    how = (
        "Use the tools to write the kernels, compile, verify and profile; finish with evaluate."
        if action_format == "tools"
        else "Answer with the complete files, each in a fenced block whose info string is its path, e.g. "
        f"{_ANSWER_FILES[language]}. "
        "Each answer is compiled, verified and timed, and the result comes back to you."
    )
    return (
        f"Task {task_id}. Make ModelNew (model_new.py) compute exactly what Model computes, faster "
        f"than PyTorch eager and torch.compile, with {_KERNELS_WHERE[language]}.\n\nmodel.py:\n```python\n"
        f"{reference}```\n\nEditable files now: {files}. {how}"
    )


async def run_episode(
    session: Session,
    preset: PolicyPreset,
    policy: Policy,
    trajectory_path: Path,
    *,
    settings: EnvironmentSettings | None = None,
    budgets: Budgets | None = None,
    seed: int | None = None,
    temperature: float | None = None,
    on_event: EventSink | None = None,
    resume: Trajectory | None = None,
) -> EpisodeResult:
    settings = settings or EnvironmentSettings()
    budgets = budgets or preset.budgets
    temperature = preset.sampling.temperature if temperature is None else temperature
    emit = on_event or (lambda event: None)
    state = _State()
    original = editable_files(session)
    writer = TrajectoryWriter(trajectory_path)
    try:
        writer.write(
            Header(
                task_id=session.task.id,
                reference_hash=code_hash({"model.py": (session.workspace.root / "model.py").read_text()}),
                policy=preset.model_dump(mode="json"),
                environment=_environment(settings, session.workspace.language),
                sampling={"seed": seed, "temperature": temperature, "top_p": preset.sampling.top_p},
                started_at=datetime.now(UTC).isoformat(),
                resumed_from=str(resume.header.started_at) if resume else None,
            )
        )
        if resume is not None:
            messages = await _replay(session, resume, state, writer)
        else:
            messages = [
                {"role": "system", "content": preset.system_prompt(session.workspace.language)},
                {"role": "user", "content": task_prompt(session, preset)},
            ]
            for message in messages:
                writer.write(MessageRecord(turn=0, message=message))
        tools = tool_specs(preset.tools) if preset.action_format == "tools" else None
        episode = Episode(
            session,
            settings,
            allowed=preset.tools,
            budgets=budgets,
            max_output_chars=preset.context.max_tool_output_chars,
            counters=state.counters,
        )
        run = _Run(session, preset, episode, messages, state, writer, emit)
        counters = state.counters
        stop: str | None = None
        while stop is None:
            stop = episode.limit_reached()
            if stop is not None:
                break
            counters.turn += 1
            trim(messages, preset.context.max_context_tokens, preset.context.keep_recent_turns)
            try:
                completion = await policy.complete(messages, tools, seed=seed, temperature=temperature)
            except EndpointError as exc:
                # The endpoint's failure, not the policy's: the run ends with everything kept so far.
                stop, state.error = "endpoint_error", str(exc)
                break
            counters.tokens += int(completion.usage.get("total_tokens", 0))
            messages.append(completion.message)
            writer.write(
                MessageRecord(
                    turn=state.turn,
                    message=completion.message,
                    usage=completion.usage,
                    latency_s=completion.latency_s,
                )
            )
            run.event("turn", detail=str(completion.message.get("content") or "")[:120])
            if preset.action_format == "tools":
                stop = await _run_tool_calls(run, completion)
            else:
                stop = await _evaluate_answer(run, completion)
        last = editable_files(session)
        restore(session, state.best.files if state.best else original)
        end = EndRecord(
            stop_reason=stop,
            truncated=is_truncation(stop),
            turns=counters.turn,
            tokens=counters.tokens,
            wall_s=round(time.monotonic() - counters.started, 3),
            gpu_s=round(counters.gpu_s, 3),
            invalid_calls=counters.invalid_calls,
            best=state.best,
            error=state.error,
            last_files=last,
        )
        writer.write(end)
        run.event("end", detail=stop)
    finally:
        writer.close()
    return EpisodeResult(
        **end.model_dump(exclude={"type", "last_files"}),
        trajectory=str(trajectory_path),
        workspace=str(session.workspace.root),
        seed=seed,
        temperature=temperature,
    )


async def _run_tool_calls(run: _Run, completion: Completion) -> str | None:
    state = run.state
    calls = completion.message.get("tool_calls") or []
    if not calls:
        return "policy_finished"
    stop: str | None = None
    for call in calls:
        call_id = str(call.get("id", ""))
        function = call.get("function") or {}
        name, arguments = str(function.get("name", "")), str(function.get("arguments", ""))
        if stop is not None:
            # The episode ended earlier in this turn; the call still gets an answer, so the
            # conversation stays valid, but it does not run.
            note = f"not run: the episode ended ({stop})"
            record = ToolRecord(
                turn=state.turn, call_id=call_id, name=name, arguments=arguments, valid=False, error=note
            )
            run.answer({"role": "tool", "tool_call_id": call_id, "content": f"error: {note}"}, record)
            continue
        step = await run.episode.call(name, arguments)
        record = ToolRecord(
            turn=state.turn,
            call_id=call_id,
            name=name,
            arguments=arguments,
            valid=step.valid,
            error=step.error,
            infra_error=step.infra_error,
            attempts=step.attempts,
            wall_s=step.wall_s,
        )
        if step.result is not None:
            record.result = step.result.model_dump(mode="json")
            _note_result(run.session, step.outcome, state, record)
        if step.infra_error:
            state.error = step.error
        run.answer({"role": "tool", "tool_call_id": call_id, "content": step.observation}, record)
        run.event("tool", tool=name, detail=(record.error or "ok")[:160])
        stop = step.ends
    return stop


async def _evaluate_answer(run: _Run, completion: Completion) -> str | None:
    """Text format: write the answer's fenced files, evaluate, and send the result back as a user turn.
    Each answer is evaluated without ending the episode; an answer without files ends it."""
    state = run.state
    files = fenced_files(str(completion.message.get("content") or ""))
    if not files:
        return "policy_finished"
    problems = []
    for path, text in files.items():
        try:
            await write_file(run.session, path, text)
        except CudaAgentError as exc:
            problems.append(f"{path}: {exc}")
    evaluate = ACTIONS["evaluate"]
    step = await run.episode.run(evaluate, evaluate.args(), final=False)
    record = ToolRecord(
        turn=state.turn,
        call_id=f"answer-{state.turn}",
        name="evaluate",
        arguments="{}",
        valid=True,
        infra_error=step.infra_error,
        attempts=step.attempts,
        wall_s=step.wall_s,
    )
    record.error = "; ".join([*problems, *([step.error] if step.error else [])]) or None
    if step.result is not None:
        record.result = step.result.model_dump(mode="json")
        _note_result(run.session, step.outcome, state, record)
    if step.infra_error:
        state.error = step.error
    text = (
        f"{FEEDBACK_PREFIX} (turn {state.turn}):\n" + "".join(f"{p}\n" for p in problems) + step.observation
    )
    message = {"role": "user", "content": text}
    run.answer(message, record)
    run.event("tool", tool="evaluate", detail=step.outcome.verify_status or (step.error or "")[:160])
    return step.ends


def _note_result(session: Session, outcome: Outcome, state: _State, record: ToolRecord) -> None:
    """Record reward and verification of a result; keep the files if they beat the best so far."""
    if outcome.compile_ok is not None:
        state.compile_ok = outcome.compile_ok
    record.verified, record.reward = outcome.verified, outcome.reward
    files = editable_files(session)
    record.code_hash = code_hash(files)
    if not outcome.verified:
        return
    candidate = Best(
        reward=outcome.reward,
        speedup_vs_eager=outcome.speedup_vs_eager,
        speedup_vs_compile=outcome.speedup_vs_compile,
        code_hash=record.code_hash,
        files=files,
        turn=state.turn,
    )
    if state.best is None or rank_best(candidate) > rank_best(state.best):
        state.best = candidate


def rank_best(best: Best) -> tuple[float, float]:
    """Verified is worth at least the 'correct' milestone (1) even when timing was not done or failed."""
    reward = best.reward if best.reward is not None and best.reward >= 1 else 1.0
    return reward, best.speedup_vs_compile or 0.0


async def _replay(
    session: Session, trajectory: Trajectory, state: _State, writer: TrajectoryWriter
) -> list[dict[str, Any]]:
    """Resume: re-apply the recorded file edits to this workspace (no model calls, no evaluations) and
    continue the recorded conversation and counters."""
    for record in trajectory.tools:
        if record.valid and record.name in ("write_file", "edit_file") and record.error is None:
            action, args = parse_call(record.name, record.arguments, [record.name])
            await action.run(session, args, EnvironmentSettings())
    messages = trajectory.conversation()
    for message in trajectory.messages:
        writer.write(message)
    for record in trajectory.tools:
        writer.write(record)
    counters = state.counters
    if trajectory.end is not None:
        counters.turn = trajectory.end.turns
        counters.tokens = trajectory.end.tokens
        counters.gpu_s = trajectory.end.gpu_s
        counters.invalid_calls = trajectory.end.invalid_calls
        state.best = trajectory.end.best
    else:
        counters.turn = max((m.turn for m in trajectory.messages), default=0)
    return messages


def _environment(settings: EnvironmentSettings, language: KernelLanguage) -> dict[str, Any]:
    import torch

    return {
        "cuda_agent_mcp": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        # The workspace's own: a session opened on an existing workspace keeps the language it has.
        "language": language,
        "settings": settings.model_dump(),
    }
