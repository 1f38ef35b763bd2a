"""Executors: where untrusted steps run. The tool layer only sees the `Executor` protocol."""

import os

from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.executors.base import Executor, ProcessLimits, ProcessResult
from cuda_agent_mcp.executors.local import LocalExecutor
from cuda_agent_mcp.executors.sandboxed import SandboxedExecutor, SandboxPolicy, available_isolation

EXECUTOR_ENV = "CUDA_AGENT_EXECUTOR"


def default_executor() -> Executor:
    """The executor named by $CUDA_AGENT_EXECUTOR: `local` (default) or `sandbox`."""
    name = os.environ.get(EXECUTOR_ENV, "local")
    if name == "local":
        return LocalExecutor()
    if name == "sandbox":
        return SandboxedExecutor()
    raise UsageError(f"${EXECUTOR_ENV} must be 'local' or 'sandbox', not {name!r}")


__all__ = [
    "EXECUTOR_ENV",
    "Executor",
    "LocalExecutor",
    "ProcessLimits",
    "ProcessResult",
    "SandboxPolicy",
    "SandboxedExecutor",
    "available_isolation",
    "default_executor",
]
