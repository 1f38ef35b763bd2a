"""The toolkit-free GPU path's parts, on a made-up driver: which nodes and libraries a container gets,
how the path is chosen, and that a system folder is never bound whole."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.isolation import containers, gpu_access
from cuda_agent_mcp.isolation.containers import DockerSettings, bind_mounts, container_options, with_gpu_path
from cuda_agent_mcp.isolation.gpu_access import (
    DeviceAccess,
    DriverLibrary,
    GpuAccessUnavailable,
    device_access,
    driver_libraries,
    gpu_minor,
)


def _driver(folder: Path) -> Path:
    """A driver's folder as installers leave it: versioned files, soname links, development links, and
    libraries CUDA does not need."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler", "libnvidia-glcore"):
        (folder / f"{name}.so.580.1").write_bytes(b"\x7fELF")
    for soname, target in [
        ("libcuda.so.1", "libcuda.so.580.1"),
        ("libcuda.so", "libcuda.so.1"),
        ("libnvidia-ml.so.1", "libnvidia-ml.so.580.1"),
        ("libnvidia-ptxjitcompiler.so.1", "libnvidia-ptxjitcompiler.so.580.1"),
        ("libnvidia-nvvm.so.4", "libnvidia-nvvm.so.580.1"),  # dangling: skipped
    ]:
        os.symlink(target, folder / soname)
    return folder


def _gpus(info: Path, minors_and_uuids: list[tuple[str, int, str]]) -> Path:
    for pci, minor, uuid in minors_and_uuids:
        (info / pci).mkdir(parents=True)
        (info / pci / "information").write_text(
            f"Model: NVIDIA H200\nDevice Minor: {minor}\nGPU UUID: {uuid}\n"
        )
    return info


def test_each_driver_library_once_from_the_loader_cache_first_then_the_driver_folders(tmp_path) -> None:
    cached = _driver(tmp_path / "cached")
    folder = _driver(tmp_path / "folder")
    cache = [
        f"\tlibcuda.so.1 (libc6,x86-64) => {cached}/libcuda.so.1",
        f"\tlibcuda.so (libc6,x86-64) => {cached}/libcuda.so",
        "\tlibcuda.so.1 (libc6) => /lib32/libcuda.so.1",  # 32-bit: never
        f"\tlibnvidia-glcore.so.580.1 (libc6,x86-64) => {cached}/libnvidia-glcore.so.580.1",
    ]
    found = {lib.path.name: lib for lib in driver_libraries(cache, [folder])}
    assert set(found) == {"libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1"}
    assert found["libcuda.so.1"] == DriverLibrary(
        path=cached / "libcuda.so.1", source=cached / "libcuda.so.580.1"
    )
    assert found["libnvidia-ml.so.1"].path.parent == folder  # not in the cache: from the folder


def test_a_gpu_index_or_uuid_names_its_device_node_by_the_drivers_minor(tmp_path) -> None:
    info = _gpus(tmp_path / "gpus", [("0000:9a:00.0", 5, "GPU-b"), ("0000:1b:00.0", 2, "GPU-a")])
    assert gpu_minor("0", info) == 2  # PCI order, as NVML counts
    assert gpu_minor("1", info) == 5
    assert gpu_minor("GPU-b", info) == 5
    with pytest.raises(GpuAccessUnavailable, match="not one of this machine's 2 GPUs"):
        gpu_minor("2", info)
    with pytest.raises(GpuAccessUnavailable, match="no GPU with UUID"):
        gpu_minor("GPU-zzz", info)
    assert gpu_minor("3", tmp_path / "no-driver-info") == 3


def test_a_container_gets_its_gpus_node_and_the_control_nodes_and_nothing_of_the_others(
    tmp_path, monkeypatch
) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    info = _gpus(tmp_path / "gpus", [("0000:1b:00.0", 0, "GPU-a"), ("0000:9a:00.0", 1, "GPU-b")])
    driver = _driver(tmp_path / "driver")
    monkeypatch.setattr(gpu_access, "_loader_cache", list)
    monkeypatch.setattr(gpu_access, "DRIVER_FOLDERS", (driver,))
    access = device_access("1", dev, info)
    assert access.nodes == (dev / "nvidia1", dev / "nvidiactl", dev / "nvidia-uvm")
    assert access.library_folders == [str(driver)]
    (driver / "libcuda.so.1").unlink()
    with pytest.raises(GpuAccessUnavailable, match=r"libcuda\.so\.1 was found neither"):
        device_access("1", dev, info)
    (dev / "nvidiactl").unlink()
    with pytest.raises(GpuAccessUnavailable, match="no NVIDIA driver is loaded"):
        device_access("1", dev, info)


