"""The MCP server's own tools, declared like the tool layer's (`tools.Tool`) and registered with them:
sessions (the server's session registry) and jobs (its job board; suite summaries are resources). They
run on a `ServerCall`, which only the server can supply, so no other front-end offers them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.build import ProgressCallback
from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.server.calls import SessionId
from cuda_agent_mcp.server.jobs import JobBoard, JobState, JobStatus
from cuda_agent_mcp.server.sessions import SessionBrief, SessionInfo, SessionList, SessionRegistry, brief
from cuda_agent_mcp.tools import Surface, Tool

JobIdField = Annotated[str, Field(description="from a tool's answer with status running")]


@dataclass(frozen=True)
class ServerCall:
    """What a server tool runs on: the server's sessions and jobs, who is calling, and where a waiting
    call's progress messages go (MCP progress and log notifications)."""

    sessions: SessionRegistry
    jobs: JobBoard
    client: str
    forward: Callable[[str], Awaitable[None]]


class _Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StartSessionRequest(_Request):
    task_id: str | None = Field(default=None, description="a task id from list_tasks")
    reference_source: str | None = Field(
        default=None, description="KernelBench-format source: class Model, get_inputs, get_init_inputs"
    )
    directory: str | None = Field(
        default=None,
        description="an existing workspace directory on the server's machine (local client only)",
    )
    language: KernelLanguage = Field(
        default="cuda",
        description="kernel language of a new workspace: cuda (nvcc, a torch extension), cupy (NVRTC, "
        "launched through CuPy) or triton (@triton.jit); its SKILL.md says how to write it",
    )


class NoArguments(_Request):
    pass


class SessionRequest(_Request):
    session_id: SessionId


class WaitJobRequest(_Request):
    job_id: JobIdField
    timeout_s: float = Field(
        default=45.0,
        ge=0,
        le=600,
        description="seconds to wait at most (keep it under your host's tool timeout)",
    )


class CancelJobRequest(_Request):
    job_id: JobIdField


async def _start(
    call: ServerCall, request: StartSessionRequest, progress: ProgressCallback | None
) -> SessionInfo:
    session = await anyio.to_thread.run_sync(
        lambda: call.sessions.start(
            client=call.client,
            task_id=request.task_id,
            reference_source=request.reference_source,
            directory=request.directory,
            language=request.language,
        )
    )
    return call.sessions.info(session)


async def _list(call: ServerCall, request: NoArguments, progress: ProgressCallback | None) -> SessionList:
    return call.sessions.list(call.client)


class SessionEnded(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    task_id: str
    workspace: str


async def _end(call: ServerCall, request: SessionRequest, progress: ProgressCallback | None) -> SessionEnded:
    session = call.sessions.get(request.session_id, call.client)
    await anyio.to_thread.run_sync(lambda: call.sessions.end(request.session_id, call.client))
    return SessionEnded(session_id=session.id, task_id=session.task.id, workspace=str(session.workspace.root))


async def _status(
    call: ServerCall, request: SessionRequest, progress: ProgressCallback | None
) -> SessionBrief:
    call.sessions.use(request.session_id, call.client)  # counted and kept alive like any session call
    return brief(call.sessions.status(request.session_id, call.client))


async def _wait(call: ServerCall, request: WaitJobRequest, progress: ProgressCallback | None) -> JobState:
    call.sessions.touch(call.jobs.session_of(request.job_id, call.client))
    # The caller's own limit, not the server's per-call budget: it knows its host's tool timeout.
    return await call.jobs.wait(request.job_id, call.client, request.timeout_s, call.forward)


async def _cancel(
    call: ServerCall, request: CancelJobRequest, progress: ProgressCallback | None
) -> JobStatus:
    state = await anyio.to_thread.run_sync(lambda: call.jobs.cancel(request.job_id, call.client))
    return JobStatus.model_validate(state.model_dump(exclude={"result"}))


_MCP: frozenset[Surface] = frozenset({"mcp"})
SERVER_TOOLS: tuple[Tool, ...] = (
    Tool(
        name="start_session",
        title="Start a session",
        description="Open a workspace for one task: give exactly one of task_id, reference_source or directory.",
        request=StartSessionRequest,
        result=SessionInfo,
        run=_start,
        context=ServerCall,
        surfaces=_MCP,
    ),
    Tool(
        name="list_sessions",
        title="List my sessions",
        description="Your open sessions (to find them again after reconnecting), with how long until idle "
        "ones end.",
        request=NoArguments,
        result=SessionList,
        run=_list,
        context=ServerCall,
        read_only=True,
        surfaces=_MCP,
    ),
    Tool(
        name="end_session",
        title="End a session",
        description="Close a session: its running jobs stop and a workspace the server created is deleted "
        "(or archived, if the server keeps an archive); its journal history stays.",
        request=SessionRequest,
        result=SessionEnded,
        run=_end,
        context=ServerCall,
        destructive=True,
        surfaces=_MCP,
    ),
    Tool(
        name="session_status",
        title="Session status",
        description="The session's files, best result so far and latest evaluations (from the journal).",
        request=SessionRequest,
        result=SessionBrief,
        run=_status,
        context=ServerCall,
        read_only=True,
        surfaces=_MCP,
    ),
    Tool(
        name="wait_job",
        title="Wait for a job",
        description="Wait up to timeout_s for a job a tool handed back (status running): its phase and "
        "percent done, and its result once done.",
        request=WaitJobRequest,
        result=JobState,
        run=_wait,
        context=ServerCall,
        read_only=True,
        surfaces=_MCP,
    ),
    Tool(
        name="cancel_job",
        title="Cancel a job",
        description="Stop a running job (its GPU work is killed at once); a finished job is left as it is.",
        request=CancelJobRequest,
        result=JobStatus,
        run=_cancel,
        context=ServerCall,
        idempotent=True,
        surfaces=_MCP,
    ),
)
