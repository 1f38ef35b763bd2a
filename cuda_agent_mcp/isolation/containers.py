"""Container primitives: hardened containers from the sandbox image, started, inspected and removed.

    image from sandbox/Dockerfile, network_mode=none, read-only root, tmpfs /tmp (size-limited),
    pids_limit, memory and CPU limits, cap_drop=ALL, no-new-privileges, a non-root user,
    the working directory bound read-write, the paths the caller declares bound read-only,
    exactly the assigned GPU (none for compiles): a device request to NVIDIA's container toolkit, or
    without it that GPU's device nodes and the driver's libraries (`isolation/gpu_access.py`)

Paths keep their host names inside the container, so command lines, diagnostics and cache keys are the
same on every backend. Nothing else of the host is visible: not the evaluator's sources, not other
workspaces, not the build cache's write side. The Docker executor (`executors/docker.py`) and the judge's
worker containers (`judge/container_worker.py`) are built from these. The Docker SDK is synchronous and
optional (the `docker` extra): it is imported where it is used.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.isolation.gpu_access import (
    DeviceAccess,
    GpuAccessUnavailable,
    GpuPath,
    device_access,
    requested_path,
)
from cuda_agent_mcp.isolation.uids import chown_tree

DEFAULT_IMAGE = "cuda-agent-sandbox:latest"
IMAGE_ENV = "CUDA_AGENT_DOCKER_IMAGE"
# The unprivileged user of sandbox/Dockerfile; used when this process runs as root.
SANDBOX_UID = 10001
_LABEL = "cuda-agent-mcp.executor"


class DockerSettings(BaseModel):
    """How every container is started. Defaults suit a build or a short script on a shared machine."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: str = Field(
        default=DEFAULT_IMAGE, description="built from sandbox/Dockerfile (see sandbox/README.md)"
    )
    memory_bytes: int = Field(default=8 * 1024**3, gt=0, description="memory limit (swap included)")
    pids_limit: int = Field(
        default=256, gt=8, description="processes and threads at once: a fork bomb stops here"
    )
    cpus: float = Field(default=2.0, gt=0)
    tmp_bytes: int = Field(
        default=1024**3, gt=0, description="size of the tmpfs at /tmp, the only scratch space"
    )
    max_file_bytes: int = Field(default=2 * 1024**3, gt=0, description="largest file a command may write")
    max_open_files: int = Field(default=4096, gt=16)
    gpu: str | None = Field(
        default=None, description="the one GPU (index or UUID) a command sees; None: no GPU"
    )
    gpu_devices: DeviceAccess | None = Field(
        default=None,
        description="the toolkit-free path: these nodes and driver libraries; None: a device request",
    )

    @property
    def gpu_path(self) -> GpuPath | None:
        if self.gpu is None:
            return None
        return "devices" if self.gpu_devices is not None else "toolkit"

    @classmethod
    def from_env(cls) -> DockerSettings:
        return cls(image=os.environ.get(IMAGE_ENV, DEFAULT_IMAGE))


def bind_mounts(
    workdir: Path, readable: Sequence[Path], writable: Sequence[Path] = ()
) -> dict[str, dict[str, str]]:
    """docker-py `volumes`: the working directory and `writable` read-write, the rest read-only, each at
    its host path.

    A path inside another one is left to the outer bind; a symlinked path is bound at its own name and at
    its target's, so both spellings a toolchain may use resolve. A system folder (`/`, `/usr`) is never
    bound whole (`python_parts`)."""
    volumes = {str(path): {"bind": str(path), "mode": "rw"} for path in (workdir, *writable)}
    wanted: set[Path] = set()
    for path in readable:
        for part in python_parts(path) if _is_system_folder(path) else [path]:
            if part.exists():
                wanted.update({Path(os.path.abspath(part)), part.resolve()})
    for path in sorted(wanted, key=lambda p: len(p.parts)):
        inside_another = any(path != other and path.is_relative_to(other) for other in wanted)
        if inside_another or str(path) in volumes:
            continue
        volumes[str(path)] = {"bind": str(path), "mode": "ro"}
    return volumes


