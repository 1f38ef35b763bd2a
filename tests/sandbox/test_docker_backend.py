"""The Docker executor: its container settings, a real build in a container, an agent's `run` in one."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.isolation.containers import (
    DockerSettings,
    container_options,
    container_user,
    engine_has_toolkit,
    remove_container,
    start_container,
)
from cuda_agent_mcp.isolation.gpu_access import DeviceAccess, DriverLibrary
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


def _run_container(
    settings: DockerSettings, argv: list[str], tmp_path, readable=(), init: bool = False
) -> str:
    """Start one container as the executor would, wait for it, return its output."""
    executor = docker_executor()
    options = container_options(
        settings,
        argv,
        workdir=tmp_path,
        readable=list(readable),
        env={"PATH": "/usr/bin:/bin"},
        user=container_user(),
    )
    options["init"] = init
    container = start_container(executor.client(), options, argv[0])
    try:
        status = container.wait(timeout=60)["StatusCode"]
        output = container.logs().decode()
    finally:
        remove_container(container)
    assert status == 0, output
    return output


def test_the_devices_path_gives_a_container_the_nodes_and_the_driver_libraries_read_only(tmp_path) -> None:
    # No GPU here: /dev/zero stands in for a GPU's node, a file for libcuda. The engine is real.
    driver = tmp_path / "driver" / "lib64"
    driver.mkdir(parents=True)
    (driver / "libcuda.so.580.1").write_text("the driver\n")
    for folder in (tmp_path, tmp_path / "driver", driver):
        folder.chmod(0o755)
    (driver / "libcuda.so.580.1").chmod(0o644)
    work = tmp_path / "work"
    work.mkdir()
    library = DriverLibrary(path=driver / "libcuda.so.1", source=driver / "libcuda.so.580.1")
    access = DeviceAccess(nodes=(Path("/dev/zero"),), libraries=(library,))
    output = _run_container(
        DockerSettings(gpu="0", gpu_devices=access),
        [
            "sh",
            "-c",
            f"head -c 3 /dev/zero | wc -c; cat {library.path}; echo $LD_LIBRARY_PATH; "
            f"(echo x > {library.path}) 2>/dev/null && echo WRITABLE || echo read-only; ls {driver}",
        ],
        work,
    )
    lines = output.split()
    assert lines[0] == "3" and "the driver" in output
    assert str(driver) in output.splitlines()[2].split(":")[0]
    assert "read-only" in output and "WRITABLE" not in output
    assert output.strip().endswith("libcuda.so.1")  # the soname alone: nothing else of the host's folder


def test_an_engine_without_nvidias_toolkit_refuses_a_gpu_request_so_auto_takes_the_devices(tmp_path) -> None:
    executor = docker_executor()
    client = executor.client()
    if "nvidia" in (client.info().get("Runtimes") or {}):
        pytest.skip("this engine has NVIDIA's runtime")
    assert engine_has_toolkit(client, executor.settings.image) is False
    assert not client.containers.list(all=True, filters={"label": "cuda-agent-mcp.executor"})  # probe removed


def test_a_container_with_init_starts_when_the_system_python_folder_is_declared_readable(tmp_path) -> None:
    # On the H200 (a system Python: sys.base_prefix is /usr) binding the host's /usr over the image's hid
    # the engine's /sbin/docker-init, and every worker container failed to start.
    work = tmp_path / "work"
    work.mkdir()
    assert "started" in _run_container(
        DockerSettings(), ["sh", "-c", "echo started"], work, readable=[Path("/usr")], init=True
    )
