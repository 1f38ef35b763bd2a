"""Executors: where untrusted steps run, built from the primitives of `isolation/`. The tool layer only
sees the `Executor` protocol (`DockerSettings` and `WorkspaceQuota` are arguments of two of them)."""

import os

from cuda_agent_mcp.errors import IsolationUnavailable, UsageError
from cuda_agent_mcp.executors.base import Executor, ProcessLimits, ProcessResult
from cuda_agent_mcp.executors.docker import DockerExecutor
from cuda_agent_mcp.executors.local import LocalExecutor
from cuda_agent_mcp.executors.sandboxed import (
    REDUCED_ISOLATION_ENV,
    SandboxedExecutor,
    SandboxPolicy,
    isolation_report,
    reduced_isolation_allowed,
)
from cuda_agent_mcp.isolation.containers import DockerSettings
from cuda_agent_mcp.isolation.quota import WorkspaceQuota

EXECUTOR_ENV = "CUDA_AGENT_EXECUTOR"


def default_executor(policy: SandboxPolicy | None = None) -> Executor:
    """The executor named by $CUDA_AGENT_EXECUTOR: `sandbox` (default: a filesystem view, another uid),
    `docker` (image from $CUDA_AGENT_DOCKER_IMAGE, default cuda-agent-sandbox:latest) or `local` (no
    isolation: only with $CUDA_AGENT_ALLOW_REDUCED_ISOLATION=1, for single-user local use)."""
    name = os.environ.get(EXECUTOR_ENV, "sandbox")
    if name == "local":
        if not reduced_isolation_allowed():
            raise IsolationUnavailable(
                f"${EXECUTOR_ENV}=local runs builds unconfined",
                f"set {REDUCED_ISOLATION_ENV}=1 to allow that (single-user local use), or unset ${EXECUTOR_ENV}",
            )
        return LocalExecutor()
    if name == "sandbox":
        return SandboxedExecutor(policy)
    if name == "docker":
        return DockerExecutor()
    raise UsageError(f"${EXECUTOR_ENV} must be 'local', 'sandbox' or 'docker', not {name!r}")


def isolating_executor(executor: Executor, policy: SandboxPolicy | None = None) -> Executor:
    """For commands that always need isolation (an agent's own scripts): the given executor when it
    isolates, else the sandboxed process executor (which refuses where it cannot build a view)."""
    return executor if isinstance(executor, DockerExecutor | SandboxedExecutor) else SandboxedExecutor(policy)


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
    "WorkspaceQuota",
    "default_executor",
    "isolating_executor",
    "isolation_report",
    "reduced_isolation_allowed",
]
