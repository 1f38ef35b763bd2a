"""The Docker executor: its container settings, a real build in a container, an agent's `run` in one."""

from __future__ import annotations

import anyio
import pytest

from cuda_agent_mcp.isolation.containers import DockerSettings, container_options
from cuda_agent_mcp.tools.run import RunRequest, run_command
from tests.compile.test_build import actions, build, new_session
from tests.sandbox.conftest import docker_executor


def test_every_container_is_hardened_and_sees_only_what_it_is_given(tmp_path) -> None:
    toolchain = tmp_path / "toolchain"
    (toolchain / "include").mkdir(parents=True)
    options = container_options(
        DockerSettings(gpu="3"),
        ["nvcc", "-c", "k.cu"],
        workdir=tmp_path / "work",
        readable=[toolchain, toolchain / "include", tmp_path / "missing"],
        env={"PATH": "/usr/bin"},
        user="10001:10001",
    )
    assert options["network_mode"] == "none" and options["read_only"] is True
    assert options["cap_drop"] == ["ALL"] and options["security_opt"] == ["no-new-privileges"]
    assert options["user"] == "10001:10001" and options["pids_limit"] == 256
    assert options["mem_limit"] == options["memswap_limit"] == 8 * 1024**3
    # The working directory read-write; the toolchain once (its subdirectory rides along), read-only;
    # a path that does not exist is not bound; nothing else of the host.
    assert options["volumes"] == {
        str(tmp_path / "work"): {"bind": str(tmp_path / "work"), "mode": "rw"},
        str(toolchain): {"bind": str(toolchain), "mode": "ro"},
    }
    (request,) = options["device_requests"]
    assert request["DeviceIDs"] == ["3"] and request["Capabilities"] == [["gpu"]]
    assert "device_requests" not in container_options(
        DockerSettings(), ["g++"], workdir=tmp_path, readable=[], env={}, user="1:1"
    )


@pytest.mark.nvcc
def test_a_build_compiles_and_links_inside_a_container(tmp_path, shared_build_cache) -> None:
    session = new_session("relu", tmp_path / "docker", shared_build_cache, executor=docker_executor())
    kernel = session.workspace.root / "kernels" / "relu.cu"
    kernel.write_text(kernel.read_text() + "\n// built in a container\n")
    result = build(session)
    assert result.ok, result.summary + result.log
    assert actions(result)["kernels/relu.cu"] == "compiled"
    assert result.kernels, "ptxas ran in the container and reported the kernel"


def test_an_agents_run_command_runs_in_a_container_as_a_user_without_privileges(tmp_path) -> None:
    session = new_session("relu", tmp_path / "ws", tmp_path / "cache", executor=docker_executor())
    script = "import os; print('uid', os.getuid()); open('result.txt', 'w').write('written')"
    result = anyio.run(run_command, session, RunRequest(argv=["python3", "-c", script]))
    assert result.process.ok, result.process.output
    assert "uid 0" not in result.process.output
    assert "container" in result.isolation
    assert (session.workspace.root / "result.txt").read_text() == "written"
    # The workspace is given back to this process's user afterwards.
    assert (session.workspace.root / "result.txt").stat().st_uid == (tmp_path).stat().st_uid
