"""What every MCP tool call shares: who is calling, errors as readable tool errors, long work as jobs."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, ParamSpec, TypeVar

import anyio
import anyio.to_thread
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from cuda_agent_mcp.build import BuildProgress
from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.server.jobs import JobBoard, JobHandle, JobKind, Outcome, R
from cuda_agent_mcp.server.logs import send_log
from cuda_agent_mcp.server.sessions import LOCAL_CLIENT
from cuda_agent_mcp.server.tasks import TASK_MODE

SessionId = Annotated[str, Field(description="from start_session (list_sessions shows yours)")]
T = TypeVar("T")
P = ParamSpec("P")


def hints(*, read_only: bool = False, destructive: bool = False, idempotent: bool = False) -> ToolAnnotations:
    """Tool annotations: nothing of ours reaches outside the server (closed world)."""
    if read_only:
        return ToolAnnotations(read_only_hint=True, open_world_hint=False)  # idempotent by being read-only
    # Hints left out take the specification's defaults (not read-only, not idempotent): only what
    # differs is sent, since every host reads the tool list into every conversation.
    return ToolAnnotations(
        destructive_hint=destructive, idempotent_hint=idempotent or None, open_world_hint=False
    )


def readable_errors(tool: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Our own errors (bad arguments, unknown session, protected file, a quota, infrastructure) reach the
    model as their message; anything else is a crash the SDK logs and reports without internals."""

    @functools.wraps(tool)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await tool(*args, **kwargs)
        except CudaAgentError as exc:
            retry = " (temporary: retrying may work)" if getattr(exc, "retryable", False) else ""
            raise ToolError(f"{exc}{retry}") from exc

    return wrapper


def current_client() -> str:
    """Who is calling: the client id of the bearer token over HTTP, else the local user (stdio)."""
    token = get_access_token()
    return token.client_id if token is not None else LOCAL_CLIENT


async def run_as_job(
    ctx: Context,
    jobs: JobBoard,
    kind: JobKind,
    session_id: str,
    work: Callable[[Callable[[BuildProgress], None]], Awaitable[R]],
) -> Outcome[R]:
    """Run `work` as a job and wait for it up to the board's budget, forwarding its progress as MCP
    progress and log notifications; past the budget, answer with a handle for `wait_job`. A cancelled
    call cancels its job. A task-mode call (server/tasks.py) answers with the handle at once."""
    client = current_client()
    # Starting a job waits for the jobs' loop to take it: done in a thread, never on this loop.
    job_id = await anyio.to_thread.run_sync(lambda: jobs.start(kind, session_id, client, work))
    if TASK_MODE.get() is not None:
        jobs.detach(job_id, client)
        return Outcome(status="running", job=JobHandle(job_id=job_id, kind=kind, message="running as a task"))
    step = 0

    async def forward(message: str) -> None:
        nonlocal step
        step += 1
        await ctx.report_progress(step, message=message)
        await send_log(ctx, "info", f"cuda-agent.{kind}", message)

    try:
        state = await jobs.wait(job_id, client, jobs.budget_s, forward)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: jobs.cancel(job_id, client))
        raise
    if state.status == "running":
        jobs.detach(job_id, client)
        message = f"still running after {jobs.budget_s:g} s; call wait_job with job_id {job_id}"
        return Outcome(status="running", job=JobHandle(job_id=job_id, kind=kind, message=message))
    return Outcome(status="done", result=jobs.result(job_id, client))  # type: ignore[arg-type]
