"""Long tool calls as jobs: finish inside a budget, or hand back a handle that `wait_job` completes.

Many MCP hosts cut a tool call at about 60 s. `compile`, `verify`, `profile` and `evaluate` run as jobs
on one background event loop (a blocking portal, so a job does not belong to the request that started
it). The tool waits up to the budget (default 50 s) and returns the result; past it, it returns a job
handle, and the work goes on. `wait_job` waits a bounded time for it; `cancel_job` stops it (the judge
doing it is killed). A client cancelling the original call cancels the job too (the client asked for the
work to stop); a handed-off job is only stopped by `cancel_job`. Results are journaled by the tool layer
either way, so nothing finished is lost.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import anyio
from anyio.from_thread import BlockingPortal
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.build import BuildProgress
from cuda_agent_mcp.errors import CudaAgentError, UnknownJob, UsageError
from cuda_agent_mcp.results import BuildResult, EvalResult, ProfileResult, VerifyResult

R = TypeVar("R", bound=BaseModel)
JobKind = Literal["compile", "verify", "profile", "evaluate"]
Progress = Callable[[BuildProgress], None]


class JobHandle(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: str
    kind: JobKind
    message: str


class Outcome(BaseModel, Generic[R]):
    """A tool's answer: the result (status done), or a handle to wait on (status running)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["done", "running"]
    result: R | None = None
    job: JobHandle | None = None


