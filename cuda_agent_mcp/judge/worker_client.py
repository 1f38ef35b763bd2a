"""The judge's handle on one worker process: fork it, send a request, wait for a reply with a deadline.

Workers are forked from a fork server (multiprocessing's forkserver, preloading torch and the worker's
modules, never CUDA, never a candidate): each evaluation gets a new process in milliseconds instead of
an interpreter start and a torch import (about 4 s on the H200), and no import runs beside a timed
loop. Each worker serves exactly one evaluation and is then killed.

A worker that does not answer in time, closes its pipe or sends a malformed frame is killed together
with its whole process group; the caller gets a WorkerLost saying which of those happened.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import multiprocessing
import os
import shutil
import signal
import threading
import time
import weakref
from multiprocessing import forkserver
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel

from cuda_agent_mcp.executors.local import child_python_path
from cuda_agent_mcp.isolation import landlock
from cuda_agent_mcp.isolation.cgroup import CageUnavailable, PidsCgroup, cage_support
from cuda_agent_mcp.isolation.identity import COMPILE_CACHE_ENVS, compile_cache_env, identity_env
from cuda_agent_mcp.isolation.namespaces import available_isolation
from cuda_agent_mcp.wire import PRELOAD_MODULE, WORKER_MODULE
from cuda_agent_mcp.wire.protocol import (
    ForkSetup,
    FrameError,
    ReleaseRequest,
    Reply,
    parse_reply,
    read_frame_body,
    write_frame,
)
from cuda_agent_mcp.wire.refs import (
    SHM_DIR_ENV,
    SHM_TAG_ENV,
    remove_shm_files,
    remove_worker_shm,
    shm_dir,
    shm_snapshot,
    worker_tag,
)

LOG_TAIL_BYTES = 4000
# Processes (threads count too, in cgroup v1) one worker tree may hold: torch's thread pools and a
# torch.compile baseline's compile workers fit; a fork bomb stops here.
MAX_WORKER_PIDS = 1024
RELEASE_TIMEOUT_S = 2.0  # an honest worker unmaps in milliseconds


def worker_isolation() -> str:
    """What confines a worker here, for the record: process group always, the rest where available."""
    layers = ["process group", "rlimits"]
    if "network" in available_isolation():
        layers.append("network namespace")
    cage = cage_support()
    layers.append(cage.describe())  # "no pids cgroup (why)" where workers run uncaged
    if cage.root is not None and landlock.abi_version() <= 0:
        # The worker runs as the cage's owner: only Landlock keeps it from writing itself out of it.
        layers[-1] += " (leavable: no Landlock keeps the worker from its cgroup files)"
    if landlock.abi_version() > 0:
        layers.append("landlock filesystem view")
    if landlock.abi_version() >= 6:
        layers.append("landlock signal scope")
    return ", ".join(layers)


class WorkerLost(Exception):
    """The worker stopped answering. `reason` says how; `log_tail` is the end of its output."""

    def __init__(self, reason: Literal["timeout", "exited", "protocol"], detail: str, log_tail: str) -> None:
        self.reason = reason
        self.detail = detail
        self.log_tail = log_tail
        super().__init__(f"worker {reason}: {detail}")


class _ForkedProcess:
    """`Popen`'s pid/poll/wait for a worker forked by the fork server (its child, not ours)."""

    def __init__(self, process: BaseProcess) -> None:
        self._process = process
        assert process.pid is not None  # the fork server hands over a started process
        self.pid: int = process.pid

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int | None:
        self._process.join(timeout)
        return self._process.exitcode


