"""A hardened local executor: each command in fresh Linux namespaces, a filesystem view and limits.

    [pids cgroup] bwrap --unshare-net --unshare-pid --die-with-parent <view> -- prlimit ... -- CMD
    or, without bubblewrap:  unshare --net --pid --fork --kill-child --mount-proc -- prlimit ... -- CMD

- network namespace: no network at all (not even the host's loopback);
- PID namespace: when the command ends, the kernel kills everything it started, including processes that
  called setsid or double-forked, which a process-group kill misses;
- filesystem view (bubblewrap): the system directories and the paths the caller declares read-only, the
  working directory read-write, a private /tmp; nothing else of the machine (not the evaluator's sources,
  not other workspaces, not the build cache's write side);
- pids cgroup: a fork bomb stops at `max_processes`, and everything left is killed at the end;
- rlimits: CPU seconds, largest file, open files, no core dumps.

What the machine allows is probed once (unprivileged containers may refuse namespaces, bubblewrap may
be missing); the executor uses what works and says so in `isolation`, rather than failing or silently
pretending.
"""

from __future__ import annotations

import ctypes
import math
import os
import shutil
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.executors.base import ProcessLimits, ProcessResult
from cuda_agent_mcp.executors.cgroup import PidsCgroup
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
    max_processes: int = Field(256, gt=8, description="processes and threads at once (pids cgroup)")


# The system directories every view shows read-only (symlinks, as on merged-/usr systems, stay symlinks),
# and the few files of /etc that the dynamic loader, compilers and Python read.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group", "localtime")


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


@cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none), for the isolation report. The same probe as
    `worker/landlock.abi_version`, which confines workers: the judge side may not import the worker."""
    libc = ctypes.CDLL(None, use_errno=True)
    return max(int(libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))), 0)


@cache
def filesystem_view_available() -> bool:
    """Whether bubblewrap runs here with fresh network and PID namespaces (probed once per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    probe = [bwrap, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def filesystem_view(cwd: Path, readable: Sequence[Path]) -> list[str]:
    """bubblewrap arguments for a root holding the system directories, `readable` (read-only) and `cwd`
    (read-write) at their own paths, a private /tmp, /proc and /dev; nothing else."""
    args: list[str] = []
    for name in _SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    for entry in _ETC_ENTRIES:
        args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    # After the tmpfs, so paths under /tmp (a virtual environment, a test's workspace) show through it.
    system = [Path(name) for name in _SYSTEM_DIRS]
    for path in readable:
        if not any(Path(path).is_relative_to(root) for root in system):  # those are visible already
            args += ["--ro-bind-try", str(path), str(path)]
    args += ["--bind", str(cwd), str(cwd), "--chdir", str(cwd)]
    return args


class SandboxedExecutor:
    """Runs commands like LocalExecutor, inside the namespaces and limits this machine supports."""

    name = "sandbox"

    def __init__(self, policy: SandboxPolicy | None = None) -> None:
        self.policy = policy or SandboxPolicy()
        self.view = filesystem_view_available()
        self.isolation = ("network", "pid", "filesystem") if self.view else available_isolation()
        self._inner = LocalExecutor()

    def wrap(
        self, argv: Sequence[str], limits: ProcessLimits, cwd: Path, readable: Sequence[Path] = ()
    ) -> list[str]:
        """The full command line: namespaces and the view outside, limits inside, then the command."""
        command: list[str] = []
        if self.view:
            command += ["bwrap", "--unshare-net", "--unshare-pid", "--die-with-parent"]
            command += [*filesystem_view(cwd, readable), "--"]
        elif self.isolation:
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
        readable: Sequence[Path] = (),
    ) -> ProcessResult:
        command = self.wrap(argv, limits, cwd, readable)
        cgroup = PidsCgroup.create(f"worker-run-{uuid.uuid4().hex[:12]}", max_pids=self.policy.max_processes)
        if cgroup is not None:
            # The shell joins the cgroup and becomes the command, so everything it starts is counted.
            command = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cgroup.path), *command]
        try:
            result = await self._inner.run(command, cwd=cwd, limits=limits, env=env)
        finally:
            if cgroup is not None:
                await anyio.to_thread.run_sync(cgroup.remove)
        return result.model_copy(update={"argv": [str(a) for a in argv]})
