"""The agent loop behind `cuda-agent optimize`: a policy served over the OpenAI wire format drives the
same tool layer MCP clients and RL rollouts use, and every run leaves a JSONL trajectory."""

from cuda_agent_mcp.agent.actions import ACTIONS, EnvironmentSettings
from cuda_agent_mcp.agent.client import EndpointError, PolicyClient
from cuda_agent_mcp.agent.loop import EpisodeEvent, EpisodeResult, run_episode
from cuda_agent_mcp.agent.policy import (
    Budgets,
    PolicyError,
    PolicyPreset,
    list_policies,
    load_policy,
    vllm_command,
)
from cuda_agent_mcp.agent.search import best_of, gpu_scheduler
from cuda_agent_mcp.agent.trajectory import Trajectory, TrajectoryError, load_trajectory

__all__ = [
    "ACTIONS",
    "Budgets",
    "EndpointError",
    "EnvironmentSettings",
    "EpisodeEvent",
    "EpisodeResult",
    "PolicyClient",
    "PolicyError",
    "PolicyPreset",
    "Trajectory",
    "TrajectoryError",
    "best_of",
    "gpu_scheduler",
    "list_policies",
    "load_policy",
    "load_trajectory",
    "run_episode",
    "vllm_command",
]
