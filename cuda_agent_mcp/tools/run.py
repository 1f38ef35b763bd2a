"""The `run` tool: a command of the agent's (a tuning script, a quick test) in its workspace, isolated.

Always isolated, whatever the session's executor: in a container when the session uses the Docker
backend, else in the sandboxed executor (a filesystem view, a uid of the session's own when the server is
root, fresh network and PID namespaces, CPU-time, file-size, open-file and process limits, a wall-clock
limit with the whole tree killed, output capped, a scrubbed environment), which refuses where no view can
be built. `isolation` says what applied. The command sees its workspace (read-write, within the session's
quota, the harness files read-only), the Python it runs with and the CUDA toolkit (read-only); not the
server's files, the build cache, the journal or other workspaces. A quota reached is `limit` in the
result: the session goes on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.build import discover_toolchain
from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.executors import ProcessLimits, SandboxedExecutor
from cuda_agent_mcp.executors.base import ProcessResult
from cuda_agent_mcp.executors.local import scrubbed_env
from cuda_agent_mcp.isolation.quota import QuotaOutcome, SessionQuotas, remaining
from cuda_agent_mcp.isolation.uids import lend_tree
from cuda_agent_mcp.tools.session import Session
from cuda_agent_mcp.workspace import PROTECTED_FILES


class RunRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    argv: list[str] = Field(
        min_length=1, description="the command and its arguments, e.g. ['python', 'tune.py']"
    )
    timeout_s: float = Field(
        default=60.0, gt=0, le=600, description="wall-clock limit; the whole process tree is killed"
    )


class RunResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    process: ProcessResult
    isolation: list[str] = Field(
        description="what confined the command (view, namespaces, uid, limits); 'reduced-isolation' "
        "when the server was told to run without a view"
    )
    limit: str | None = Field(
        default=None, description="the session quota this command ran into, and what to do about it"
    )


async def run_command(session: Session, request: RunRequest) -> RunResult:
    """Run `argv` with the workspace as working directory; the workspace's own modules are importable."""
    executor = session.run_executor
    root = session.workspace.root
    inherited = os.environ.get("PYTHONPATH", "")
    environment = scrubbed_env(
        {"PYTHONPATH": os.pathsep.join(filter(None, [str(root), inherited])), "HOME": "/tmp"}
    )
    limits = ProcessLimits(timeout_s=request.timeout_s)
    readable = runtime_paths(inherited)
    outcome = QuotaOutcome()
    if isinstance(executor, SandboxedExecutor):
        quota = await anyio.to_thread.run_sync(remaining, root, session.quotas)
        owner = root.stat()
        try:
            process, outcome = await executor.run_with_outcome(
                request.argv,
                cwd=root,
                limits=limits,
                env=environment,
                readable=readable,
                protected=[root / name for name in PROTECTED_FILES],
                quota=quota,
            )
        finally:
            if executor.uid is not None and not session.workspace_owned:  # a directory of the user's
                await anyio.to_thread.run_sync(lambda: lend_tree(root, owner.st_uid, gid=owner.st_gid))
    else:
        process = await executor.run(
            request.argv, cwd=root, limits=limits, env=environment, readable=readable
        )
    isolation = list(executor.isolation)  # type: ignore[attr-defined]  # Docker or sandboxed: isolating_executor
    return RunResult(
        process=process, isolation=isolation, limit=limit_reached(process, outcome, session.quotas)
    )


def limit_reached(process: ProcessResult, outcome: QuotaOutcome, quotas: SessionQuotas) -> str | None:
    """Which quota the command ran into, in words an agent can act on; None when it ran into none."""
    if outcome.quota == "bytes":
        return (
            f"the workspace reached its quota of {_size(quotas.workspace_quota_bytes)} (workspace_quota_bytes; "
            "writes past it failed with "
            "'No space left on device'): delete files you no longer need, then run again"
        )
    if outcome.quota == "files":
        return f"the workspace reached its quota of {quotas.files} files and directories: delete some, then run again"
    if process.returncode == -signal.SIGXFSZ or "File too large" in process.output:
        return (
            f"a file reached the limit of {_size(quotas.command_file_bytes)} for one file a command writes "
            "(command_file_bytes): write smaller files"
        )
    if process.returncode == -signal.SIGXCPU:
        return f"a process used its {quotas.cpu_seconds:g} CPU seconds and was stopped"
    if outcome.forks_refused:
        return f"the command reached its limit of {quotas.processes} processes and threads (forks failed)"
    if outcome.merge_error:
        return f"the command's writes could not all be kept ({outcome.merge_error}): run it again"
    return None


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:g} {unit}"
    return f"{count} bytes"


def runtime_paths(python_path: str) -> list[Path]:
    """What an agent's script needs to read: this Python (its environment and the installation it came
    from, torch included), the entries of an inherited PYTHONPATH, the CUDA toolkit when there is one."""
    paths = [Path(sys.prefix), Path(sys.base_prefix), *(Path(p) for p in python_path.split(os.pathsep) if p)]
    with contextlib.suppress(CudaAgentError):
        paths += discover_toolchain().readable_paths
    return paths
