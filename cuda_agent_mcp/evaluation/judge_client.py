"""Which judges a process uses: the user's judge service (`judge_daemon.py`) or a pool of its own.

`CUDA_AGENT_JUDGE_SERVICE` decides (docs/DECISIONS.md, "A judge service per user"):
- `off`: judges of this process's own (`JudgePool`), gone when it exits;
- `auto` (the default): the service when one of this user, this cache directory and this code answers;
  the CLI's evaluation commands also start one on a machine with a GPU (`want_service_started`), so the
  next command finds warm judges. Otherwise a pool of the process's own.
- `on`: the service, started here if none answers.
A service running other code (the package was reinstalled or edited) is stopped and a new one started
when this process would start one, and otherwise not used.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import anyio

from cuda_agent_mcp.errors import ExecutorUnavailable, JudgeFailed
from cuda_agent_mcp.evaluation.job import EvalJob, JudgeReport
from cuda_agent_mcp.evaluation.judge_service import shared_judge_pool
from cuda_agent_mcp.evaluation.service_wire import (
    REPLY,
    Acknowledged,
    JobDone,
    JobFailed,
    Prewarm,
    RunJob,
    ServiceStatus,
    StatusQuery,
    StopService,
    code_fingerprint,
    idle_timeout_s,
    read_token,
    service_mode,
    socket_path,
)
from cuda_agent_mcp.executors.local import child_python_path
from cuda_agent_mcp.wire.protocol import FrameError, encode, read_frame_body

START_WAIT_S = 30.0
QUICK_S = 5.0
_HAS_GPU_DEVICE = Path("/dev/nvidiactl")
_start_wanted = False


class Judges(Protocol):
    """What the tool layer asks of its judges (an in-process `JudgePool` or the service)."""

    @property
    def started(self) -> int:
        """Judge servers started so far (for benchmarks)."""
        ...

    @property
    def retired(self) -> int:
        """Judge servers closed for holding GPU memory or a harness failure."""
        ...

    async def run(
        self, job: EvalJob, env: Mapping[str, str], timeout_s: float
    ) -> tuple[JudgeReport, float]: ...

    def prewarm(self, env: Mapping[str, str]) -> bool: ...

    def close(self) -> None: ...


def want_service_started() -> None:
    """Called by the CLI's evaluation commands: in `auto` mode, start the service where there is a GPU."""
    global _start_wanted
    _start_wanted = True


def judges_for(cache_dir: Path) -> Judges:
    """The judges a new session of this process uses (see the module's docstring)."""
    mode = service_mode()
    if mode == "off":
        return shared_judge_pool(cache_dir / "logs")
    start = mode == "on" or (_start_wanted and _HAS_GPU_DEVICE.exists())
    try:
        path = ensure_service(cache_dir, start=start)
    except ExecutorUnavailable:
        if mode == "on":
            raise
        path = None
    if path is None:
        return shared_judge_pool(cache_dir / "logs")
    return ServiceJudges(path)


def ensure_service(cache_dir: Path, *, start: bool) -> Path | None:
    """The socket of a running service of this code for `cache_dir`; one started here when `start` (and
    an outdated one stopped first). None when there is none and none is to be started."""
    path = socket_path(cache_dir)
    status = query_status(path)
    if status is not None and status.code == code_fingerprint():
        return path
    if not start:
        return None
    with _start_lock(path):
        status = query_status(path)
        if status is not None and status.code == code_fingerprint():
            return path  # another process started it meanwhile
        if status is not None:
            stop_service(path)
        _spawn(path, cache_dir / "logs")
    return path


def query_status(path: Path) -> ServiceStatus | None:
    """The service's status, or None when nothing answers there."""
    try:
        reply = _ask(path, StatusQuery(), QUICK_S)
    except (OSError, EOFError, TimeoutError, FrameError, ValueError):
        return None
    return reply if isinstance(reply, ServiceStatus) else None


def stop_service(path: Path) -> bool:
    """Ask the service to end (its running jobs finish first); True when one was asked."""
    try:
        _ask(path, StopService(), QUICK_S)
    except (OSError, EOFError, TimeoutError, FrameError, ValueError):
        return False
    deadline = time.monotonic() + QUICK_S
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


