"""The environment for RL trainers: `KernelEnv` episodes, `score_batch` for single-turn scoring, failure
semantics that keep infrastructure faults out of the reward, and rejection-fine-tuning export."""

from cuda_agent_mcp.agent.failures import FailureKind, InfraFailure
from cuda_agent_mcp.env.kernel_env import KernelEnv, Observation, StepInfo, StepResult, ToolCall
from cuda_agent_mcp.env.scoring import Score, Solution, score_batch
from cuda_agent_mcp.env.sft import FilterPolicy, export_sft, judge_trajectory

__all__ = [
    "FailureKind",
    "FilterPolicy",
    "InfraFailure",
    "KernelEnv",
    "Observation",
    "Score",
    "Solution",
    "StepInfo",
    "StepResult",
    "ToolCall",
    "export_sft",
    "judge_trajectory",
    "score_batch",
]