class JobState(BaseModel):
    """Where a job stands; `result` is set once it is done."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: str
    kind: JobKind
    session_id: str
    status: Literal["running", "done", "failed", "cancelled"]
    elapsed_s: float
    progress: str = Field(default="", description="the last progress message")
    result: BuildResult | VerifyResult | ProfileResult | EvalResult | None = None
    error: str | None = Field(default=None, description="why a failed job failed")
    error_kind: Literal["tool", "internal"] | None = Field(
        default=None, description="tool: the tool refused or failed as it says; internal: a crash of ours"
    )


@dataclass
class _Job:
    id: str
    kind: JobKind
    session_id: str
    client: str
    started: float = field(default_factory=time.monotonic)
    progress: list[str] = field(default_factory=list)
    future: concurrent.futures.Future[BaseModel] = field(default_factory=concurrent.futures.Future)
    finished: float | None = None
    # Handed back as a handle: it outlived its call, and counts against the client's limit.
    detached: bool = False
    # Set when the work has really ended (a cancelled future is marked at once; its cleanup runs after).
    ended: threading.Event = field(default_factory=threading.Event)


class JobBoard:
    """Every job of a server, run on one background event loop (started on first use)."""

    def __init__(
        self, *, budget_s: float = 50.0, max_running_per_client: int = 8, keep_done: int = 256
    ) -> None:
        self.budget_s = budget_s
        self.max_running_per_client = max_running_per_client
        self.keep_done = keep_done
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()
        self._portal: BlockingPortal | None = None

    def start(
        self, kind: JobKind, session_id: str, client: str, work: Callable[[Progress], Awaitable[R]]
    ) -> str:
        """Start `work` in the background; its id. A client may have only so many jobs running that
        outlived their calls (calls still waiting are bounded by the client's own open requests)."""
        with self._lock:
            running = sum(
                1 for j in self._jobs.values() if j.client == client and j.detached and not j.ended.is_set()
            )
        if running >= self.max_running_per_client:
            raise UsageError(
                f"a client may have at most {self.max_running_per_client} jobs running in the background: "
                "wait for one (wait_job) or cancel one (cancel_job)"
            )
        job = _Job(uuid.uuid4().hex[:12], kind, session_id, client)

        async def run() -> BaseModel:
            try:
                return await work(lambda event: job.progress.append(f"{event.stage}: {event.message}"))
            finally:
                job.finished = time.monotonic()
                job.ended.set()

        job.future = self._loop().start_task_soon(run)
        with self._lock:
            self._jobs[job.id] = job
            self._forget_old()
        return job.id

    async def wait(
        self,
        job_id: str,
        client: str,
        timeout_s: float,
        on_progress: Callable[[str], Awaitable[None]] | None = None,
    ) -> JobState:
        """Wait up to `timeout_s` for a job, forwarding its progress messages; its state either way.
        It polls (every 10 ms): the jobs' loop must never block on the caller's loop, which may itself be
        waiting on the jobs' loop to start a job (that deadlocked 32 concurrent compiles)."""
        job = self._get(job_id, client)
        deadline = time.monotonic() + timeout_s
        sent = 0
        while True:
            if on_progress is not None:
                while sent < len(job.progress):
                    await on_progress(job.progress[sent])
                    sent += 1
            if job.future.done() or time.monotonic() >= deadline:
                return self.state(job_id, client)
            await anyio.sleep(min(0.01, max(0.0, deadline - time.monotonic())))

    def state(self, job_id: str, client: str) -> JobState:
        job = self._get(job_id, client)
        end = job.finished if job.finished is not None else time.monotonic()
        common: dict[str, Any] = {
            "job_id": job.id,
            "kind": job.kind,
            "session_id": job.session_id,
            "elapsed_s": round(end - job.started, 3),
            "progress": job.progress[-1] if job.progress else "",
        }
        if not job.future.done():
            return JobState(status="running", **common)
        if job.future.cancelled():
            return JobState(status="cancelled", **common)
        error = job.future.exception()
        if error is not None:
            kind: Literal["tool", "internal"] = "tool" if isinstance(error, CudaAgentError) else "internal"
            return JobState(status="failed", error=readable_error(error), error_kind=kind, **common)
        # The board runs the long tools only, whose results are JobState.result's union.
        return JobState(status="done", result=job.future.result(), **common)  # type: ignore[arg-type]

    def detach(self, job_id: str, client: str) -> None:
        """The job's call answered with its handle: from now on it runs in the background."""
        self._get(job_id, client).detached = True

    def result(self, job_id: str, client: str) -> BaseModel:
        """A finished job's result; its exception, re-raised, if it failed."""
        return self._get(job_id, client).future.result(timeout=0)

    def cancel(self, job_id: str, client: str) -> JobState:
        """Stop a running job (its judge is killed); a finished one is left as it is. Blocks until the
        job's cleanup (killing the judge, journaling the cancellation) has run."""
        job = self._get(job_id, client)
        job.future.cancel()
        job.ended.wait(timeout=30)
        return self.state(job_id, client)

    def cancel_session(self, session_id: str) -> int:
        """Stop every running job of a session (it is ending); how many were running."""
        with self._lock:
            running = [j for j in self._jobs.values() if j.session_id == session_id and not j.future.done()]
        for job in running:
            job.future.cancel()
        for job in running:
            job.ended.wait(timeout=30)
        return len(running)

    def session_of(self, job_id: str, client: str) -> str:
        return self._get(job_id, client).session_id

    def _loop(self) -> BlockingPortal:
        """The jobs' event loop, in a daemon thread (a pool thread would keep the process from exiting)."""
        with self._lock:
            if self._portal is None:
                ready = threading.Event()
                portals: list[BlockingPortal] = []

                async def serve() -> None:
                    async with BlockingPortal() as portal:
                        portals.append(portal)
                        ready.set()
                        await portal.sleep_until_stopped()

                threading.Thread(target=anyio.run, args=(serve,), name="cuda-agent-jobs", daemon=True).start()
                ready.wait()
                self._portal = portals[0]
            return self._portal

    def _get(self, job_id: str, client: str) -> _Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or job.client != client:
            raise UnknownJob(f"no job {job_id!r} for this client")
        return job

    def _forget_old(self) -> None:
        done = sorted((j for j in self._jobs.values() if j.ended.is_set()), key=lambda j: j.started)
        for job in done[: max(0, len(done) - self.keep_done)]:
            del self._jobs[job.id]


def readable_error(error: BaseException) -> str:
    """An exception as the one line a tool answers with (ours say what to do; retryable ones say so)."""
    if isinstance(error, CudaAgentError):
        retry = " (temporary: retrying may work)" if getattr(error, "retryable", False) else ""
        return f"{error}{retry}"
    return str(error) or type(error).__name__