class Worker:
    """What the judge holds of one worker, whatever runs it: the protocol's two ends, its log and its
    directory. Subclasses say how it is started, killed and removed (a forked process here, a container
    in `container_worker.py`)."""

    tag: str  # names its shared-memory files
    directory: Path  # its working directory and log; removed on close
    # What the judge must keep alive while the worker maps it (the private copies of the weights).
    keep_alive: object = None
    # Whether candidate code was loaded into it (baselines and the null worker run only trusted code).
    runs_candidate: bool = False
    log_path: Path
    _request_write: int
    _reply_read: int

    def request(self, message: BaseModel, *, timeout_s: float) -> Reply:
        """Send one request and return the validated reply, or raise WorkerLost."""
        deadline = time.monotonic() + timeout_s
        try:
            write_frame(self._request_write, message)
            return parse_reply(read_frame_body(self._reply_read, deadline))
        except TimeoutError:
            self.kill()
            raise WorkerLost("timeout", f"no answer within {timeout_s:.1f} s", self.log_tail()) from None
        except (EOFError, BrokenPipeError, ConnectionResetError):
            self.kill()
            raise WorkerLost("exited", f"exit status {self.exit_status()}", self.log_tail()) from None
        except FrameError as exc:
            self.kill()
            raise WorkerLost("protocol", str(exc), self.log_tail()) from None

    def log_tail(self) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                size = log.tell()
                log.seek(max(0, size - LOG_TAIL_BYTES))
                return log.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        """Kill the worker and remove what it left. A worker still alive is first asked to unmap the
        judge's buffers (see ReleaseRequest.inputs); one that does not answer at once is killed anyway."""
        if self.alive:
            with contextlib.suppress(WorkerLost, OSError, ValueError):
                self.request(ReleaseRequest(inputs=True), timeout_s=RELEASE_TIMEOUT_S)
        self._dispose()

    def stage(self, directory: Path) -> Path:
        """Where the worker finds `directory`'s files to import (a container copies them into its view)."""
        return directory

    @property
    def gpu_pid(self) -> int | None:
        """The worker's pid as the GPU driver sees it (NVML's accounting), where the judge knows it."""
        return None

    @property
    def own_pid(self) -> int | None:
        """The worker's pid as the worker itself sees it (torch names its IPC counter files by it), where
        the judge knows it: not in a container's pid namespace."""
        return None

    def trusted_compile_caches(self) -> dict[str, str]:
        """The judge's persistent compile caches, for a trusted load (the torch.compile baseline) to use
        instead of its own; none by default (a container cannot reach them)."""
        return {}

    def left_running(self) -> list[int]:
        """Processes the worker's code started and left running, where the judge can see them (its pids
        cage); none where it cannot (a container ends with its worker whatever runs in it)."""
        return []

    def gpu_pids(self) -> set[int]:
        """The worker and every process it started, as the GPU driver names them (for the memory watch,
        judge/memory_watch.py); empty where the judge cannot name them or the worker is gone."""
        return set()

    def stop_now(self) -> None:
        """Kill the worker and everything it started without waiting for it: safe from another thread
        (the memory watch's), never touching a process once the worker was reaped."""

    # -- what each kind of worker provides -------------------------------------------------------

    @property
    def alive(self) -> bool:
        raise NotImplementedError

    def exit_status(self) -> int | None:
        raise NotImplementedError

    def thread_count(self) -> int | None:
        """The worker's OS threads, as the kernel counts them (None once it has exited)."""
        raise NotImplementedError

    def kill(self) -> None:
        """Kill the worker and everything it started."""
        raise NotImplementedError

    def _dispose(self) -> None:
        """Kill the worker, close the protocol's ends, remove its files."""
        raise NotImplementedError


class WorkerPool(Protocol):
    """Hands out fresh workers; `isolation` says what confines them, for the record."""

    @property
    def isolation(self) -> str: ...

    def take(self) -> Worker: ...

    def ready(self) -> None:
        """Wait until a worker can be had at once (the judge says it is ready only then)."""
        ...

    def close(self) -> None: ...


