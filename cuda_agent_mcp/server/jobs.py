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
from cuda_agent_mcp.server.views import ResultView

R = TypeVar("R", bound=BaseModel)
JobKind = Literal["compile", "verify", "profile", "evaluate"]
Progress = Callable[[BuildProgress], None]
# The steps of each kind of job, in order: a build, then a judge run per mode (stages `verify`, `profile`).
STEPS: dict[JobKind, tuple[str, ...]] = {
    "compile": ("build",),
    "verify": ("build", "verify"),
    "profile": ("build", "profile"),
    "evaluate": ("build", "verify", "profile"),
}


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


class JobProgress(BaseModel):
    """Where a job is: its step (queue, build, verify, profile, retry, done), the share of its steps done
    (a build counts its compiled units; a judge run counts when it ends), and the last message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    phase: str
    percent: int
    message: str = ""


class JobStatus(BaseModel):
    """Where a job stands, without its result (cancel_job; wait_job adds the result)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: str
    kind: JobKind
    session_id: str
    status: Literal["running", "done", "failed", "cancelled"]
    elapsed_s: float
    progress: JobProgress
    error: str | None = Field(default=None, description="why a failed job failed")
    error_kind: Literal["tool", "internal"] | None = Field(
        default=None, description="tool: the tool refused or failed as it says; internal: a crash of ours"
    )


class JobState(JobStatus):
    """Where a job stands; `result` is set once it is done."""

    result: ResultView | None = None


@dataclass
class _Tracker:
    """A job's progress from its events: the step it is in and how far the build got."""

    steps: tuple[str, ...]
    step: int = 0
    build_share: float = 0.0
    phase: str = "queue"
    message: str = ""

    def hear(self, event: BuildProgress) -> None:
        self.message = f"{event.stage}: {event.message}"
        if event.stage in ("verify", "profile") and event.stage in self.steps:
            self.step = max(self.step, self.steps.index(event.stage))
            self.phase = event.stage
        elif event.stage in ("plan", "compile", "link", "done") and self.step == 0:
            self.phase = "build"
            if event.stage == "done":
                self.build_share = 1.0
            elif event.total:
                self.build_share = max(self.build_share, event.done / event.total)
        elif event.stage in ("queue", "retry"):
            self.phase = event.stage

    def progress(self, finished: bool) -> JobProgress:
        if finished:
            return JobProgress(phase="done", percent=100, message=self.message)
        share = self.build_share if self.step == 0 else 0.0
        percent = int(100 * (self.step + share) / len(self.steps))
        return JobProgress(phase=self.phase, percent=min(percent, 99), message=self.message)


@dataclass
class _Job:
    id: str
    kind: JobKind
    session_id: str
    client: str
    started: float = field(default_factory=time.monotonic)
    progress: list[str] = field(default_factory=list)
    tracker: _Tracker = field(default_factory=lambda: _Tracker(("build",)))
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
        job = _Job(uuid.uuid4().hex[:12], kind, session_id, client, tracker=_Tracker(STEPS[kind]))

        def hear(event: BuildProgress) -> None:
            job.tracker.hear(event)
            job.progress.append(f"{event.stage}: {event.message}")

        async def run() -> BaseModel:
            try:
                return await work(hear)
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
        }
        if not job.future.done():
            return JobState(status="running", progress=job.tracker.progress(finished=False), **common)
        if job.future.cancelled():
            return JobState(status="cancelled", progress=job.tracker.progress(finished=False), **common)
        error = job.future.exception()
        if error is not None:
            kind: Literal["tool", "internal"] = "tool" if isinstance(error, CudaAgentError) else "internal"
            return JobState(
                status="failed",
                progress=job.tracker.progress(finished=False),
                error=readable_error(error),
                error_kind=kind,
                **common,
            )
        # The board runs the long tools only, whose views are JobState.result's union.
        return JobState(
            status="done",
            progress=job.tracker.progress(finished=True),
            result=job.future.result(),  # type: ignore[arg-type]
            **common,
        )

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