_SYSTEM_FOLDERS = (Path("/"), Path("/usr"))


def _is_system_folder(path: Path) -> bool:
    return Path(os.path.abspath(path)) in _SYSTEM_FOLDERS or path.resolve() in _SYSTEM_FOLDERS


def python_parts(folder: Path) -> list[Path]:
    """What of a system folder a container needs when this Python lives in it (a system Python: its
    `sys.base_prefix` is /usr): Python's own library folders and its executable, not the folder. The
    image has its own /usr (the same system: sandbox/build-image.sh), and the host's over it would hide
    what the engine adds there, such as the init of `--init` (/sbin/docker-init, in /usr/sbin where /sbin
    is a link): measured on the H200, where every worker container then failed to start."""
    folder = Path(os.path.abspath(folder))
    entries = [Path(entry) for entry in sys.path if entry and os.path.isabs(entry)]
    executable = Path(os.path.realpath(sys.executable))
    return [p for p in [*entries, executable] if p.is_relative_to(folder) and p != folder]


def container_options(
    settings: DockerSettings,
    argv: Sequence[str],
    *,
    workdir: Path,
    readable: Sequence[Path],
    env: Mapping[str, str],
    user: str,
    writable: Sequence[Path] = (),
) -> dict[str, Any]:
    """Everything `containers.create` is given; a pure function so the hardening is testable."""
    import docker.types

    options: dict[str, Any] = {
        "image": settings.image,
        "command": list(argv),
        "working_dir": str(workdir),
        "environment": dict(env),
        "user": user,
        "volumes": bind_mounts(workdir, readable, writable),
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={settings.tmp_bytes},mode=1777"},
        "pids_limit": settings.pids_limit,
        "mem_limit": settings.memory_bytes,
        "memswap_limit": settings.memory_bytes,
        "nano_cpus": int(settings.cpus * 1e9),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ulimits": [
            docker.types.Ulimit(name="fsize", soft=settings.max_file_bytes, hard=settings.max_file_bytes),
            docker.types.Ulimit(name="nofile", soft=settings.max_open_files, hard=settings.max_open_files),
            docker.types.Ulimit(name="core", soft=0, hard=0),
        ],
        # The daemon keeps at most this much of the output on disk, whatever the command prints.
        "log_config": docker.types.LogConfig(type="json-file", config={"max-size": "16m", "max-file": "1"}),
        "labels": {_LABEL: "1"},
        "detach": True,
    }
    if settings.gpu_devices is not None and settings.gpu is not None:
        access = settings.gpu_devices
        options["devices"] = [f"{node}:{node}:rwm" for node in access.nodes]
        options["mounts"] = [
            docker.types.Mount(target=str(lib.path), source=str(lib.source), type="bind", read_only=True)
            for lib in access.libraries
        ]
        # The image's loader cache does not know the bound libraries; their folders come first.
        folders = [*access.library_folders, *filter(None, env.get("LD_LIBRARY_PATH", "").split(":"))]
        options["environment"]["LD_LIBRARY_PATH"] = ":".join(dict.fromkeys(folders))
    elif settings.gpu is not None:
        options["device_requests"] = [
            docker.types.DeviceRequest(device_ids=[settings.gpu], capabilities=[["gpu"]])
        ]
    return options


_toolkit_answers: dict[str, bool] = {}


def with_gpu_path(client: Any, settings: DockerSettings) -> DockerSettings:
    """`settings` with the way to its GPU chosen (`isolation/gpu_access.py`): the toolkit where asked for
    or, by default, where this engine answers a device request; else the device nodes and driver
    libraries. ExecutorUnavailable says why neither can be used."""
    if settings.gpu is None:
        return settings
    try:
        wanted = requested_path()
        if wanted == "toolkit" or (wanted == "auto" and engine_has_toolkit(client, settings.image)):
            return settings.model_copy(update={"gpu_devices": None})
        return settings.model_copy(update={"gpu_devices": device_access(settings.gpu)})
    except GpuAccessUnavailable as exc:
        raise ExecutorUnavailable("docker", f"no way to give a container GPU {settings.gpu}: {exc}") from None


