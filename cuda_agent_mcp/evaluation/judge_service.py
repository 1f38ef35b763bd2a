"""Warm judge servers for the tool layer: start them, hand them jobs under a deadline, keep them for reuse.

No torch here (the tool layer never imports it). A `JudgeServer` is one `python -m cuda_agent_mcp.judge`
process in its own session, spoken to over pipes with blocking reads under `select` deadlines, so it works
from any thread and any event loop; `JudgePool` keeps idle servers per GPU selection and is shared by every
session of a process. A server that misses a deadline, dies or talks nonsense is killed (its workers die
with it) and never reused.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path

import anyio

from cuda_agent_mcp.errors import JudgeFailed
from cuda_agent_mcp.evaluation.job import (
    RETIRE_HELD_GPU_BYTES,
    WORKERS_ENV,
    EvalJob,
    JudgeReport,
    ServerReady,
)
from cuda_agent_mcp.isolation.judge_user import JudgeStart, as_server_user, plan_judge_start
from cuda_agent_mcp.isolation.worker_containers import remove_workers_of
from cuda_agent_mcp.wire import JUDGE_MODULE
from cuda_agent_mcp.wire.protocol import FrameError, encode, read_frame_body
from cuda_agent_mcp.wire.refs import SHM_TAG_ENV, remove_judge_shm

_log = logging.getLogger(__name__)

_Key = tuple[tuple[str, str], ...]
LOG_TAIL_BYTES = 3000


class JudgeServer:
    """One judge process serving one job at a time, as the worker uid where it can be (see
    `isolation/judge_user.py`; `isolation` says how it runs)."""

    def __init__(
        self,
        env: Mapping[str, str],
        log_path: Path,
        *,
        start_timeout_s: float = 180.0,
        state_dir: Path | None = None,
    ) -> None:
        self.log_path = log_path
        self.worker_backend = env.get(WORKERS_ENV, "fork")
        # Its shared-memory files are named after this tag (and its workers' after its first characters),
        # so they can be removed when it is killed in the middle of a job.
        self.shm_tag = uuid.uuid4().hex[:12]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", JUDGE_MODULE]
        environment = {**env, SHM_TAG_ENV: self.shm_tag}
        state_dir = state_dir or log_path.parent
        self.start = plan_judge_start(argv, environment, state_dir, workers=self.worker_backend)
        try:
            self._launch(start_timeout_s)
        except JudgeFailed as exc:
            if self.start.uid is None:
                raise
            # Never break evaluation for a layer: start it as ourselves, and say why.
            _log.warning(
                "the judge could not start as uid %s (%s); starting it as the server's user",
                self.start.uid,
                exc,
            )
            self.start.close()
            reason = str(exc).split(";")[0][:200]
            self.start = as_server_user(
                argv, environment, state_dir, f"as the server's user (as uid {self.start.uid}: {reason})"
            )
            self._launch(start_timeout_s)

    @property
    def isolation(self) -> str:
        return self.start.isolation

    def _launch(self, start_timeout_s: float) -> None:
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.start.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=self.start.env,
                # Not the caller's directory: a judge running as the worker uid may not enter it, and its
                # fork server's children chdir to it before anything logs (they died with no message).
                cwd="/",
                start_new_session=True,
            )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._requests = self.process.stdin.fileno()
        self._replies = self.process.stdout.fileno()
        ready = self._read_frame(started + start_timeout_s, "start")
        self.startup_s = round(time.monotonic() - started, 3)
        self.ready = ServerReady.model_validate(json.loads(ready))

    def run(self, job: EvalJob, timeout_s: float) -> JudgeReport:
        """Send one job and wait for its report; JudgeFailed (and the server killed) otherwise."""
        inbox = self.start.inbox()
        try:
            report = self._run(_handed_over(job, inbox, self.start) if inbox else job, timeout_s)
        finally:
            if inbox is not None:
                shutil.rmtree(inbox, ignore_errors=True)
        return report.model_copy(update={"environment": {**report.environment, "judge": self.isolation}})

    def _run(self, job: EvalJob, timeout_s: float) -> JudgeReport:
        deadline = time.monotonic() + timeout_s
        try:
            os.write(self._requests, encode(job))
        except OSError as exc:
            self.kill()
            raise JudgeFailed(f"the judge could not take the job: {exc}{self._log_tail()}") from None
        body = self._read_frame(deadline, f"{job.mode} job", limit_s=timeout_s)
        try:
            return JudgeReport.model_validate_json(body)
        except ValueError as exc:
            self.kill()
            raise JudgeFailed(f"the judge sent an invalid report: {str(exc)[:300]}") from None

    def _read_frame(self, deadline: float, what: str, *, limit_s: float | None = None) -> bytes:
        try:
            return read_frame_body(self._replies, deadline)
        except TimeoutError:
            self.kill()
            limit = f" ({limit_s:.0f} s)" if limit_s is not None else ""
            raise JudgeFailed(f"the {what} took longer than its limit{limit}") from None
        except (EOFError, FrameError):
            self.kill()
            raise JudgeFailed(
                f"the judge exited during the {what} (status {self.process.returncode}){self._log_tail()}"
            ) from None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the server's whole session; its forked workers die with it (parent-death signal), its
        worker containers are removed here."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.start.close()
        remove_judge_shm(self.shm_tag)
        if self.worker_backend == "docker":
            remove_workers_of(self.process.pid)

    def close(self) -> None:
        """Ask an idle server to finish (EOF), then make sure."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        self.start.close()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def _log_tail(self) -> str:
        try:
            text = self.log_path.read_bytes()[-LOG_TAIL_BYTES:].decode("utf-8", errors="replace")
        except OSError:
            return ""
        return f"; its log ends:\n{text}" if text.strip() else ""


