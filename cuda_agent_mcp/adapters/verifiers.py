"""Prime Intellect verifiers (v1 API): kernel tasks as a taskset whose reward is this project's evaluation.

verifiers finds tasksets by a top-level module name; `examples/rl/cuda_agent_kernels.py` is one:

    PYTHONPATH=examples/rl vf-eval cuda_agent_kernels --env.taskset.tasks '["path/to/KernelBench"]' ...

From Python: `load_taskset(tasks=[...], task={...})` or `KernelTaskset(KernelTasksetConfig(...))`.

Each task asks for the files in the text action format (fenced blocks named by path, as the kevin-32b
and cudallm-8b presets answer). `kernel_reward` takes the last model answer of the trace, scores its files
with `score_batch` (fresh workspace, build, verify, profile; secret seeds) and returns the named reward
schedule's value; the metrics say whether it compiled and verified and its speedups. An infrastructure
failure raises, so verifiers records an error for the trace instead of a reward a trainer would learn from.
Needs `pip install verifiers` (its own environment: it pins packages the MCP server does not accept).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import verifiers.v1 as vf
from pydantic import Field

from cuda_agent_mcp.agent.actions import EnvironmentSettings
from cuda_agent_mcp.agent.failures import InfraFailure
from cuda_agent_mcp.agent.loop import task_statement
from cuda_agent_mcp.agent.policy import load_policy
from cuda_agent_mcp.agent.snapshot import fenced_files
from cuda_agent_mcp.env.scoring import Solution, score_batch
from cuda_agent_mcp.errors import InfraError
from cuda_agent_mcp.evaluation.reward import RewardSchedule
from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.tasks import TaskCatalog

PRESET = "kevin-32b"  # a text-format preset: its system prompt asks for fenced files


class KernelTaskData(vf.TaskData):
    task_id: str
    task_sources: list[str] = Field(default_factory=list, description="where the catalog found the task")


class KernelTaskConfig(vf.TaskConfig):
    """How answers are judged (the environment's settings, never the policy's)."""

    device: Literal["cuda", "cpu"] = "cuda"
    audit: bool = True
    baselines: Literal["cached", "measure", "skip"] = "cached"
    schedule: RewardSchedule = "milestones"
    trials: int = Field(default=5, ge=1)
    language: KernelLanguage = Field(default="cuda", description="the kernel language answers are written in")


class KernelTask(vf.Task[KernelTaskData, KernelTaskConfig]):
    @vf.reward
    async def kernel_reward(self, trace: vf.Trace) -> float:
        answers = trace.assistant_messages
        files = fenced_files(_text(answers[-1].content)) if answers else {}
        if not files:
            trace.record_metrics({"compile_ok": 0.0, "verify_ok": 0.0})
            return -1.0
        config = self.config
        settings = EnvironmentSettings(
            device=config.device, audit=config.audit, baselines=config.baselines, language=config.language
        )
        catalog = TaskCatalog([Path(p) for p in self.data.task_sources])
        (score,) = await score_batch(
            [Solution(task=self.data.task_id, files=files)],
            catalog=catalog,
            settings=settings,
            schedule=config.schedule,
            trials=config.trials,
        )
        if score.masked:
            raise InfraFailure(score.attempts, InfraError(score.message))
        trace.record_metrics(
            {
                "compile_ok": float(score.status != "compile_failed"),
                "verify_ok": float(score.status == "passed"),
                "speedup_vs_eager": score.speedup_vs_eager or 0.0,
                "speedup_vs_compile": score.speedup_vs_compile or 0.0,
            }
        )
        return score.reward


class KernelTasksetConfig(vf.TasksetConfig):
    tasks: list[str] = Field(
        default_factory=list,
        description="task sources besides the bundled examples (KernelBench trees, datasets, .py)",
    )
    ids: list[str] = Field(default_factory=list, description="only these task ids (default: all)")
    task: KernelTaskConfig = KernelTaskConfig()


class KernelTaskset(vf.Taskset[KernelTask, KernelTasksetConfig]):
    def load(self) -> Iterator[KernelTask]:
        catalog = TaskCatalog([Path(p) for p in self.config.tasks])
        preset = load_policy(PRESET)
        language = self.config.task.language
        for task in catalog.list():
            if self.config.ids and task.id not in self.config.ids:
                continue
            data = KernelTaskData(
                id=task.id,
                name=task.name,
                prompt=task_statement(task.id, task.code, preset.action_format, language=language),
                system_prompt=preset.system_prompt(language),
                task_id=task.id,
                task_sources=list(self.config.tasks),
            )
            yield KernelTask(data, self.config.task)


def load_taskset(**config: Any) -> KernelTaskset:
    """The taskset with `config` (KernelTasksetConfig fields), for code that builds environments itself."""
    return KernelTaskset(KernelTasksetConfig(**config))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") or "" for part in content or [])


__all__ = ["KernelTaskset"]
