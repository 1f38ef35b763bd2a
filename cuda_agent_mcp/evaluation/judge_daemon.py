"""The judge service: one process per user and cache directory that keeps judge servers warm for every
process of that user (the next CLI call, the MCP server, an RL environment).

    python -m cuda_agent_mcp.evaluation.judge_daemon --socket PATH --log-dir DIR [--idle-s S]

Started by `judge_client.ensure_service` (never by hand: `cuda-agent judges status|stop` report and end
it). It owns a `JudgePool`; each connection carries one request (`service_wire.py`). A job's connection
closed by its client before the report (a CLI interrupted, an MCP call cancelled) kills the judge doing the
job, as cancelling an in-process pool's call does. No torch here: the judges import it.

It ends when asked, when it has been idle (no job, no connection) for its idle timeout, or on SIGTERM;
its judges end with it (they watch for their parent). Nothing in a request runs here: jobs are handed to
judge servers exactly as an in-process pool hands them.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from cuda_agent_mcp.errors import JudgeFailed
from cuda_agent_mcp.evaluation.judge_service import JudgeCall, JudgePool
from cuda_agent_mcp.evaluation.service_wire import (
    REQUEST,
    Acknowledged,
    JobDone,
    JobFailed,
    Prewarm,
    RunJob,
    ServiceStatus,
    StatusQuery,
    StopService,
    code_fingerprint,
    peer_uid,
    read_token,
    same_token,
    token_path,
    write_token,
)
from cuda_agent_mcp.wire.protocol import FrameError, read_frame_body, write_frame

_log = logging.getLogger("cuda_agent_mcp.judge_service")
REQUEST_READ_S = 10.0  # a client sends its one request at once


class JudgeService:
    def __init__(self, socket_path: Path, log_dir: Path, idle_s: float) -> None:
        self.socket_path = socket_path
        self.log_dir = log_dir
        self.idle_s = idle_s
        self.pool = JudgePool(log_dir)
        self.started_at = time.time()
        self.jobs_run = 0
        self._running = 0
        self._connections = 0
        self._last_activity = time.monotonic()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.token = write_token(socket_path)  # before the socket: a client that connects can sign
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        previous = os.umask(0o177)  # the socket is 0600 from its creation on, never briefly wider
        try:
            self.listener.bind(str(socket_path))
        finally:
            os.umask(previous)
        os.chmod(socket_path, 0o600)
        self._inode = os.stat(socket_path).st_ino
        self.listener.listen(64)
        self.listener.settimeout(0.5)

    def serve(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    connection, _ = self.listener.accept()
                except TimeoutError:
                    if self._idle_too_long():
                        _log.info("idle for %.0f s: ending", self.idle_s)
                        break
                    continue
                with self._lock:
                    self._connections += 1
                    self._last_activity = time.monotonic()
                threading.Thread(target=self._handle, args=(connection,), daemon=True).start()
        finally:
            self._unlink_socket()
            self.listener.close()
            self._wait_for_jobs()
            self.pool.close()

    def stop(self) -> None:
        self._stopping.set()

    def _idle_too_long(self) -> bool:
        with self._lock:
            busy = self._running or self._connections
            return not busy and time.monotonic() - self._last_activity > self.idle_s

    def _wait_for_jobs(self) -> None:
        while True:
            with self._lock:
                if not self._running:
                    return
            time.sleep(0.1)

    def _unlink_socket(self) -> None:
        """Remove our socket and token (not a newer service's that took their names after a stop)."""
        with contextlib.suppress(OSError):
            if os.stat(self.socket_path).st_ino == self._inode:
                os.unlink(self.socket_path)
        with contextlib.suppress(OSError):
            if same_token(read_token(self.socket_path), self.token):
                token_path(self.socket_path).unlink()

    def _handle(self, connection: socket.socket) -> None:
        try:
            with connection:
                if peer_uid(connection) != os.getuid():
                    return  # another user's process: no answer at all
                fd = connection.fileno()
                try:
                    request = REQUEST.validate_json(read_frame_body(fd, time.monotonic() + REQUEST_READ_S))
                except (EOFError, TimeoutError, FrameError, ValueError):
                    return
                if not same_token(request.token, self.token):
                    return  # not a caller of ours (it could not read the token): no answer at all
                reply: JobDone | JobFailed | ServiceStatus | Acknowledged
                if isinstance(request, RunJob):
                    reply = self._run(request, connection)
                elif isinstance(request, Prewarm):
                    reply = Acknowledged(started=self.pool.prewarm(request.env))
                elif isinstance(request, StatusQuery):
                    reply = self.status()
                else:
                    assert isinstance(request, StopService)
                    self._unlink_socket()  # a new service may bind its name now
                    self.stop()
                    reply = Acknowledged()
                with contextlib.suppress(OSError):
                    write_frame(fd, reply)
        finally:
            with self._lock:
                self._connections -= 1
                self._last_activity = time.monotonic()

    def _run(self, request: RunJob, connection: socket.socket) -> JobDone | JobFailed:
        call = JudgeCall()
        finished = threading.Event()
        threading.Thread(target=_cancel_on_hangup, args=(connection, call, finished), daemon=True).start()
        with self._lock:
            self._running += 1
        try:
            report, startup_s = self.pool.run_blocking(request.job, request.env, request.timeout_s, call)
            return JobDone(report=report, startup_s=startup_s)
        except JudgeFailed as exc:
            return JobFailed(message=str(exc))
        except Exception as exc:  # the service's own failure: the client reports it as the judge's
            _log.exception("job failed in the service")
            return JobFailed(message=f"the judge service failed: {type(exc).__name__}: {exc}"[:2000])
        finally:
            finished.set()
            with self._lock:
                self._running -= 1
                self.jobs_run += 1

    def status(self) -> ServiceStatus:
        with self._lock:
            running = self._running
        return ServiceStatus(
            pid=os.getpid(),
            uid=os.getuid(),
            code=code_fingerprint(),
            python=sys.executable,
            started_at=self.started_at,
            idle_timeout_s=self.idle_s,
            jobs_run=self.jobs_run,
            jobs_running=running,
            judges_started=self.pool.started,
            judges_retired=self.pool.retired,
            judges_idle=self.pool.idle_count(),
            log_dir=str(self.log_dir),
        )


def _cancel_on_hangup(connection: socket.socket, call: JudgeCall, finished: threading.Event) -> None:
    """The client sends nothing after its request: anything readable is its end of the connection."""
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
    while not finished.is_set():
        try:
            events = poller.poll(200)
        except (OSError, ValueError):
            return
        if events and not finished.is_set():
            call.cancel()
            return


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m cuda_agent_mcp.evaluation.judge_daemon")
    parser.add_argument("--socket", type=Path, required=True)
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--idle-s", type=float, default=600.0)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s judge service: %(message)s", stream=sys.stderr
    )
    args.log_dir.mkdir(parents=True, exist_ok=True)
    service = JudgeService(args.socket, args.log_dir, args.idle_s)
    signal.signal(signal.SIGTERM, lambda *_: service.stop())
    signal.signal(signal.SIGINT, lambda *_: service.stop())
    _log.info("serving on %s (pid %d, code %s)", args.socket, os.getpid(), code_fingerprint())
    service.serve()
    _log.info("ended after %d jobs", service.jobs_run)


if __name__ == "__main__":
    main()
