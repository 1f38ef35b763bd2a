"""Executors: where untrusted steps run. The tool layer only sees the `Executor` protocol."""

from cuda_agent_mcp.executors.base import Executor, ProcessLimits, ProcessResult
from cuda_agent_mcp.executors.local import LocalExecutor

__all__ = ["Executor", "LocalExecutor", "ProcessLimits", "ProcessResult"]
