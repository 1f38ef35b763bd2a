"""The `run` tool: a command of the agent's (a tuning script, a quick test) in its workspace, isolated.

Always isolated, whatever the session's executor: in a container when the session uses the Docker
backend, else in the sandboxed process executor (fresh network and PID namespaces and a filesystem view
where the machine allows them, CPU-time, file-size, open-file and process limits, a wall-clock limit with
the whole tree killed, output capped, a scrubbed environment). `isolation` says what applied. The command
sees its workspace (read-write), the Python it runs with and the CUDA toolkit (read-only), not this
package's sources: the workspace is its import path.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.build import discover_toolchain
from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.executors import ProcessLimits, isolating_executor
from cuda_agent_mcp.executors.base import ProcessResult
from cuda_agent_mcp.executors.local import scrubbed_env
from cuda_agent_mcp.tools.session import Session


class RunRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    argv: list[str] = Field(
        min_length=1, description="the command and its arguments, e.g. ['python', 'tune.py']"
    )
    timeout_s: float = Field(
        60.0, gt=0, le=600, description="wall-clock limit; the whole process tree is killed"
    )


class RunResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    process: ProcessResult
    isolation: list[str] = Field(
        description="namespaces the command ran in (besides limits and a process group)"
    )


async def run_command(session: Session, request: RunRequest) -> RunResult:
    """Run `argv` with the workspace as working directory; the workspace's own modules are importable."""
    executor = isolating_executor(session.executor)
    inherited = os.environ.get("PYTHONPATH", "")
    environment = scrubbed_env(
        {"PYTHONPATH": os.pathsep.join(filter(None, [str(session.workspace.root), inherited]))}
    )
    process = await executor.run(
        request.argv,
        cwd=session.workspace.root,
        limits=ProcessLimits(timeout_s=request.timeout_s),
        env=environment,
        readable=runtime_paths(inherited),
    )
    return RunResult(process=process, isolation=list(executor.isolation))  # type: ignore[attr-defined]


def runtime_paths(python_path: str) -> list[Path]:
    """What an agent's script needs to read: this Python (its environment and the installation it came
    from, torch included), the entries of an inherited PYTHONPATH, the CUDA toolkit when there is one."""
    paths = [Path(sys.prefix), Path(sys.base_prefix), *(Path(p) for p in python_path.split(os.pathsep) if p)]
    with contextlib.suppress(CudaAgentError):
        paths += discover_toolchain().readable_paths
    return paths
