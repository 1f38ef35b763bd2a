"""Both isolating backends, for tests that must hold on each: the process sandbox and Docker.

Where a backend cannot run here (no bubblewrap, no Docker engine or image) its tests skip, saying why;
with CUDA_AGENT_REQUIRE_SANDBOXES=1 (CI sets it) they fail instead, so CI cannot pass by skipping them.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.executors import DockerExecutor, SandboxedExecutor
from cuda_agent_mcp.isolation.worker_containers import WORKER_LABEL, JudgeIdentity

REQUIRE_ENV = "CUDA_AGENT_REQUIRE_SANDBOXES"


def unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} (${REQUIRE_ENV}=1)")
    pytest.skip(reason)


def docker_executor() -> DockerExecutor:
    executor = DockerExecutor()
    try:
        executor.client()
    except ExecutorUnavailable as exc:
        unavailable(str(exc))
    return executor


def worker_containers(pool: Any) -> list[str]:
    """Ids of the running worker containers of this process's judge (a `ContainerWorkerPool`'s)."""
    found = pool.client.containers.list(filters={"label": WORKER_LABEL})
    mine = JudgeIdentity.of(os.getpid())
    return [c.id for c in found if JudgeIdentity.parse(c.labels[WORKER_LABEL]) == mine]


def sandboxed_executor() -> SandboxedExecutor:
    executor = SandboxedExecutor()
    if "filesystem" not in executor.isolation:
        unavailable("bubblewrap cannot make a filesystem view here (apt-get install bubblewrap)")
    return executor


@pytest.fixture(params=["sandbox", "docker"])
def executor(request: pytest.FixtureRequest) -> SandboxedExecutor | DockerExecutor:
    return sandboxed_executor() if request.param == "sandbox" else docker_executor()
