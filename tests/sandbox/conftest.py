"""Both isolating backends, for tests that must hold on each: the process sandbox and Docker.

Where a backend cannot run here (no bubblewrap, no Docker engine or image) its tests skip, saying why;
with CUDA_AGENT_REQUIRE_SANDBOXES=1 (CI sets it) they fail instead, so CI cannot pass by skipping them.
"""

from __future__ import annotations

import os

import pytest

from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.executors import DockerExecutor, SandboxedExecutor

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


def sandboxed_executor() -> SandboxedExecutor:
    executor = SandboxedExecutor()
    if "filesystem" not in executor.isolation:
        unavailable("bubblewrap cannot make a filesystem view here (apt-get install bubblewrap)")
    return executor


@pytest.fixture(params=["sandbox", "docker"])
def executor(request: pytest.FixtureRequest) -> SandboxedExecutor | DockerExecutor:
    return sandboxed_executor() if request.param == "sandbox" else docker_executor()
