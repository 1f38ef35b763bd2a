"""Evaluation workers in containers: the Docker backend's untrusted side of verify and profile.

Each worker is a fresh container from the sandbox image, hardened as every container of the Docker
executor is (`isolation/containers.py`: no network, read-only root, non-root user, pids, memory and CPU
limits, `cap_drop=ALL`, `no-new-privileges`), running `python -m cuda_agent_mcp.worker --connect`.
It sees, each at its host path:
  - its own directory, read-write: working directory, log, the protocol's socket;
  - its load directory, read-only: a private copy of what it is asked to import (candidate or reference);
  - the judge's shared-memory directory, read-write: the CPU tensors both sides map;
  - the Python it runs with and this package's parent, read-only (as the `run` tool's containers do);
and, on a machine with a GPU, exactly the judge's GPU (NVIDIA's toolkit's device request, or without the
toolkit that GPU's device nodes and the driver's libraries: `isolation/gpu_access.py`), running as the
judge's user, where CUDA IPC handles open (`gpu_worker_problem`), in its own PID namespace (CUDA IPC
crosses PID namespaces: measured on the H200) and the host's IPC namespace (torch names its IPC
reference counters in /dev/shm). Not the reference, not other workspaces, not the build cache, not the
host's processes.

The protocol runs over a Unix socket the judge listens on in the worker's directory (`socket_worker.py`):
one connection carries both directions, and a worker that dies is an EOF, as with forked workers' pipes.

A container start plus a torch import costs seconds, so the pool keeps one started ahead: it has paid
the import and has never touched CUDA or seen a candidate. The next one starts when the current one is
closed, never beside a timed loop. Nothing outlives the judge: the worker exits when the judge's end of
the socket closes, and every container carries its judge's label, so a new pool removes those whose
judge is gone (`remove_orphans`). A process the candidate leaves running after a call is its rejection
(`left_running`), as in a forked worker's pids cage.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.isolation.cgroup import members_file_of
from cuda_agent_mcp.isolation.containers import (
    DockerSettings,
    container_options,
    container_state,
    container_user,
    engine,
    lent_uid,
    remove_container,
    start_container,
    with_gpu_path,
)
from cuda_agent_mcp.isolation.worker_containers import (
    WORKER_LABEL,
    gpu_worker_problem,
    judge_gpu,
    judge_label,
    remove_orphans,
    worker_settings,
)
from cuda_agent_mcp.judge.socket_worker import (
    START_TIMEOUT_S,
    PrivateShm,
    SocketWorker,
    WorkerStartFailed,
    worker_argv,
)

_GPU_PATHS = {
    "toolkit": "gpu path: toolkit, NVIDIA's device request",
    "devices": "gpu path: devices, its device nodes and the driver's libraries bound, no toolkit",
}


class ContainerWorker(SocketWorker):
    """One worker container for one evaluation (see the module docstring)."""

    def __init__(
        self,
        client: Any,
        settings: DockerSettings,
        scratch: Path,
        env: Mapping[str, str],
        shm: Path,
        on_close: Callable[[], None] = lambda: None,
    ) -> None:
        # On a GPU the worker runs as the judge's user (CUDA IPC handles open only there: see
        # gpu_worker_problem) in the host's IPC namespace, where torch's reference-counter files are.
        # Without a GPU, as any container does.
        on_gpu = settings.gpu is not None
        super().__init__(scratch, None if on_gpu else lent_uid())
        self._on_close = on_close
        self._container: Any = None
        self._status: int | None = None
        self._harness_pids: set[int] = set()  # its init and the worker, before any candidate ran
        self._members: Path | None = None  # its cgroup's member list, once it is ready
        worker_env = self.environment(env, shm)
        readable = [Path(sys.prefix), Path(sys.base_prefix), self.load_root]
        readable += [Path(p) for p in worker_env["PYTHONPATH"].split(os.pathsep) if p]
        options = container_options(
            settings,
            worker_argv(),
            workdir=self.directory,
            readable=readable,
            writable=[shm],
            env=worker_env,
            user=f"{os.getuid()}:{os.getgid()}" if on_gpu else container_user(),
        )
        options["init"] = True  # an init reaps what the candidate forks; the worker is not PID 1
        options["labels"] = {**options["labels"], WORKER_LABEL: judge_label()}
        if on_gpu:
            options["ipc_mode"] = "host"
        self._container = start_container(client, options, "evaluation worker")

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        super().wait_ready(timeout_s)
        self._harness_pids = set(self._running_pids())
        # The container's own cgroup, read directly by the memory watch (every 20 ms: `docker top` asks
        # the engine to run ps, far too slow for that).
        init_pid = int(container_state(self._container).get("Pid") or 0)
        self._members = members_file_of(init_pid) if init_pid > 0 else None

    def gpu_pids(self) -> set[int]:
        """Every process in the container, by the host's pids (NVML's): from its cgroup as the host reads
        it, else from the engine."""
        if self._members is not None:
            try:
                return {int(pid) for pid in self._members.read_text().split()}
            except OSError:
                pass  # the container is gone, or its cgroup moved: ask the engine
        return set(self._running_pids())

    def stop_now(self) -> None:
        """Kill the container by its id (never a pid that may have been reused); `kill` removes it later."""
        container = self._container
        if container is not None:
            with contextlib.suppress(Exception):
                container.kill()

    def left_running(self) -> list[int]:
        """Processes in the container besides its init and the worker: what candidate code started and
        left running. The engine lists them (`docker top`: the container's cgroup, as the host sees it);
        the container's removal ends them whatever this finds."""
        return [pid for pid in self._running_pids() if pid not in self._harness_pids]

    def _running_pids(self) -> list[int]:
        if self._container is None:
            return []
        try:
            listing = self._container.top(ps_args="-o pid,stat")
            titles = [title.upper() for title in listing["Titles"]]
            pid, state = titles.index("PID"), titles.index("STAT")
            return [int(row[pid]) for row in listing.get("Processes") or [] if not row[state].startswith("Z")]
        except Exception as exc:
            if not container_state(self._container).get("Running", False):
                return []  # gone or stopped: nothing runs in it
            # Fail closed: an unseen leftover could load the machine while later work is timed.
            raise ExecutorUnavailable(
                "docker", f"cannot list a worker container's processes: {exc}"
            ) from None

    @property
    def alive(self) -> bool:
        if self._status is not None or self._container is None:
            return False
        state = container_state(self._container)
        if state.get("Running", False):
            return True
        self._status = state.get("ExitCode")
        return False

    def exit_status(self) -> int | None:
        return None if self.alive else self._status

    def kill(self) -> None:
        """Kill the container: everything in it dies with it (its own PID namespace)."""
        if self._container is not None:
            if self._status is None:
                self._status = container_state(self._container).get("ExitCode")
            remove_container(self._container)
            self._container = None

    def _dispose(self) -> None:
        super()._dispose()
        self._on_close()

    def startup_output(self) -> str:
        with contextlib.suppress(Exception):
            return self._container.logs(tail=20).decode("utf-8", errors="replace")[-2000:]
        return ""


class ContainerWorkerPool:
    """Hands out fresh worker containers, one started ahead (see the module docstring).

    The pool owns a private shared-memory directory, bound into each container: CPU tensors go there
    (a container has its own /dev/shm)."""

    # The containers' processes are not the judge's descendants: the GPU guard cannot tell them from
    # foreign work, so it does not run (judge/gpu_guard.py; results say `unchecked`).
    pids_visible = False

    def __init__(self, scratch: Path, env: Mapping[str, str], settings: DockerSettings | None = None) -> None:
        self.scratch = scratch
        self.env = dict(env)
        base = settings or DockerSettings.from_env()
        self.client = engine(base.image)  # ExecutorUnavailable says what is missing
        settings = worker_settings(base, judge_gpu(env))
        if (problem := gpu_worker_problem(settings.gpu)) is not None:
            raise ExecutorUnavailable("docker", problem)
        self.settings = with_gpu_path(self.client, settings)
        remove_orphans(self.client)
        self.shm = PrivateShm(lent_uid())
        self._lock = threading.Lock()
        self._next: Future[ContainerWorker] | None = None
        self._closed = False
        self._start_ahead()

    @property
    def isolation(self) -> str:
        if self.settings.gpu is None:
            namespaces = "own PID namespace, non-root user"
        else:  # see gpu_worker_problem
            namespaces = (
                f"GPU {self.settings.gpu} only ({_GPU_PATHS[self.settings.gpu_path or 'toolkit']}), "
                "own PID namespace, the judge's user and IPC namespace (CUDA IPC)"
            )
        return (
            f"container (docker): {namespaces}, no network, read-only root, pids limit "
            f"{self.settings.pids_limit}, memory limit, cap_drop ALL, no-new-privileges"
        )

    def ready(self) -> None:
        """Nothing to wait for here: the container started ahead is waited for by the first `take`."""

    def take(self) -> ContainerWorker:
        """A warm worker (waiting for the one started ahead, if it is still starting). One that died while
        it waited is replaced: its death must not be blamed on the candidate that would have come next."""
        problem = ""
        for _ in range(2):
            with self._lock:
                future, self._next = self._next, None
            if future is None:
                future = self._start_ahead(keep=False)
            try:
                worker = future.result()
            except WorkerStartFailed as exc:
                problem = str(exc)
                continue
            if worker.alive:
                return worker
            problem = f"the worker exited while it waited: {worker.startup_output()}"
            worker.close()  # which starts the next one
        raise WorkerStartFailed(f"no worker container stays up: {problem}")

    def _start_ahead(self, keep: bool = True) -> Future[ContainerWorker]:
        future: Future[ContainerWorker] = Future()
        with self._lock:
            if self._closed:
                future.set_exception(WorkerStartFailed("the worker pool is closed"))
                return future
            if keep:
                self._next = future
        threading.Thread(target=self._start, args=(future,), daemon=True).start()
        return future

    def _start(self, future: Future[ContainerWorker]) -> None:
        try:
            worker = ContainerWorker(
                self.client, self.settings, self.scratch, self.env, self.shm.path, on_close=self._replace
            )
            worker.wait_ready()
        except BaseException as exc:
            future.set_exception(exc)
            return
        future.set_result(worker)

    def _replace(self) -> None:
        """A worker was closed: start the next evaluation's now, unless one is waiting already."""
        with self._lock:
            if self._next is not None or self._closed:
                return
        self._start_ahead()

    def close(self) -> None:
        """Remove the container started ahead and the shared-memory directory."""
        with self._lock:
            self._closed = True
            future, self._next = self._next, None
        if future is not None:
            with contextlib.suppress(BaseException):
                future.result(timeout=START_TIMEOUT_S).close()
        self.shm.close()
