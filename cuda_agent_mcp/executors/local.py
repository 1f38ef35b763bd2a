"""Run a command as a local subprocess in its own process group, with a time and an output limit.

This is the unhardened baseline the sandbox issue builds on: it already guarantees that a hung
or flooding process is killed together with its children and reported, never waited on forever.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.executors.base import ProcessLimits, ProcessResult

_TAIL_BYTES = 8 * 1024


def scrubbed_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: the tools on PATH, C locale (so compiler messages parse), nothing else."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LC_ALL": "C",
        "LANG": "C",
        "HOME": os.environ.get("HOME", "/tmp"),
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
    }
    if extra:
        env.update(extra)
    return env


def child_python_path(base: str | None = None) -> str:
    """PYTHONPATH for our own child interpreters: this copy of the package first, then `base` (by default
    this process's PYTHONPATH), so a child finds the same dependencies the parent runs with."""
    package_parent = str(Path(__file__).resolve().parents[2])
    inherited = os.environ.get("PYTHONPATH") if base is None else base
    return os.pathsep.join(filter(None, [package_parent, inherited]))


class OutputCollector:
    """Keeps the head of a stream and its last few KiB, and counts everything."""

    def __init__(self, keep_bytes: int) -> None:
        self._head_limit = max(keep_bytes - _TAIL_BYTES, keep_bytes // 2)
        self._tail_limit = keep_bytes - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            del self._tail[: max(0, len(self._tail) - self._tail_limit)]

    @property
    def truncated(self) -> bool:
        return self.total > len(self._head) + len(self._tail)

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + self._tail.decode("utf-8", errors="replace")
        dropped = self.total - len(self._head) - len(self._tail)
        marker = f"\n[... {dropped} bytes of output truncated ...]\n"
        return head + marker + self._tail.decode("utf-8", errors="replace")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


class LocalExecutor:
    """Runs commands directly on this machine (no isolation beyond a process group and limits)."""

    name = "local"
    isolation: tuple[str, ...] = ("none",)

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        limits: ProcessLimits,
        env: Mapping[str, str] | None = None,
        readable: Sequence[Path] = (),
    ) -> ProcessResult:
        # `readable` matters to backends with a filesystem view; this one sees the whole machine.
        argv = [str(a) for a in argv]
        started = time.monotonic()
        try:
            process = await anyio.open_process(
                argv,
                cwd=cwd,
                env=dict(env) if env is not None else scrubbed_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so a kill reaches every child
            )
        except OSError as exc:
            raise ExecutorUnavailable(argv[0], exc.strerror or str(exc)) from exc

        collector = OutputCollector(limits.keep_output_bytes)
        output_limit_hit = False
        try:
            with anyio.move_on_after(limits.timeout_s) as deadline:
                assert process.stdout is not None
                async for chunk in process.stdout:
                    collector.feed(chunk)
                    if collector.total > limits.max_output_bytes:
                        output_limit_hit = True
                        break
                if output_limit_hit:
                    _kill_group(process.pid)
                await process.wait()
        finally:
            # Also on cancellation from outside: nothing we started may outlive the call.
            if process.returncode is None or output_limit_hit or deadline.cancelled_caught:
                _kill_group(process.pid)
            with anyio.CancelScope(shield=True):
                await process.wait()
                await process.aclose()
        timed_out = deadline.cancelled_caught
        killed = timed_out or output_limit_hit
        return ProcessResult(
            argv=argv,
            returncode=None if killed else process.returncode,
            output=collector.text(),
            output_truncated=collector.truncated,
            timed_out=timed_out,
            output_limit_hit=output_limit_hit,
            wall_s=round(time.monotonic() - started, 4),
        )
