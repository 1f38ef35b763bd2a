"""The MCP server: every tool of the tool layer, typed, with progress, logs and readable errors.

Tools take a `session_id` from `start_session`. Errors are raised as exceptions with a message the model
can act on (the SDK turns them into `is_error` results); candidate faults are not errors but verdicts in
the structured result. Long steps report progress and log lines (build steps; queue position on a shared
GPU; the judge's stages), and run as MCP tasks for clients that ask (`server/tasks.py`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, ParamSpec, TypeVar

import anyio
import anyio.abc
from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import AnyHttpUrl, Field

from cuda_agent_mcp.bench import SuiteSummary, run_directory, runs_index, summary_of
from cuda_agent_mcp.build import BuildProgress, default_cache_dir
from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.results import BuildResult, EvalResult, ProfileResult, VerifyResult
from cuda_agent_mcp.server.jobs import JobBoard, JobHandle, JobKind, JobState, Outcome, R
from cuda_agent_mcp.server.logs import LogLevels, send_log
from cuda_agent_mcp.server.resources import add_resources
from cuda_agent_mcp.server.sessions import (
    LOCAL_CLIENT,
    SessionInfo,
    SessionList,
    SessionRegistry,
    SessionStatus,
)
from cuda_agent_mcp.server.tasks import TASK_MODE, TasksExtension, TaskShapes, TaskStore
from cuda_agent_mcp.tools import (
    CompileRequest,
    EvaluateRequest,
    ProfileRequest,
    TaskList,
    TaskQuery,
    VerifyRequest,
    compile_kernels,
    edit_file,
    evaluate_kernels,
    list_files,
    list_tasks,
    profile_kernels,
    read_file,
    search_files,
    verify_kernels,
    write_file,
)
from cuda_agent_mcp.tools.files import FileContent, FileEdited, FileList, FileWritten, SearchResult
from cuda_agent_mcp.tools.run import RunRequest, RunResult, run_command

INSTRUCTIONS = """Write CUDA kernels that replace a PyTorch reference (KernelBench format) and have them
compiled, verified and timed. Start with list_tasks and start_session; edit kernels/*.cu,
kernels/*_binding.cpp and model_new.py (read SKILL.md in the workspace first); then compile, verify,
profile, or evaluate (verify + profile + reward). model.py and the binding harness are protected.
list_sessions finds your sessions again; end_session ends one (idle ones end by themselves)."""

SessionId = Annotated[str, Field(description="from start_session (list_sessions shows yours)")]
WorkspacePath = Annotated[
    str, Field(description="a path inside the session's workspace, e.g. kernels/relu.cu")
]
T = TypeVar("T")
P = ParamSpec("P")


def _hints(
    *, read_only: bool = False, destructive: bool = False, idempotent: bool = False
) -> ToolAnnotations:
    """Tool annotations: nothing of ours reaches outside the server (closed world)."""
    if read_only:
        return ToolAnnotations(read_only_hint=True, open_world_hint=False)
    return ToolAnnotations(
        read_only_hint=False, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=False
    )


READ_ONLY = _hints(read_only=True)


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


def _client() -> str:
    """Who is calling: the client id of the bearer token over HTTP, else the local user (stdio)."""
    token = get_access_token()
    return token.client_id if token is not None else LOCAL_CLIENT


def build_server(
    registry: SessionRegistry,
    *,
    tokens: TokenVerifier | None = None,
    authorization_server: str | None = None,
    url: str | None = None,
    jobs: JobBoard | None = None,
) -> MCPServer:
    """The server. With `tokens` (HTTP) every request needs a bearer token and sessions belong to its
    client. Protected-resource metadata (RFC 9728) is served only when `authorization_server` names a
    real OAuth authorization server; `url` is where this server is reached. `jobs` runs the long tools
    (default: a 50 s budget per call)."""
    jobs = jobs or JobBoard()
    registry.on_end = jobs.cancel_session
    auth = None
    if tokens is not None:
        if authorization_server is not None:
            assert url is not None
            auth = AuthSettings(
                issuer_url=AnyHttpUrl(authorization_server),
                resource_server_url=AnyHttpUrl(f"{url}/mcp"),
                required_scopes=[],
                validate_token_resource=False,
            )
        else:  # static tokens: no authorization server, so no metadata pointing at one
            # The static token table is this server's own (server/auth.py): no token was issued for another
            # resource, so the SDK's RFC 8707 resource check has nothing to add (and unset, it warns twice).
            auth = AuthSettings(
                issuer_url=AnyHttpUrl(url or "http://127.0.0.1"),
                resource_server_url=None,
                required_scopes=[],
                validate_token_resource=False,
            )
    store = TaskStore(jobs, _client)
    server = MCPServer(
        "cuda-agent",
        instructions=INSTRUCTIONS,
        token_verifier=tokens,
        auth=auth,
        extensions=[TasksExtension(store)],
        middleware=[LogLevels(), TaskShapes(store)],
    )

    @server.tool(name="list_tasks", title="List tasks", annotations=READ_ONLY)
    @readable_errors
    async def list_tasks_tool(query: TaskQuery | None = None) -> TaskList:
        """Tasks this server can start sessions on (bundled examples and configured sources)."""
        return await list_tasks(registry.catalog, query)

    @server.tool(title="Start a session", annotations=_hints())
    @readable_errors
    async def start_session(
        task_id: Annotated[str | None, Field(description="a task id from list_tasks")] = None,
        reference_source: Annotated[
            str | None,
            Field(description="KernelBench-format source: class Model, get_inputs, get_init_inputs"),
        ] = None,
        directory: Annotated[
            str | None,
            Field(description="an existing workspace directory on the server's machine (local client only)"),
        ] = None,
    ) -> SessionInfo:
        """Open a workspace for one task: give exactly one of task_id, reference_source or directory."""
        client = _client()
        session = await anyio.to_thread.run_sync(
            lambda: registry.start(
                client=client, task_id=task_id, reference_source=reference_source, directory=directory
            )
        )
        return registry.info(session)

    @server.tool(title="List my sessions", annotations=READ_ONLY)
    @readable_errors
    async def list_sessions() -> SessionList:
        """Your open sessions (to find them again after reconnecting), with how long until idle ones end."""
        return registry.list(_client())

    @server.tool(title="End a session", annotations=_hints(destructive=True))
    @readable_errors
    async def end_session(session_id: SessionId) -> SessionInfo:
        """Close a session: its running jobs stop and a workspace the server created is deleted (or
        archived, if the server keeps an archive); its journal history stays."""
        client = _client()
        info = registry.info(registry.get(session_id, client))
        await anyio.to_thread.run_sync(lambda: registry.end(session_id, client))
        return info

    @server.tool(title="Session status", annotations=READ_ONLY)
    @readable_errors
    async def session_status(session_id: SessionId) -> SessionStatus:
        """The session's files, best result so far and evaluation history (from the journal)."""
        registry.use(session_id, _client())
        return registry.status(session_id, _client())

    @server.tool(name="read_file", title="Read a file", annotations=READ_ONLY)
    @readable_errors
    async def read_file_tool(session_id: SessionId, path: WorkspacePath) -> FileContent:
        """Read a text file of the workspace."""
        return await read_file(registry.use(session_id, _client()), path)

    @server.tool(
        name="write_file", title="Write a file", annotations=_hints(destructive=True, idempotent=True)
    )
    @readable_errors
    async def write_file_tool(session_id: SessionId, path: WorkspacePath, content: str) -> FileWritten:
        """Create or replace a file of the workspace (protected harness files are refused)."""
        return await write_file(registry.use(session_id, _client()), path, content)

    @server.tool(name="edit_file", title="Edit a file", annotations=_hints(destructive=True))
    @readable_errors
    async def edit_file_tool(
        session_id: SessionId,
        path: WorkspacePath,
        old_text: Annotated[
            str, Field(description="exact text to replace; must occur once unless replace_all")
        ],
        new_text: str,
        replace_all: bool = False,
    ) -> FileEdited:
        """Replace exact text in a workspace file."""
        return await edit_file(
            registry.use(session_id, _client()), path, old_text, new_text, replace_all=replace_all
        )

    @server.tool(name="list_files", title="List files", annotations=READ_ONLY)
    @readable_errors
    async def list_files_tool(session_id: SessionId, pattern: str = "**/*") -> FileList:
        """Workspace files matching a glob pattern."""
        return await list_files(registry.use(session_id, _client()), pattern)

    @server.tool(name="search_files", title="Search files", annotations=READ_ONLY)
    @readable_errors
    async def search_files_tool(
        session_id: SessionId,
        regex: str,
        pattern: str = "**/*",
        max_hits: Annotated[int, Field(ge=1, le=1000)] = 200,
    ) -> SearchResult:
        """Lines matching a regular expression in workspace files."""
        return await search_files(registry.use(session_id, _client()), regex, pattern, max_hits=max_hits)

    @server.tool(name="compile", title="Compile kernels", annotations=_hints(idempotent=True))
    @readable_errors
    async def compile_tool(
        session_id: SessionId, ctx: Context, request: CompileRequest | None = None
    ) -> Outcome[BuildResult]:
        """Build the workspace's kernels incrementally; diagnostics name file, line and column."""
        session = registry.use(session_id, _client())
        return await _as_job(
            ctx,
            jobs,
            "compile",
            session_id,
            lambda progress: compile_kernels(session, request, progress=progress),
        )

    @server.tool(name="verify", title="Verify kernels", annotations=_hints())
    @readable_errors
    async def verify_tool(
        session_id: SessionId, ctx: Context, request: VerifyRequest | None = None
    ) -> Outcome[VerifyResult]:
        """Build, then check ModelNew against the reference on fresh secret inputs in a separate process."""
        session = registry.use(session_id, _client())
        return await _as_job(
            ctx,
            jobs,
            "verify",
            session_id,
            lambda progress: verify_kernels(session, request, progress=progress),
        )

    @server.tool(name="profile", title="Profile kernels", annotations=_hints())
    @readable_errors
    async def profile_tool(
        session_id: SessionId, ctx: Context, request: ProfileRequest | None = None
    ) -> Outcome[ProfileResult]:
        """Build, then time ModelNew against PyTorch eager and torch.compile (every timed output rechecked)."""
        session = registry.use(session_id, _client())
        return await _as_job(
            ctx,
            jobs,
            "profile",
            session_id,
            lambda progress: profile_kernels(session, request, progress=progress),
        )

    @server.tool(name="evaluate", title="Evaluate kernels", annotations=_hints())
    @readable_errors
    async def evaluate_tool(
        session_id: SessionId, ctx: Context, request: EvaluateRequest | None = None
    ) -> Outcome[EvalResult]:
        """verify + profile + reward (paper milestones: -1 fail, 1 correct, 2 beats eager, 3 beats both)."""
        session = registry.use(session_id, _client())
        return await _as_job(
            ctx,
            jobs,
            "evaluate",
            session_id,
            lambda progress: evaluate_kernels(session, request, progress=progress),
        )

    @server.tool(title="Wait for a job", annotations=READ_ONLY)
    @readable_errors
    async def wait_job(
        job_id: Annotated[str, Field(description="from a tool's answer with status running")],
        ctx: Context,
        timeout_s: Annotated[float, Field(ge=0, le=600, description="how long to wait at most")] = 45.0,
    ) -> JobState:
        """Wait for a job a tool handed back (status running); its result once done."""
        client = _client()
        registry.touch(jobs.session_of(job_id, client))

        async def forward(message: str) -> None:
            await ctx.report_progress(0, message=message)
            await send_log(ctx, "info", "cuda-agent.job", message)

        return await jobs.wait(job_id, client, min(timeout_s, jobs.budget_s), forward)

    @server.tool(title="Cancel a job", annotations=_hints(idempotent=True))
    @readable_errors
    async def cancel_job(
        job_id: Annotated[str, Field(description="from a tool's answer with status running")],
    ) -> JobState:
        """Stop a running job (its GPU work is killed at once); a finished job is left as it is."""
        client = _client()
        return await anyio.to_thread.run_sync(lambda: jobs.cancel(job_id, client))

    @server.tool(name="run", title="Run a command", annotations=_hints(destructive=True))
    @readable_errors
    async def run_tool(session_id: SessionId, request: RunRequest) -> RunResult:
        """Run a command in the workspace (e.g. a tuning script) in the sandbox: no network, its own
        filesystem view and user, the session's quotas, killed with its whole process tree at the time
        limit; stdout and stderr come back capped. A quota reached is an error naming it."""
        result = await run_command(registry.use(session_id, _client()), request)
        if result.limit is not None:
            tail = result.process.output[-2000:]
            raise ToolError(f"{result.limit}\n--- the command's last output ---\n{tail}")
        return result

    def cache() -> Path:
        return registry.cache_dir or default_cache_dir()

    @server.tool(name="suite_summary", title="Suite summary", annotations=READ_ONLY)
    @readable_errors
    async def suite_summary(
        run: Annotated[str, Field(description="a bench run id (see bench://runs)")],
    ) -> SuiteSummary:
        """How a suite run did (cuda-agent bench): pass rate, fast_p, geomean speedups, SOL, per level."""
        return await anyio.to_thread.run_sync(lambda: summary_of(run_directory(cache(), run, paths=False)))

    @server.resource("bench://runs", mime_type="application/json", title="Suite runs")
    def bench_runs_resource() -> str:
        """Suite runs on this machine: run id -> report directory."""
        return json.dumps(runs_index(cache()), indent=1)

    @server.resource("bench://{run_id}/summary", mime_type="application/json", title="Suite summary")
    def bench_summary_resource(run_id: str) -> str:
        """One suite run's summary, as JSON."""
        return summary_of(run_directory(cache(), run_id, paths=False)).model_dump_json(indent=1)

    add_resources(server, registry, _client)
    return server


async def _as_job(
    ctx: Context,
    jobs: JobBoard,
    kind: JobKind,
    session_id: str,
    work: Callable[[Callable[[BuildProgress], None]], Awaitable[R]],
) -> Outcome[R]:
    """Run `work` as a job and wait for it up to the board's budget, forwarding its progress as MCP
    progress and log notifications; past the budget, answer with a handle for `wait_job`. A cancelled
    call cancels its job. A task-mode call (server/tasks.py) answers with the handle at once."""
    client = _client()
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
    # A job's result is one of the long tools' results, which Outcome.result lists.
    return Outcome(status="done", result=jobs.result(job_id, client))  # type: ignore[arg-type]
