"""The Docker backend: each command in a fresh container that sees only what it must.

    image from sandbox/Dockerfile, network_mode=none, read-only root, tmpfs /tmp (size-limited),
    pids_limit, memory and CPU limits, cap_drop=ALL, no-new-privileges, a non-root user,
    the working directory bound read-write, the paths the caller declares bound read-only,
    a GPU device request for exactly the assigned GPU (none for compiles)

Paths keep their host names inside the container, so command lines, diagnostics and cache keys are the
same on every backend. Nothing else of the host is visible: not the evaluator's sources, not other
workspaces, not the build cache's write side (a link reads the objects it needs through a read-only bind).
The container is removed whatever happens; killing it kills everything it started (its own PID namespace).

The Docker SDK is synchronous; its calls run in worker threads.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.executors.base import ProcessLimits, ProcessResult
from cuda_agent_mcp.executors.local import OutputCollector, scrubbed_env

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

    @classmethod
    def from_env(cls) -> DockerSettings:
        return cls(image=os.environ.get(IMAGE_ENV, DEFAULT_IMAGE))


def bind_mounts(
    workdir: Path, readable: Sequence[Path], writable: Sequence[Path] = ()
) -> dict[str, dict[str, str]]:
    """docker-py `volumes`: the working directory and `writable` read-write, the rest read-only, each at
    its host path.

    A path inside another one is left to the outer bind; a symlinked path is bound at its own name and at
    its target's, so both spellings a toolchain may use resolve."""
    volumes = {str(path): {"bind": str(path), "mode": "rw"} for path in (workdir, *writable)}
    wanted: set[Path] = set()
    for path in readable:
        if path.exists():
            wanted.update({Path(os.path.abspath(path)), path.resolve()})
    for path in sorted(wanted, key=lambda p: len(p.parts)):
        inside_another = any(path != other and path.is_relative_to(other) for other in wanted)
        if inside_another or str(path) in volumes:
            continue
        volumes[str(path)] = {"bind": str(path), "mode": "ro"}
    return volumes


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
    if settings.gpu is not None:
        options["device_requests"] = [
            docker.types.DeviceRequest(device_ids=[settings.gpu], capabilities=[["gpu"]])
        ]
    return options


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
                raise ExecutorUnavailable(
                    "docker", f"no Docker engine answers ({exc}); start dockerd"
                ) from exc
            try:
                client.images.get(self.settings.image)
            except docker.errors.ImageNotFound as exc:
                raise ExecutorUnavailable(
                    "docker", f"image {self.settings.image} not found; build it: bash sandbox/build-image.sh"
                ) from exc
            self._client = client
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
        with _lent_to(cwd, lent_uid()):
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
                _kill(container)
                return

    with anyio.move_on_after(limits.timeout_s) as deadline:
        await anyio.to_thread.run_sync(stream, abandon_on_cancel=True)
        status = (await anyio.to_thread.run_sync(container.wait, abandon_on_cancel=True)).get("StatusCode")
    if deadline.cancelled_caught:
        await anyio.to_thread.run_sync(lambda: _kill(container))
        return True, False, None, False
    state = await anyio.to_thread.run_sync(lambda: container_state(container))
    return False, flooded, status, bool(state.get("OOMKilled"))


def container_state(container: Any) -> dict[str, Any]:
    with contextlib.suppress(Exception):
        container.reload()
        return dict(container.attrs.get("State", {}))
    return {}


def _kill(container: Any) -> None:
    with contextlib.suppress(Exception):
        container.kill()


def remove_container(container: Any) -> None:
    """Kill and remove; never raises (the container may be gone already)."""
    with contextlib.suppress(Exception):
        container.remove(force=True)


_lending = threading.Lock()
_lent: Counter[Path] = Counter()  # directory -> runs using it now (a build compiles units in parallel)


@contextlib.contextmanager
def _lent_to(directory: Path, uid: int | None) -> Iterator[None]:
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


def chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for parent, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            with contextlib.suppress(FileNotFoundError):
                os.chown(os.path.join(parent, name), uid, gid, follow_symlinks=False)