def test_the_devices_path_binds_nodes_and_libraries_read_only_and_puts_their_folder_first(tmp_path) -> None:
    library = DriverLibrary(
        path=tmp_path / "lib64" / "libcuda.so.1", source=tmp_path / "lib64" / "libcuda.so.580"
    )
    access = DeviceAccess(nodes=(Path("/dev/nvidia1"), Path("/dev/nvidiactl")), libraries=(library,))
    options = container_options(
        DockerSettings(gpu="1", gpu_devices=access),
        ["python3"],
        workdir=tmp_path,
        readable=[],
        env={"LD_LIBRARY_PATH": "/opt/lib"},
        user="1000:1000",
    )
    assert "device_requests" not in options
    assert options["devices"] == ["/dev/nvidia1:/dev/nvidia1:rwm", "/dev/nvidiactl:/dev/nvidiactl:rwm"]
    (mount,) = options["mounts"]
    assert mount["Target"] == str(library.path) and mount["Source"] == str(library.source)
    assert mount["ReadOnly"] is True and mount["Type"] == "bind"
    assert options["environment"]["LD_LIBRARY_PATH"] == f"{tmp_path / 'lib64'}:/opt/lib"
    toolkit = container_options(
        DockerSettings(gpu="1"), ["x"], workdir=tmp_path, readable=[], env={}, user="1:1"
    )
    assert "devices" not in toolkit and toolkit["device_requests"][0]["DeviceIDs"] == ["1"]


class _Engine:
    """An engine whose answer to a GPU device request is scripted."""

    def __init__(self, has_toolkit: bool) -> None:
        self.has_toolkit = has_toolkit
        self.created = 0
        self.api = type("Api", (), {"base_url": f"unix://engine-{id(self)}"})()
        self.containers = self

    def create(self, image: str, command: list[str], **options: object) -> _Engine:
        self.created += 1
        assert options["device_requests"] and options["network_mode"] == "none"
        return self

    def start(self) -> None:
        import docker

        if not self.has_toolkit:
            raise docker.errors.APIError('could not select device driver "" with capabilities: [[gpu]]')

    def remove(self, force: bool) -> None:
        pass


def test_auto_takes_the_toolkit_where_the_engine_honours_a_device_request_else_the_devices(
    monkeypatch, tmp_path
) -> None:
    pytest.importorskip("docker")
    access = DeviceAccess(nodes=(Path("/dev/nvidia0"),), libraries=())
    monkeypatch.setattr(containers, "device_access", lambda gpu: access)
    monkeypatch.delenv("CUDA_AGENT_DOCKER_GPU", raising=False)
    with_toolkit, without = _Engine(True), _Engine(False)
    assert with_gpu_path(with_toolkit, DockerSettings(gpu="0")).gpu_path == "toolkit"
    assert with_gpu_path(without, DockerSettings(gpu="0")).gpu_devices == access
    with_gpu_path(without, DockerSettings(gpu="0"))
    assert without.created == 1  # asked once per engine
    assert with_gpu_path(without, DockerSettings()).gpu_path is None  # no GPU, nothing asked
    monkeypatch.setenv("CUDA_AGENT_DOCKER_GPU", "devices")
    assert with_gpu_path(_Engine(True), DockerSettings(gpu="0")).gpu_path == "devices"
    monkeypatch.setenv("CUDA_AGENT_DOCKER_GPU", "toolkit")
    assert with_gpu_path(_Engine(False), DockerSettings(gpu="0")).gpu_path == "toolkit"
    monkeypatch.setenv("CUDA_AGENT_DOCKER_GPU", "nvidia")
    with pytest.raises(ExecutorUnavailable, match="use auto, toolkit or devices"):
        with_gpu_path(_Engine(False), DockerSettings(gpu="0"))


def test_a_system_python_gets_its_own_folders_bound_never_the_whole_of_usr(tmp_path, monkeypatch) -> None:
    usr = tmp_path / "usr"
    stdlib = usr / "lib" / "python3.12"
    (stdlib / "lib-dynload").mkdir(parents=True)
    (usr / "bin").mkdir()
    (usr / "bin" / "python3.12").touch()
    (usr / "sbin").mkdir()
    monkeypatch.setattr(containers, "_SYSTEM_FOLDERS", (usr,))
    monkeypatch.setattr(sys, "path", ["", str(stdlib), str(stdlib / "lib-dynload"), "/elsewhere"])
    monkeypatch.setattr(sys, "executable", str(usr / "bin" / "python3.12"))
    volumes = bind_mounts(tmp_path / "work", [usr, tmp_path / "venv"])
    assert str(usr) not in volumes
    assert set(volumes) == {str(tmp_path / "work"), str(stdlib), str(usr / "bin" / "python3.12")}
    assert all(v["mode"] == "ro" for k, v in volumes.items() if k != str(tmp_path / "work"))


def test_the_check_before_a_judge_starts_asks_the_engine_only_where_the_devices_path_fails(
    monkeypatch,
) -> None:
    pytest.importorskip("docker")
    monkeypatch.delenv("CUDA_AGENT_DOCKER_GPU", raising=False)
    access = DeviceAccess(nodes=(Path("/dev/nvidia0"),), libraries=())
    monkeypatch.setattr(containers, "device_access", lambda gpu: access)
    untouched = _Engine(False)
    containers.check_gpu_reachable(untouched, DockerSettings(gpu="0"))
    assert untouched.created == 0  # the driver is there: no container started to ask

    def missing(gpu: str) -> DeviceAccess:
        raise GpuAccessUnavailable("/dev/nvidia0 does not exist")

    monkeypatch.setattr(containers, "device_access", missing)
    containers.check_gpu_reachable(_Engine(True), DockerSettings(gpu="0"))  # the toolkit will do
    with pytest.raises(ExecutorUnavailable, match="no way to give a container GPU 0: /dev/nvidia0"):
        containers.check_gpu_reachable(_Engine(False), DockerSettings(gpu="0"))
