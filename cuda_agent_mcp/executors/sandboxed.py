"""A hardened local executor: each command in fresh Linux namespaces and under resource limits.

    unshare --net --pid --fork --kill-child --mount-proc -- prlimit --cpu=.. --fsize=.. --nofile=.. --core=0 -- CMD

- network namespace: no network at all (not even the host's loopback);
- PID namespace: when the command ends, the kernel kills everything it started, including processes that
  called setsid or double-forked, which a process-group kill misses;
- rlimits: CPU seconds, largest file, open files, no core dumps.

What the kernel allows is probed once (unprivileged containers may refuse namespaces); the executor uses
what works and says so in `isolation`, rather than failing or silently pretending. The remaining layers
(read-only filesystem view, cgroup memory and pids limits, Docker) belong to the sandbox issue.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.executors.base import ProcessLimits, ProcessResult
from cuda_agent_mcp.executors.local import LocalExecutor

_NAMESPACE_OPTIONS = {
    "network": ["--net"],
    "pid": ["--pid", "--fork", "--kill-child", "--mount-proc"],
}


class SandboxPolicy(BaseModel):
    """Resource limits applied to every command (on top of the per-call time and output limits)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_file_bytes: int = Field(2 * 1024**3, gt=0, description="largest file a command may write")
    max_open_files: int = Field(4096, gt=16)
    cpu_seconds_margin: float = Field(5.0, ge=0, description="CPU-time limit = wall-clock limit + this")


@cache
def available_isolation() -> tuple[str, ...]:
    """The namespaces this machine lets us create (probed once per process)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    usable = []
    for name, options in _NAMESPACE_OPTIONS.items():
        try:
            done = subprocess.run([unshare, *options, "--", "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            usable.append(name)
    return tuple(usable)


class SandboxedExecutor:
    """Runs commands like LocalExecutor, inside the namespaces and limits this machine supports."""

    name = "sandbox"

    def __init__(self, policy: SandboxPolicy | None = None) -> None:
        self.policy = policy or SandboxPolicy()
        self.isolation = available_isolation()
        self._inner = LocalExecutor()

    def wrap(self, argv: Sequence[str], limits: ProcessLimits) -> list[str]:
        """The full command line: namespaces outside, limits inside, then the command."""
        command: list[str] = []
        if self.isolation:
            command += ["unshare"]
            for name in self.isolation:
                command += _NAMESPACE_OPTIONS[name]
            command += ["--"]
        if shutil.which("prlimit"):
            cpu = math.ceil(limits.timeout_s + self.policy.cpu_seconds_margin)
            command += [
                "prlimit",
                f"--cpu={cpu}",
                f"--fsize={self.policy.max_file_bytes}",
                f"--nofile={self.policy.max_open_files}",
                "--core=0",
                "--",
            ]
        return [*command, *map(str, argv)]

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        limits: ProcessLimits,
        env: Mapping[str, str] | None = None,
    ) -> ProcessResult:
        result = await self._inner.run(self.wrap(argv, limits), cwd=cwd, limits=limits, env=env)
        return result.model_copy(update={"argv": [str(a) for a in argv]})