def worker_env(env: dict[str, str], directory: Path, tag: str) -> dict[str, str]:
    """A worker's whole environment: the judge's choice, with HOME, TMPDIR and the compile caches in its
    own directory (gone after the evaluation; the only one a candidate may write), its identity set
    (`isolation/identity.py`: a forked worker has the judge's uid), never inherited."""
    return {
        **{k: v for k, v in env.items() if k not in ("HOME", "TMPDIR", *COMPILE_CACHE_ENVS)},
        **identity_env(os.getuid(), directory),
        **compile_cache_env(directory / "cache"),
        "TMPDIR": str(directory),
        "PYTHONPATH": child_python_path(env.get("PYTHONPATH", "")),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        SHM_TAG_ENV: tag,
        SHM_DIR_ENV: str(shm_dir()),
    }


class WorkerProcess(Worker):
    """One untrusted worker, forked fresh for one evaluation from the fork server, in a directory of its
    own (its working directory and log; removed on close) and with its own tag for shared-memory names."""

    def __init__(self, scratch: Path, env: dict[str, str]) -> None:
        self.tag = worker_tag()
        self.directory = scratch / f"worker-{self.tag}"
        self.directory.mkdir()
        self.log_path = self.directory / "worker.log"
        self.log_path.touch()
        request_read, self._request_write = os.pipe()
        self._reply_read, reply_write = os.pipe()
        setup = ForkSetup(
            directory=str(self.directory),
            log_path=str(self.log_path),
            env=worker_env(env, self.directory, self.tag),
            no_network="network" in available_isolation(),
        )
        # The Connection wrappers only carry the two pipe ends to the fork server (as file descriptors).
        ends = (Connection(request_read, writable=False), Connection(reply_write, readable=False))
        forked = _FORK_CONTEXT.Process(target=_forked_worker_main, args=(*ends, setup.model_dump_json()))
        try:
            forked.start()
        finally:
            for end in ends:
                end.close()
        self.process = _ForkedProcess(forked)
        # Held while the worker is signalled or reaped: another thread may stop it (stop_now), and must
        # never signal a pid the kernel has given to someone else since.
        self._reaping = threading.Lock()
        self._reaped = False
        self._shm_before = shm_snapshot()
        _live_workers.add(self)
        # Everything the worker starts lands in its cgroup, so nothing it starts survives it, setsid and
        # double forks included. It is added before it can run candidate code: the worker reads no
        # candidate before the judge's first request, which comes after this. No cage, no worker (unless
        # reduced isolation was asked for, which `worker_isolation` then reports).
        self.cage: PidsCgroup | None = None
        try:
            self.cage = PidsCgroup.required(f"worker-{self.tag}", max_pids=MAX_WORKER_PIDS)
            if self.cage is not None:
                self.cage.add(self.process.pid)
        except (CageUnavailable, OSError) as exc:
            self._dispose()
            if isinstance(exc, CageUnavailable):
                raise
            raise CageUnavailable(f"the worker could not join its pids cgroup: {exc}") from None

    def exit_status(self) -> int | None:
        return self.process.poll()

    @property
    def gpu_pid(self) -> int | None:
        return self.process.pid  # the judge and its forked workers share a pid namespace

    @property
    def own_pid(self) -> int | None:
        return self.process.pid

    def trusted_compile_caches(self) -> dict[str, str]:
        """The judge's caches, but only where Landlock confines candidate workers to their own directory:
        they run as the judge's uid, so without it a candidate could plant compiled code in the cache for a
        later baseline to load (a poisoned timing, or its code run outside any view). Without Landlock a
        baseline compiles in its own directory: slower, never poisoned."""
        if landlock.abi_version() <= 0:
            return {}
        return {k: v for k in COMPILE_CACHE_ENVS if (v := os.environ.get(k))}

    def left_running(self) -> list[int]:
        """Processes in the worker's cage other than the worker itself: what its code started and left
        running (none of the harness's own code starts a process in a worker)."""
        return self.cage.others(self.process.pid) if self.cage is not None else []

    def thread_count(self) -> int | None:
        """The worker's OS threads, as the kernel counts them (None once it has exited)."""
        try:
            return len(os.listdir(f"/proc/{self.process.pid}/task"))
        except OSError:
            return None

    def gpu_pids(self) -> set[int]:
        with self._reaping:
            if self._reaped:
                return set()
            members = set(self.cage.pids()) if self.cage is not None else set()
            return {self.process.pid, *members}

    def stop_now(self) -> None:
        with self._reaping:
            if not self._reaped:
                self._signal_tree(worker_too=True)

    def kill(self) -> None:
        """SIGKILL the whole process group (and, with a cgroup, every process the worker started), then
        reap the worker."""
        with self._reaping:
            self._signal_tree(worker_too=not self._reaped)
            self.process.wait()
            self._reaped = True

    def _signal_tree(self, *, worker_too: bool) -> None:
        """SIGKILL the worker (only while it is unreaped: its pid is its own until then), its process group
        and its cage. The group and the cage are safe to signal after the reaping too: the kernel reuses no
        pid still naming a process group, and a cage names only its members."""
        if worker_too:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)  # also before its setsid made the group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.cage is not None:
            self.cage.kill_all()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def _dispose(self) -> None:
        _live_workers.discard(self)
        for fd in (self._request_write, self._reply_read):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.kill()
        if self.cage is not None:
            self.cage.remove()
        remove_shm_files(self.tag)
        remove_worker_shm(self._shm_before, self.process.pid)
        shutil.rmtree(self.directory, ignore_errors=True)


