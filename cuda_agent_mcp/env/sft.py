"""Rejection fine-tuning data from agent-loop trajectories (the paper's recipe): keep trajectories that
ended with a positive reward, drop those with invalid tool calls or redundant loops, export the
conversations as a chat-format dataset (one JSON object per line: messages, tools, metadata)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from cuda_agent_mcp.agent.actions import ACTIONS
from cuda_agent_mcp.agent.trajectory import Trajectory, TrajectoryError, load_trajectory


class FilterPolicy(BaseModel):
    min_reward: float = Field(default=0.0, description="keep trajectories whose best reward is above this")
    allow_invalid_calls: bool = False
    max_repeats: int = Field(
        default=2, ge=1, description="the same call on the same code more often is a loop"
    )
    drop_infra_errors: bool = True


class Verdict(BaseModel):
    path: str
    kept: bool
    reason: str


def judge_trajectory(trajectory: Trajectory, policy: FilterPolicy) -> str | None:
    """Why a trajectory is dropped, or None to keep it."""
    end = trajectory.end
    if end is None:
        return "unfinished (no end record)"
    if end.best is None or end.best.reward is None or end.best.reward <= policy.min_reward:
        return f"best reward {end.best.reward if end.best else None} not above {policy.min_reward}"
    unanswered = _unanswered_calls(trajectory.conversation())
    if unanswered:
        return f"{unanswered} tool calls have no tool message answering them (written before answers were recorded)"
    if not policy.allow_invalid_calls and end.invalid_calls:
        return f"{end.invalid_calls} invalid tool calls"
    if policy.drop_infra_errors and any(r.infra_error for r in trajectory.tools):
        return "an infrastructure error happened during it"
    repeats = Counter((r.name, r.arguments, r.code_hash) for r in trajectory.tools)
    looped = [name for (name, _, _), count in repeats.items() if count > policy.max_repeats]
    if looped:
        return f"redundant loop: {looped[0]} repeated on the same code"
    return None


def _unanswered_calls(messages: list[dict[str, object]]) -> int:
    """Tool calls no later tool message answers: a chat template would render them as an assistant
    talking to itself, so the row would teach the wrong format."""
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    calls = [
        call.get("id")
        for m in messages
        if m.get("role") == "assistant"
        for call in (m.get("tool_calls") or [])  # type: ignore[attr-defined]
        if isinstance(call, dict)
    ]
    return sum(1 for call_id in calls if call_id not in answered)


def export_sft(paths: Iterable[Path], out: Path, policy: FilterPolicy | None = None) -> list[Verdict]:
    """Write the kept trajectories to `out` (JSONL chat format); say for each input why."""
    policy = policy or FilterPolicy()
    verdicts: list[Verdict] = []
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as sink:
        for path in paths:
            try:
                trajectory = load_trajectory(path)
            except (OSError, TrajectoryError) as exc:
                verdicts.append(Verdict(path=str(path), kept=False, reason=f"unreadable: {exc}"))
                continue
            reason = judge_trajectory(trajectory, policy)
            verdicts.append(Verdict(path=str(path), kept=reason is None, reason=reason or "kept"))
            if reason is None:
                sink.write(json.dumps(_chat_row(trajectory)) + "\n")
    return verdicts


def _chat_row(trajectory: Trajectory) -> dict[str, object]:
    tools = trajectory.header.policy.get("tools") or []
    assert trajectory.end is not None and trajectory.end.best is not None
    return {
        "messages": trajectory.conversation(),
        "tools": [ACTIONS[name].openai_spec() for name in tools if name in ACTIONS],
        "metadata": {
            "task_id": trajectory.header.task_id,
            "reward": trajectory.end.best.reward,
            "speedup_vs_eager": trajectory.end.best.speedup_vs_eager,
            "speedup_vs_compile": trajectory.end.best.speedup_vs_compile,
            "code_hash": trajectory.end.best.code_hash,
            "policy": trajectory.header.policy.get("name"),
            "environment": trajectory.header.environment,
        },
    }
