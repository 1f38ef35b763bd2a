"""The Docker executor: each command in a fresh hardened container that sees only what it must.

The container and its hardening are `isolation/containers.py` (see there what a container sees). The
container is removed whatever happens; killing it kills everything it started (its own PID namespace).
The Docker SDK is synchronous; its calls run in worker threads.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from cuda_agent_mcp.executors.base import ProcessLimits, ProcessResult
from cuda_agent_mcp.executors.local import OutputCollector, scrubbed_env
from cuda_agent_mcp.isolation.containers import (
    DockerSettings,
    container_options,
    container_state,
    container_user,
    engine,
    kill_container,
    lent_to,
    lent_uid,
    remove_container,
    start_container,
)


class DockerExecutor:
    """Runs each command in a new hardened container (see the module docstring)."""

    name = "docker"

    def __init__(self, settings: DockerSettings | None = None) -> None:
        self.settings = settings or DockerSettings.from_env()
        self._client: Any = None

    @property
    def isolation(self) -> tuple[str, ...]:
        return ("container", "network", "pid", "filesystem", "pids-limit", "memory-limit")

    def client(self) -> Any:
        """The engine, connected on first use; ExecutorUnavailable says what is missing."""
        if self._client is None:
            self._client = engine(self.settings.image)
        return self._client

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        limits: ProcessLimits,
        env: Mapping[str, str] | None = None,
        readable: Sequence[Path] = (),
    ) -> ProcessResult:
        argv = [str(a) for a in argv]
        started = time.monotonic()
        client = await anyio.to_thread.run_sync(self.client)
        options = container_options(
            self.settings,
            argv,
            workdir=cwd,
            readable=readable,
            env=env or scrubbed_env(),
            user=container_user(),
        )
        collector = OutputCollector(limits.keep_output_bytes)
        with lent_to(cwd, lent_uid()):
            container = await anyio.to_thread.run_sync(lambda: start_container(client, options, argv[0]))
            try:
                outcome = await _collect(container, collector, limits)
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(lambda: remove_container(container))
        timed_out, output_limit_hit, status, oom = outcome
        killed = timed_out or output_limit_hit
        if oom:
            collector.feed(f"\n[killed: out of memory (limit {self.settings.memory_bytes} bytes)]\n".encode())
        return ProcessResult(
            argv=argv,
            returncode=None if killed else status,
            output=collector.text(),
            output_truncated=collector.truncated,
            timed_out=timed_out,
            output_limit_hit=output_limit_hit,
            wall_s=round(time.monotonic() - started, 4),
        )


async def _collect(
    container: Any, collector: OutputCollector, limits: ProcessLimits
) -> tuple[bool, bool, int | None, bool]:
    """Stream the output until the command ends, the time runs out or the output limit is hit.
    Returns (timed_out, output_limit_hit, exit status, killed for memory)."""
    flooded = False

    def stream() -> None:
        nonlocal flooded
        # From the daemon's log of the container: everything since its start, ending when it exits.
        for chunk in container.logs(stdout=True, stderr=True, stream=True, follow=True):
            collector.feed(chunk)
            if collector.total > limits.max_output_bytes:
                flooded = True
                kill_container(container)
                return

    with anyio.move_on_after(limits.timeout_s) as deadline:
        await anyio.to_thread.run_sync(stream, abandon_on_cancel=True)
        status = (await anyio.to_thread.run_sync(container.wait, abandon_on_cancel=True)).get("StatusCode")
    if deadline.cancelled_caught:
        await anyio.to_thread.run_sync(lambda: kill_container(container))
        return True, False, None, False
    state = await anyio.to_thread.run_sync(lambda: container_state(container))
    return False, flooded, status, bool(state.get("OOMKilled"))