def check_gpu_reachable(client: Any, settings: DockerSettings) -> None:
    """Before a judge starts: ExecutorUnavailable unless a container can be given `settings.gpu`. Cheap
    where the toolkit-free path works (no container is started to ask the engine)."""
    if settings.gpu is None or requested_path() == "toolkit":
        return
    try:
        device_access(settings.gpu)
    except GpuAccessUnavailable:
        with_gpu_path(client, settings)  # only the engine's toolkit is left: raises without it


def engine_has_toolkit(client: Any, image: str) -> bool:
    """Whether the engine can honour a GPU device request (NVIDIA's container toolkit, as a runtime hook
    or CDI): asked once per engine by starting a throwaway container with one, since an engine without
    the toolkit accepts the request at create and refuses it only at start."""
    import docker

    key = str(getattr(getattr(client, "api", None), "base_url", id(client)))
    if key not in _toolkit_answers:
        container = None
        try:
            container = client.containers.create(
                image,
                ["true"],
                network_mode="none",
                labels={_LABEL: "1"},
                device_requests=[docker.types.DeviceRequest(count=1, capabilities=[["gpu"]])],
            )
            container.start()
            _toolkit_answers[key] = True
        except docker.errors.DockerException:
            _toolkit_answers[key] = False
        finally:
            if container is not None:
                remove_container(container)
    return _toolkit_answers[key]


def engine(image: str) -> Any:
    """A Docker client whose engine answers and has `image`; ExecutorUnavailable says what is missing."""
    try:
        import docker
    except ImportError as exc:
        raise ExecutorUnavailable(
            "docker", "the Docker SDK is not installed: pip install 'cuda-agent-mcp[docker]'"
        ) from exc
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except docker.errors.DockerException as exc:
        raise ExecutorUnavailable("docker", f"no Docker engine answers ({exc}); start dockerd") from exc
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound as exc:
        raise ExecutorUnavailable(
            "docker", f"image {image} not found; build it: bash sandbox/build-image.sh"
        ) from exc
    return client


def container_user() -> str:
    """uid:gid commands run as: ours, or the image's unprivileged user when we are root."""
    uid = os.getuid()
    return f"{uid}:{os.getgid()}" if uid != 0 else f"{SANDBOX_UID}:{SANDBOX_UID}"


def lent_uid() -> int | None:
    """Whom directories a container writes must be handed to: None when it runs as us."""
    return SANDBOX_UID if os.getuid() == 0 else None


def start_container(client: Any, options: dict[str, Any], argv0: str) -> Any:
    import docker

    try:
        container = client.containers.create(**options)
    except docker.errors.DockerException as exc:
        raise ExecutorUnavailable(argv0, f"the container could not be created: {exc}") from exc
    try:
        container.start()
    except docker.errors.DockerException as exc:
        remove_container(container)
        raise ExecutorUnavailable(argv0, f"the container could not start: {exc}") from exc
    return container


def container_state(container: Any) -> dict[str, Any]:
    with contextlib.suppress(Exception):
        container.reload()
        return dict(container.attrs.get("State", {}))
    return {}


def kill_container(container: Any) -> None:
    with contextlib.suppress(Exception):
        container.kill()


def remove_container(container: Any) -> None:
    """Kill and remove; never raises (the container may be gone already)."""
    with contextlib.suppress(Exception):
        container.remove(force=True)


_lending = threading.Lock()
_lent: Counter[Path] = Counter()  # directory -> runs using it now (a build compiles units in parallel)


@contextlib.contextmanager
def lent_to(directory: Path, uid: int | None) -> Iterator[None]:
    """Make `directory` writable by the container's user while runs use it (only needed when this
    process is root: the container never runs as root), then give everything in it back to us."""
    if uid is None:
        yield
        return
    key = directory.resolve()
    with _lending:
        if _lent[key] == 0:
            chown_tree(directory, uid, uid)
        _lent[key] += 1
    try:
        yield
    finally:
        with _lending:
            _lent[key] -= 1
            if _lent[key] == 0:
                del _lent[key]
                chown_tree(directory, os.getuid(), os.getgid())
