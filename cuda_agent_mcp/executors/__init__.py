"""Executors: where untrusted steps run. The tool layer only sees the `Executor` protocol."""

import os

from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.executors.base import Executor, ProcessLimits, ProcessResult
from cuda_agent_mcp.executors.docker import DockerExecutor, DockerSettings
from cuda_agent_mcp.executors.local import LocalExecutor
from cuda_agent_mcp.executors.sandboxed import SandboxedExecutor, SandboxPolicy, available_isolation

EXECUTOR_ENV = "CUDA_AGENT_EXECUTOR"


def default_executor() -> Executor:
    """The executor named by $CUDA_AGENT_EXECUTOR: `local` (default), `sandbox` or `docker` (image from
    $CUDA_AGENT_DOCKER_IMAGE, default cuda-agent-sandbox:latest)."""
    name = os.environ.get(EXECUTOR_ENV, "local")
    if name == "local":
        return LocalExecutor()
    if name == "sandbox":
        return SandboxedExecutor()
    if name == "docker":
        return DockerExecutor()
    raise UsageError(f"${EXECUTOR_ENV} must be 'local', 'sandbox' or 'docker', not {name!r}")


def isolating_executor(executor: Executor) -> Executor:
    """For commands that always need isolation (an agent's own scripts): the given executor when it
    isolates, else the sandboxed process executor."""
    return executor if isinstance(executor, DockerExecutor | SandboxedExecutor) else SandboxedExecutor()


__all__ = [
    "EXECUTOR_ENV",
    "DockerExecutor",
    "DockerSettings",
    "Executor",
    "LocalExecutor",
    "ProcessLimits",
    "ProcessResult",
    "SandboxPolicy",
    "SandboxedExecutor",
    "available_isolation",
    "default_executor",
    "isolating_executor",
]