def _handed_over(job: EvalJob, inbox: Path, start: JudgeStart) -> EvalJob:
    """The job with its files copied where the judge's uid may read them, and its baselines kept in the
    judge's own directory (the judge writes that file; the caller's cache directory is not its)."""
    reference = inbox / "reference" / Path(job.reference_path).name
    reference.parent.mkdir()
    shutil.copyfile(job.reference_path, reference)
    candidate = inbox / "candidate"
    shutil.copytree(job.candidate_dir, candidate, symlinks=True)
    update: dict[str, object] = {"reference_path": str(reference), "candidate_dir": str(candidate)}
    if job.baseline_cache_path and start.home is not None:
        kept = start.home / "baselines.json"
        if not kept.exists() and Path(job.baseline_cache_path).is_file():
            shutil.copyfile(job.baseline_cache_path, kept)  # what was measured before the judge moved
            start.give(kept)
        update["baseline_cache_path"] = str(kept)
    start.give(inbox)
    return job.model_copy(update=update)


class JudgeCall:
    """One job's link between the caller (who may cancel) and the thread talking to its server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: JudgeServer | None = None
        self._cancelled = False

    def attach(self, server: JudgeServer) -> None:
        with self._lock:
            self._server = server
            cancelled = self._cancelled
        if cancelled:
            server.kill()  # cancelled while the server was starting: the job never begins

    def detach(self) -> bool:
        """False when the call was cancelled (its server must not be reused)."""
        with self._lock:
            self._server = None
            return not self._cancelled

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            server = self._server
        if server is not None:
            server.kill()


class JudgePool:
    """Idle judge servers by environment (the GPU selection is part of it), reused across jobs.

    A server does one job at a time, so concurrent jobs for one key each need their own. The pool keeps
    as many idle as jobs have run at once for the key (at least `max_idle_per_key`, at most
    `max_idle_cap`): with one kept, every second concurrent job paid a 2 s server start (measured:
    `score_batch` at 0.45 evaluations/s on one H200)."""

    def __init__(self, log_dir: Path, *, max_idle_per_key: int = 1, max_idle_cap: int = 4) -> None:
        self.log_dir = log_dir
        self.max_idle_per_key = max_idle_per_key
        self.max_idle_cap = max_idle_cap
        self._busy: Counter[_Key] = Counter()
        self._peak_busy: Counter[_Key] = Counter()
        self._idle: dict[_Key, list[JudgeServer]] = {}
        # Servers being started ahead of need (`prewarm`); the first job for the key claims it.
        self._starting: dict[_Key, Future[JudgeServer]] = {}
        self._lock = threading.Lock()
        self.started = 0
        self.retired = 0  # servers closed because a worker left GPU memory mapped in them

    def prewarm(self, env: Mapping[str, str]) -> bool:
        """Start a server for `env` in the background unless one is idle or starting already (a build
        runs meanwhile, so the next evaluation does not pay the start). True when one was started."""
        key = _key(env)
        with self._lock:
            if self._idle.get(key) or key in self._starting:
                return False
            future: Future[JudgeServer] = Future()
            self._starting[key] = future
        threading.Thread(target=self._start_ahead, args=(key, dict(env), future), daemon=True).start()
        return True

    def _start_ahead(self, key: _Key, env: dict[str, str], future: Future[JudgeServer]) -> None:
        try:
            server = self._new_server(env)
        except BaseException as exc:  # the claimer (if any) sees it; an unclaimed failure is dropped
            future.set_exception(exc)
            with self._lock:
                if self._starting.get(key) is future:
                    del self._starting[key]
            return
        future.set_result(server)
        with self._lock:
            if self._starting.get(key) is future:  # nobody claimed it: keep it idle
                del self._starting[key]
                self._idle.setdefault(key, []).append(server)

    def _new_server(self, env: Mapping[str, str]) -> JudgeServer:
        with self._lock:
            number = self.started
            self.started += 1
        return JudgeServer(
            env, self.log_dir / f"judge-{os.getpid()}-{number}.log", state_dir=self.log_dir.parent
        )

    async def run(self, job: EvalJob, env: Mapping[str, str], timeout_s: float) -> tuple[JudgeReport, float]:
        """The job's report and how long starting a judge took for it (0 when a warm one was idle).
        Cancelling the caller kills the judge doing the job (and its worker): the work stops at once."""
        call = JudgeCall()
        try:
            return await anyio.to_thread.run_sync(
                self.run_blocking, job, dict(env), timeout_s, call, abandon_on_cancel=True
            )
        except anyio.get_cancelled_exc_class():
            call.cancel()
            raise

    def run_blocking(
        self, job: EvalJob, env: dict[str, str], timeout_s: float, call: JudgeCall
    ) -> tuple[JudgeReport, float]:
        """`run` for a thread of the caller's (the judge service's connections): `call.cancel()` from
        another thread kills the judge doing the job."""
        key = _key(env)
        with self._lock:
            idle = self._idle.get(key, [])
            server = idle.pop() if idle else None
            starting = self._starting.pop(key, None) if server is None else None
            self._busy[key] += 1
            self._peak_busy[key] = max(self._peak_busy[key], self._busy[key])
        try:
            return self._serve(key, job, env, timeout_s, call, server, starting)
        finally:
            with self._lock:
                self._busy[key] -= 1

    def _serve(
        self,
        key: _Key,
        job: EvalJob,
        env: dict[str, str],
        timeout_s: float,
        call: JudgeCall,
        server: JudgeServer | None,
        starting: Future[JudgeServer] | None,
    ) -> tuple[JudgeReport, float]:
        startup_s = 0.0
        if starting is not None:
            waited = time.monotonic()
            with contextlib.suppress(Exception):  # a failed start ahead: start one here instead
                server = starting.result()
                startup_s = round(time.monotonic() - waited, 4)  # only the part the job waited for
        if server is None or not server.alive:
            server = self._new_server(env)
            startup_s = server.startup_s
        call.attach(server)
        report = server.run(job, timeout_s)  # kills the server on failure (and on cancellation)
        if not call.detach():
            server.kill()
            raise JudgeFailed("the job was cancelled")
        # A judge that held on to GPU memory, or in which a step of the harness failed, is not reused.
        retire = report.held_gpu_bytes > RETIRE_HELD_GPU_BYTES or report.infra_error is not None
        with self._lock:
            idle = self._idle.setdefault(key, [])
            keep = min(max(self.max_idle_per_key, self._peak_busy[key]), self.max_idle_cap)
            if not retire and len(idle) < keep:
                idle.append(server)
                server = None
        if server is not None:
            server.close()
        if retire:
            self.retired += 1
            _log.warning(
                "retiring a judge server after a %s job (held %.2f GiB of GPU memory; harness failure: %s)",
                job.mode,
                report.held_gpu_bytes / 2**30,
                (report.infra_error or "none")[:200],
            )
            self.prewarm(env)  # its replacement starts now, not when the next job arrives
        return report, startup_s

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(idle) for idle in self._idle.values())

    def close(self) -> None:
        with self._lock:
            servers = [s for idle in self._idle.values() for s in idle]
            self._idle.clear()
            starting = list(self._starting.values())
            self._starting.clear()
        for future in starting:  # claimed by nobody now: wait for it, then close it
            with contextlib.suppress(Exception):
                servers.append(future.result(timeout=200))
        for server in servers:
            server.close()


def _key(env: Mapping[str, str]) -> _Key:
    return tuple(sorted(env.items()))


_shared: JudgePool | None = None


def close_shared_judge_pool() -> None:
    """Stop the shared pool's idle servers now (it starts new ones when next used)."""
    if _shared is not None:
        _shared.close()


def shared_judge_pool(log_dir: Path) -> JudgePool:
    """The process's pool (created on first use; its servers are closed at exit)."""
    global _shared
    if _shared is None:
        _shared = JudgePool(log_dir)
        atexit.register(_shared.close)
    return _shared
