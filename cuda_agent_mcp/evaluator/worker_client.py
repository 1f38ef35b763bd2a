"""The judge's handle on one worker process: spawn it, send a request, wait for a reply with a deadline.

A worker that does not answer in time, closes its pipe or sends a malformed frame is killed together
with its whole process group; the caller gets a WorkerLost saying which of those happened.

`WorkerPool` keeps workers started ahead of need: each has paid for its interpreter and the torch import
(about 4 s on the H200) but has not touched CUDA or seen any candidate; each still serves exactly one
evaluation and is then killed.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from cuda_agent_mcp.evaluator.protocol import MAX_FRAME_BYTES, FrameError, parse_reply, write_frame
from cuda_agent_mcp.evaluator.refs import SHM_TAG_ENV, remove_shm_files
from cuda_agent_mcp.executors.cgroup import PidsCgroup, pids_cgroup_root
from cuda_agent_mcp.executors.local import child_python_path
from cuda_agent_mcp.executors.sandboxed import available_isolation

LOG_TAIL_BYTES = 4000
# Processes (threads count too, in cgroup v1) one worker tree may hold: torch's thread pools and a
# torch.compile baseline's compile workers fit; a fork bomb stops here.
MAX_WORKER_PIDS = 1024
_HEADER_BYTES = 4


def _no_network() -> list[str]:
    """Run the worker in a fresh network namespace where the kernel allows it: candidate code gets no
    network at all. (CUDA and CUDA IPC with the judge work across it; measured on the H200.) unshare
    execs the worker in place, so its pid, process group and inherited pipes are unchanged."""
    return ["unshare", "--net", "--"] if "network" in available_isolation() else []


def worker_isolation() -> str:
    """What confines a worker here, for the record: process group always, the rest where available."""
    layers = ["process group", "rlimits"]
    if "network" in available_isolation():
        layers.append("network namespace")
    if pids_cgroup_root() is not None:
        layers.append("pids cgroup")
    return ", ".join(layers)


class WorkerLost(Exception):
    """The worker stopped answering. `reason` says how; `log_tail` is the end of its output."""

    def __init__(self, reason: Literal["timeout", "exited", "protocol"], detail: str, log_tail: str) -> None:
        self.reason = reason
        self.detail = detail
        self.log_tail = log_tail
        super().__init__(f"worker {reason}: {detail}")


class WorkerProcess:
    """One untrusted worker, started fresh for one evaluation, in a directory of its own (its working
    directory and log; removed on close) and with its own tag for shared-memory file names."""

    def __init__(self, scratch: Path, env: dict[str, str]) -> None:
        self.tag = uuid.uuid4().hex[:12]
        self.directory = scratch / f"worker-{self.tag}"
        self.directory.mkdir()
        self.log_path = self.directory / "worker.log"
        request_read, self._request_write = os.pipe()
        self._reply_read, reply_write = os.pipe()
        python_path = child_python_path(env.get("PYTHONPATH", ""))
        environment = {
            **env,
            "PYTHONPATH": python_path,
            "PYTHONDONTWRITEBYTECODE": "1",
            SHM_TAG_ENV: self.tag,
        }
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    *_no_network(),
                    sys.executable,
                    "-m",
                    "cuda_agent_mcp.worker",
                    str(request_read),
                    str(reply_write),
                ],
                pass_fds=(request_read, reply_write),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                env=environment,
                start_new_session=True,
            )
        os.close(request_read)
        os.close(reply_write)
        # Everything the worker starts lands in its cgroup (where one can be made), so nothing it starts
        # survives it, setsid and double forks included. It is added before it can run candidate code:
        # the interpreter is still starting and importing torch.
        self.cage = PidsCgroup.create(f"worker-{self.tag}", max_pids=MAX_WORKER_PIDS)
        if self.cage is not None:
            try:
                self.cage.add(self.process.pid)
            except OSError:
                self.cage.remove()
                self.cage = None

    def request(self, message: BaseModel, *, timeout_s: float) -> object:
        """Send one request and return the validated reply, or raise WorkerLost."""
        deadline = time.monotonic() + timeout_s
        try:
            write_frame(self._request_write, message)
            header = self._read(_HEADER_BYTES, deadline)
            length = int.from_bytes(header, "big")
            if length > MAX_FRAME_BYTES:
                raise FrameError(f"frame of {length} bytes")
            return parse_reply(self._read(length, deadline))
        except TimeoutError:
            self.kill()
            raise WorkerLost("timeout", f"no answer within {timeout_s:.1f} s", self.log_tail()) from None
        except (EOFError, BrokenPipeError):
            self.kill()
            code = self.process.poll()
            raise WorkerLost("exited", f"exit status {code}", self.log_tail()) from None
        except FrameError as exc:
            self.kill()
            raise WorkerLost("protocol", str(exc), self.log_tail()) from None

    def _read(self, count: int, deadline: float) -> bytes:
        chunks = bytearray()
        while len(chunks) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._reply_read], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(self._reply_read, count - len(chunks))
            if not chunk:
                raise EOFError("the worker closed its pipe")
            chunks += chunk
        return bytes(chunks)

    def thread_count(self) -> int | None:
        """The worker's OS threads, as the kernel counts them (None once it has exited)."""
        try:
            return len(os.listdir(f"/proc/{self.process.pid}/task"))
        except OSError:
            return None

    def kill(self) -> None:
        """SIGKILL the whole process group (and, with a cgroup, every process the worker started), then
        reap the worker."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.cage is not None:
            self.cage.kill_all()
        self.process.wait()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        for fd in (self._request_write, self._reply_read):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.kill()
        if self.cage is not None:
            self.cage.remove()
        remove_shm_files(self.tag)
        shutil.rmtree(self.directory, ignore_errors=True)

    def log_tail(self) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                size = log.tell()
                log.seek(max(0, size - LOG_TAIL_BYTES))
                return log.read().decode("utf-8", errors="replace")
        except OSError:
            return ""


class WorkerPool:
    """Up to `size` fresh workers kept ready; `take` hands one out (or starts one if none is ready)."""

    def __init__(self, scratch: Path, env: dict[str, str], size: int = 2) -> None:
        self.scratch = scratch
        self.env = env
        self.size = size
        self._ready: deque[WorkerProcess] = deque()

    def fill(self) -> None:
        """Start workers until `size` are ready. Called between evaluations, never while one is timed."""
        while len(self._ready) < self.size:
            self._ready.append(WorkerProcess(self.scratch, self.env))

    def take(self) -> WorkerProcess:
        """A ready worker (or a new one). Replacements start only between jobs (`fill`): an import
        running beside a timed loop put the judge's clock 0.5 ms behind small kernels on the H200."""
        while self._ready:
            worker = self._ready.popleft()
            if worker.alive:
                return worker
            worker.close()
        return WorkerProcess(self.scratch, self.env)

    def close(self) -> None:
        while self._ready:
            self._ready.popleft().close()