class ForkedWorkerPool:
    """Hands out fresh workers, forked from the fork server: each is a new process that has never seen
    a candidate; the torch import and interpreter start were paid once, by the fork server. Forking
    takes milliseconds, so nothing is started ahead of need, and no import runs beside a timed loop."""

    def __init__(self, scratch: Path, env: dict[str, str]) -> None:
        self.scratch = scratch
        self.env = env

    @property
    def isolation(self) -> str:
        return worker_isolation()

    def take(self) -> WorkerProcess:
        _season_fork_server()
        return WorkerProcess(self.scratch, self.env)

    def ready(self) -> None:
        """The fork server's preload done (measured on the H200 at 78a0e28: a cold judge's first worker
        waited 5.6 s for it after the judge said it was ready, so a prewarmed judge did not cover it)."""
        _season_fork_server()

    def close(self) -> None:
        """Nothing to stop: forked workers are closed by whoever took them."""


# Workers not closed yet. multiprocessing joins its live children at exit (after this module's exit
# handler, registered later, has run), so a worker left behind by a bug would hang the exit instead.
_live_workers: weakref.WeakSet[WorkerProcess] = weakref.WeakSet()


@atexit.register
def _kill_leftover_workers() -> None:
    for worker in list(_live_workers):
        with contextlib.suppress(Exception):
            worker.kill()


def start_fork_server() -> None:
    """Start the fork server now (it imports torch, about 4 s), so that overlaps the caller's own start.
    Idempotent; the first fork starts it otherwise. It exits when this process does."""
    forkserver.ensure_running()


_seasoned = False


def _season_fork_server() -> None:
    """Fork and reap one process that does nothing before the first worker, so every worker finds the
    fork server's loop in the same state (a worker can read the fork server's frames: variables that
    appear only once it has reaped a child would tell the first worker from later ones, e.g. a verify's
    from the profile after it)."""
    global _seasoned
    if not _seasoned:
        process = _FORK_CONTEXT.Process(target=_nothing)
        process.start()
        process.join()
        _seasoned = True


def _nothing() -> None:
    """The seasoning fork's whole life."""


def _forked_worker_main(request: Connection, reply: Connection, setup_json: str) -> None:
    """Runs in the forked worker. The worker module is looked up here, in the child (the fork server
    preloaded it): the judge process itself never imports worker code."""
    worker = importlib.import_module(WORKER_MODULE)
    worker.run_forked(request.fileno(), reply.fileno(), ForkSetup.model_validate_json(setup_json))


_FORK_CONTEXT = multiprocessing.get_context("forkserver")
_FORK_CONTEXT.set_forkserver_preload([PRELOAD_MODULE])
