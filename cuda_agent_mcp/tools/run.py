"""The `run` tool: a command of the agent's (a tuning script, a quick test) in its workspace, sandboxed.

Always through the sandboxed executor, whatever the session's executor: fresh network and PID
namespaces where the kernel allows them, CPU-time, file-size and open-file limits, a wall-clock limit
with the whole tree killed, output capped, a scrubbed environment. `isolation` says what applied.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.executors import ProcessLimits, SandboxedExecutor
from cuda_agent_mcp.executors.base import ProcessResult
from cuda_agent_mcp.executors.local import child_python_path, scrubbed_env
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
    executor = SandboxedExecutor()
    environment = scrubbed_env({"PYTHONPATH": child_python_path(str(session.workspace.root))})
    process = await executor.run(
        request.argv,
        cwd=session.workspace.root,
        limits=ProcessLimits(timeout_s=request.timeout_s),
        env=environment,
    )
    return RunResult(process=process, isolation=list(executor.isolation))
