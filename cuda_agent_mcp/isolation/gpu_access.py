"""How a container reaches exactly one GPU: through NVIDIA's container toolkit, or without it.

Two paths, chosen per engine (`gpu_path`):
  - `toolkit`: a Docker device request (`--gpus device=N`); the engine's NVIDIA runtime hook adds the
    device nodes and the driver's libraries. Only where NVIDIA's container toolkit is installed.
  - `devices`: no toolkit. The container gets the device nodes the CUDA driver opens, for the one GPU
    (`/dev/nvidia<minor>` of that GPU, `nvidiactl`, `nvidia-uvm`, `nvidia-uvm-tools` where present), and
    the host's driver libraries, each bound read-only at the path the host's loader cache names for it,
    with those folders first on `LD_LIBRARY_PATH` (a container has its own loader cache, which does not
    know them). The libraries are found from the loader's cache (`ldconfig -p`), else in the folders
    drivers are installed in. The other GPUs' nodes are not in the container, so CUDA there sees one GPU.

`$CUDA_AGENT_DOCKER_GPU`: `auto` (default: the toolkit where the engine offers it, found by starting one
throwaway container with a device request), `toolkit` or `devices`. Every worker container's isolation
line names the path used.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

GpuPath = Literal["toolkit", "devices"]
GPU_PATH_ENV = "CUDA_AGENT_DOCKER_GPU"

# The driver libraries CUDA work needs (what the toolkit's `compute` and `utility` capabilities mount):
# the driver API, its PTX and NVVM JIT compilers (and the compiler library newer NVVMs load), NVML, the
# debugger's back end.
DRIVER_LIBRARIES = (
    "libcuda",
    "libcudadebugger",
    "libnvidia-ptxjitcompiler",
    "libnvidia-nvvm",
    "libnvidia-gpucomp",
    "libnvidia-ml",
)
# Where drivers put those libraries when the loader cache does not say (container images, Debian's
# packages, the runfile installer).
DRIVER_FOLDERS = (
    Path("/usr/local/nvidia/lib64"),
    Path("/usr/lib/x86_64-linux-gnu/nvidia/current"),
    Path("/usr/lib/x86_64-linux-gnu"),
    Path("/usr/lib64"),
    Path("/usr/lib"),
)
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
_GPU_INFO = Path("/proc/driver/nvidia/gpus")
_SONAME = re.compile(r"^(lib[\w.+-]+?)\.so\.\d+$")
_CACHE_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)$")


class DriverLibrary(BaseModel):
    """One driver library as a container sees it: `path` (the soname's path on the host, where it is
    bound) holds the contents of `source` (the file the host's soname link resolves to)."""

    model_config = ConfigDict(frozen=True)

    path: Path
    source: Path


class DeviceAccess(BaseModel):
    """What a container needs to use one GPU without the toolkit."""

    model_config = ConfigDict(frozen=True)

    nodes: tuple[Path, ...]
    libraries: tuple[DriverLibrary, ...]

    @property
    def library_folders(self) -> list[str]:
        return list(dict.fromkeys(str(lib.path.parent) for lib in self.libraries))


class GpuAccessUnavailable(RuntimeError):
    """The host lacks what the toolkit-free path binds (a GPU's node, libcuda): the message says what."""


def device_access(gpu: str, dev: Path = Path("/dev"), gpu_info: Path = _GPU_INFO) -> DeviceAccess:
    """The nodes and libraries for `gpu` (an index in PCI bus order, as NVML and nvidia-smi count, or a
    UUID). GpuAccessUnavailable names what is missing."""
    node = dev / f"nvidia{gpu_minor(gpu, gpu_info)}"
    if not node.exists():
        raise GpuAccessUnavailable(f"GPU {gpu}'s device node {node} does not exist")
    controls = [dev / name for name in CONTROL_NODES if (dev / name).exists()]
    if dev / "nvidiactl" not in controls:
        raise GpuAccessUnavailable(f"{dev / 'nvidiactl'} does not exist: no NVIDIA driver is loaded")
    libraries = driver_libraries(_loader_cache(), DRIVER_FOLDERS)
    if not any(lib.path.name.startswith("libcuda.so.") for lib in libraries):
        raise GpuAccessUnavailable(
            "libcuda.so.1 was found neither in the loader's cache nor in "
            + ", ".join(map(str, DRIVER_FOLDERS))
        )
    return DeviceAccess(nodes=(node, *controls), libraries=tuple(libraries))


def gpu_minor(gpu: str, gpu_info: Path = _GPU_INFO) -> int:
    """The device node minor of `gpu`: read from the driver's per-GPU information (directories named by
    PCI address, so sorted they are in NVML's order), else the index itself."""
    entries = []
    if gpu_info.is_dir():
        for folder in sorted(gpu_info.iterdir()):
            fields = _information(folder / "information")
            if "Device Minor" in fields:
                entries.append((fields["Device Minor"], fields.get("GPU UUID", "")))
    if gpu.isdigit():
        index = int(gpu)
        if index < len(entries) and entries[index][0].isdigit():
            return int(entries[index][0])
        if entries:
            raise GpuAccessUnavailable(f"GPU {gpu} is not one of this machine's {len(entries)} GPUs")
        return index
    for minor, uuid in entries:
        if uuid == gpu and minor.isdigit():
            return int(minor)
    raise GpuAccessUnavailable(f"no GPU with UUID {gpu} is known to the driver")


def driver_libraries(cache_lines: Iterable[str], folders: Iterable[Path]) -> list[DriverLibrary]:
    """Each driver library once, by soname: the loader cache's first 64-bit entry (its order is the
    loader's), else the first folder holding it. Links that do not resolve to a file are skipped."""
    found: dict[str, Path] = {}
    for line in cache_lines:
        match = _CACHE_LINE.match(line)
        if match is None or "64" not in match.group(2):
            continue
        name, path = match.group(1), Path(match.group(3))
        if _is_driver_soname(name) and name not in found:
            found[name] = path
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("lib*.so.*")):
            if _is_driver_soname(path.name) and path.name not in found:
                found[path.name] = path
    libraries = []
    for path in found.values():
        source = path.resolve()
        if source.is_file():
            libraries.append(DriverLibrary(path=path, source=source))
    return libraries


def requested_path() -> Literal["auto", "toolkit", "devices"]:
    value = os.environ.get(GPU_PATH_ENV, "auto").strip().lower() or "auto"
    if value not in ("auto", "toolkit", "devices"):
        raise GpuAccessUnavailable(f"{GPU_PATH_ENV}={value!r}: use auto, toolkit or devices")
    return value  # type: ignore[return-value]


def _is_driver_soname(name: str) -> bool:
    match = _SONAME.match(name)
    return match is not None and match.group(1) in DRIVER_LIBRARIES


def _loader_cache() -> list[str]:
    """`ldconfig -p`'s lines; none where no ldconfig runs (the folders are searched then)."""
    for ldconfig in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        try:
            done = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        return done.stdout.splitlines()
    return []


def _information(path: Path) -> dict[str, str]:
    try:
        text = path.read_text()
    except OSError:
        return {}
    return {
        key.strip(): value.strip() for key, _, value in (line.partition(":") for line in text.splitlines())
    }
