"""A worker that is not the judge's child (a container's, say), reached over a Unix socket.

The judge listens on `judge.sock` in the worker's directory; the worker (`python -m cuda_agent_mcp.worker
--connect judge.sock`, started in that directory) connects once it is warm. One connection carries both
directions of the protocol, and a worker that dies closes it, so the judge sees EOF as with a forked
worker's pipes. What the worker imports is copied into its load directory (`stage`), because it is
started before the job is known. Subclasses say how the process is started, watched and killed.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from cuda_agent_mcp.executors.local import child_python_path
from cuda_agent_mcp.isolation.identity import compile_cache_env, identity_env
from cuda_agent_mcp.isolation.uids import chown_tree
from cuda_agent_mcp.judge.worker_client import Worker
from cuda_agent_mcp.wire import WORKER_PACKAGE
from cuda_agent_mcp.wire.refs import (
    FAMILY_CHARS,
    HOST_SHM,
    SHM_DIR_ENV,
    SHM_TAG_ENV,
    remove_shm_files,
    shm_tag,
    worker_tag,
)

SOCKET_NAME = "judge.sock"
START_TIMEOUT_S = 120.0  # a process start plus a torch import, on a busy machine
_ENV_KEYS = ("PATH", "LANG", "LC_ALL")


class WorkerStartFailed(RuntimeError):
    """A worker never became ready: the judge's failure (infrastructure), not the candidate's."""


def worker_argv() -> list[str]:
    return [sys.executable, "-m", WORKER_PACKAGE, "--connect", SOCKET_NAME]


class SocketWorker(Worker):
    """The judge's side of one socket-connected worker: its directories, the listening socket, the
    connection once accepted."""

    def __init__(self, scratch: Path, uid: int | None) -> None:
        """`uid`: the worker's user, when it is not ours (its directories are handed to it)."""
        self.tag = worker_tag()
        self.directory = scratch / f"worker-{self.tag}"
        self.load_root = scratch / f"worker-{self.tag}-load"
        self.log_path = self.directory / "worker.log"
        self._uid = uid
        self._connection: socket.socket | None = None
        self._peer_pid: int | None = None
        self.directory.mkdir(mode=0o700)
        self.load_root.mkdir(mode=0o755)
        self._listener = _listen(self.directory / SOCKET_NAME)
        if uid is not None:
            chown_tree(self.directory, uid, uid)  # the worker writes here; we (root) read anyway

    def environment(self, env: Mapping[str, str], shm: Path) -> dict[str, str]:
        """The worker's whole environment: tools, locale, our import path, its shared-memory names, and
        its identity and compile caches in its container's own /tmp (`isolation/identity.py`: the image
        has a passwd entry for its user, but a GPU worker runs as the judge's uid, which may have none)."""
        return {
            **{k: v for k in _ENV_KEYS if (v := env.get(k)) is not None},
            **identity_env(os.getuid() if self._uid is None else self._uid, "/tmp"),
            **compile_cache_env("/tmp/cache"),
            "TMPDIR": "/tmp",
            "PYTHONPATH": child_python_path(env.get("PYTHONPATH", "")),
            "PYTHONDONTWRITEBYTECODE": "1",
            SHM_TAG_ENV: self.tag,
            SHM_DIR_ENV: str(shm),
        }

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Accept the worker's connection (it connects once warm); WorkerStartFailed if it never does."""
        deadline = time.monotonic() + timeout_s
        self._listener.settimeout(0.5)
        try:
            while self._connection is None:
                try:
                    self._connection, _ = self._listener.accept()
                except TimeoutError:
                    if time.monotonic() > deadline:
                        raise WorkerStartFailed(f"no worker connected within {timeout_s:.0f} s") from None
                    if not self.alive:
                        raise WorkerStartFailed(
                            f"the worker exited (status {self.exit_status()}) before it was ready: "
                            f"{self.startup_output()}"
                        ) from None
        except BaseException:
            self.kill()
            raise
        finally:
            self._listener.close()
        self._connection.setblocking(True)
        creds = self._connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        self._peer_pid = int.from_bytes(creds[:4], sys.byteorder) or None  # as our PID namespace sees it
        self._request_write = self._reply_read = self._connection.fileno()

    def stage(self, directory: Path) -> Path:
        """Copy what the worker will import into its load directory; the path it loads from."""
        target = self.load_root / directory.name
        shutil.copytree(directory, target, symlinks=False)
        if self._uid is not None:
            chown_tree(target, self._uid, self._uid)
        return target

    def thread_count(self) -> int | None:
        if self._peer_pid is None:
            return None
        try:
            return len(os.listdir(f"/proc/{self._peer_pid}/task"))
        except OSError:
            return None

    def startup_output(self) -> str:
        """What the worker printed before it could open its log (for a failed start)."""
        return ""

    def _dispose(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._listener.close()
        self.kill()
        remove_shm_files(self.tag)
        shutil.rmtree(self.directory, ignore_errors=True)
        shutil.rmtree(self.load_root, ignore_errors=True)


class PrivateShm:
    """A shared-memory directory for one judge and its socket workers (under /dev/shm, 0700, handed to
    the workers' user), made this process's for as long as it is open: a worker that is not our child may
    run under another uid, or (in a container) have its own /dev/shm. See refs.shm_file_mode."""

    def __init__(self, uid: int | None) -> None:
        family = shm_tag()[:FAMILY_CHARS]
        self.path = Path(tempfile.mkdtemp(prefix=f"cuda-agent-judge-shm-{family}-", dir=HOST_SHM))
        if uid is not None:
            os.chown(self.path, uid, uid)
        self._previous = os.environ.get(SHM_DIR_ENV)
        os.environ[SHM_DIR_ENV] = str(self.path)

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._previous is None:
            os.environ.pop(SHM_DIR_ENV, None)
        else:
            os.environ[SHM_DIR_ENV] = self._previous


def _listen(path: Path) -> socket.socket:
    """A Unix socket listening at `path`, which the worker's user may connect to. Bound through the
    directory's descriptor, so a long scratch path cannot exceed the 107 bytes a socket address holds."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        listener.bind(f"/proc/self/fd/{directory}/{path.name}")
    finally:
        os.close(directory)
    os.chmod(path, 0o666)  # its directory (0700, the worker's user's) is what keeps others out
    listener.listen(1)
    return listener