class ServiceJudges:
    """`JudgePool`'s interface, served by the user's judge service over its socket."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def started(self) -> int:
        status = query_status(self.path)
        return status.judges_started if status else 0

    @property
    def retired(self) -> int:
        status = query_status(self.path)
        return status.judges_retired if status else 0

    async def run(self, job: EvalJob, env: Mapping[str, str], timeout_s: float) -> tuple[JudgeReport, float]:
        """The job's report and the judge start it waited for. Cancelling closes the connection, and the
        service kills the judge doing the job."""
        try:
            token = read_token(self.path)
        except OSError as exc:
            raise JudgeFailed(
                f"the judge service ({self.path}) is gone: its token cannot be read ({exc})"
            ) from None
        connection = _connect(self.path, QUICK_S)
        try:
            return await anyio.to_thread.run_sync(
                self._run_blocking,
                connection,
                RunJob(job=job, env=dict(env), timeout_s=timeout_s, token=token),
                abandon_on_cancel=True,
            )
        finally:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def _run_blocking(self, connection: socket.socket, request: RunJob) -> tuple[JudgeReport, float]:
        # The service's own deadline is the job's; ours adds the time a judge may take to start.
        deadline = time.monotonic() + request.timeout_s + 240.0
        try:
            connection.sendall(encode(request))
            reply = REPLY.validate_json(read_frame_body(connection.fileno(), deadline))
        except (OSError, EOFError, TimeoutError, FrameError, ValueError) as exc:
            raise JudgeFailed(
                f"the judge service ({self.path}) ended or failed during the job ({type(exc).__name__}: "
                f"{exc}); `cuda-agent judges status` shows it, its log is in the cache's logs directory"
            ) from None
        if isinstance(reply, JobFailed):
            raise JudgeFailed(reply.message)
        if not isinstance(reply, JobDone):
            raise JudgeFailed(f"the judge service answered {reply.op} to a job")
        return reply.report, reply.startup_s

    def prewarm(self, env: Mapping[str, str]) -> bool:
        try:
            reply = _ask(self.path, Prewarm(env=dict(env)), QUICK_S)
        except (OSError, EOFError, TimeoutError, FrameError, ValueError):
            return False
        return isinstance(reply, Acknowledged) and reply.started

    def close(self) -> None:
        """Nothing to close: the judges are the service's, kept for the next process."""


def _connect(path: Path, timeout_s: float) -> socket.socket:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(timeout_s)
    try:
        connection.connect(str(path))
    except OSError:
        connection.close()
        raise
    connection.settimeout(None)
    return connection


def _ask(path: Path, request: StatusQuery | StopService | Prewarm, timeout_s: float) -> object:
    """One request signed with the service's token (OSError where it cannot be read) and its reply."""
    signed = request.model_copy(update={"token": read_token(path)})
    with _connect(path, timeout_s) as connection:
        connection.sendall(encode(signed))
        return REPLY.validate_json(read_frame_body(connection.fileno(), time.monotonic() + timeout_s))


@contextlib.contextmanager
def _start_lock(path: Path):  # type: ignore[no-untyped-def]
    """One starter at a time for a socket (two CLI calls at once start one service, not two)."""
    lock = path.with_suffix(".lock")
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _spawn(path: Path, log_dir: Path) -> None:
    """Start the service detached from this process (its own session; no stdout of ours, so a pipe
    reading this command's output is not held open) and wait until it answers."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a socket nobody answers on (the status query failed): a service that died
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / "judge-service.log").open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cuda_agent_mcp.evaluation.judge_daemon",
                "--socket",
                str(path),
                "--log-dir",
                str(log_dir),
                "--idle-s",
                str(idle_timeout_s()),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd="/",
            # This package, wherever it was imported from (not necessarily what is installed).
            env={**os.environ, "PYTHONPATH": child_python_path()},
            start_new_session=True,
        )
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        if query_status(path) is not None:
            return
        if process.poll() is not None:
            break
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    raise ExecutorUnavailable(
        "judge service", f"it did not answer on {path} (its log: {log_dir / 'judge-service.log'})"
    )
