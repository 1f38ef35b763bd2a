"""The MCP server: every tool of the tool layer, typed, with progress and readable errors.

Tools take a `session_id` from `start_session`. Errors are raised as exceptions with a message the model
can act on (the SDK turns them into `is_error` results); candidate faults are not errors but verdicts in
the structured result. Long steps report progress (build steps; queue position on a shared GPU).
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
from pydantic import Field

from cuda_agent_mcp.bench import SuiteSummary, run_directory, runs_index, summary_of
from cuda_agent_mcp.build import BuildProgress, default_cache_dir
from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.results import BuildResult, EvalResult, ProfileResult, VerifyResult
from cuda_agent_mcp.server.jobs import JobBoard, JobHandle, JobKind, JobState, Outcome, R
from cuda_agent_mcp.server.sessions import LOCAL_CLIENT, SessionInfo, SessionRegistry, SessionStatus
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
from cuda_agent_mcp.tools.gpu import gpu_specs
from cuda_agent_mcp.tools.run import RunRequest, RunResult, run_command
from cuda_agent_mcp.workspace import harness_text

INSTRUCTIONS = """Write CUDA kernels that replace a PyTorch reference (KernelBench format) and have them
compiled, verified and timed. Start with list_tasks and start_session; edit kernels/*.cu,
kernels/*_binding.cpp and model_new.py (read SKILL.md in the workspace first); then compile, verify,
profile, or evaluate (verify + profile + reward). model.py and the binding harness are protected."""

SessionId = Annotated[str, Field(description="from start_session")]
WorkspacePath = Annotated[
    str, Field(description="a path inside the session's workspace, e.g. kernels/relu.cu")
]
T = TypeVar("T")
P = ParamSpec("P")
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def readable_errors(tool: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Our own errors (bad arguments, unknown session, protected file, infrastructure) reach the model
    as their message; anything else is a crash the SDK logs and reports without internals."""

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
    url: str | None = None,
    jobs: JobBoard | None = None,
) -> MCPServer:
    """The server. With `tokens` (HTTP) every request needs a bearer token and sessions belong to its
    client; `url` is where the server is reached (for the OAuth resource metadata). `jobs` runs the long
    tools (default: a 50 s budget per call)."""
    jobs = jobs or JobBoard()
    auth = None
    if tokens is not None:
        assert url is not None
        auth = AuthSettings(issuer_url=url, resource_server_url=f"{url}/mcp", required_scopes=[])
    server = MCPServer("cuda-agent", instructions=INSTRUCTIONS, token_verifier=tokens, auth=auth)

    @server.tool(name="list_tasks", annotations=READ_ONLY)
    @readable_errors
    async def list_tasks_tool(query: TaskQuery | None = None) -> TaskList:
        """Tasks this server can start sessions on (bundled examples and configured sources)."""
        return await list_tasks(registry.catalog, query)

    @server.tool(annotations=WRITES)
    @readable_errors
    async def start_session(
        task_id: Annotated[str | None, Field(description="a task id from list_tasks")] = None,
        reference_source: Annotated[
            str | None,
            Field(description="KernelBench-format source: class Model, get_inputs, get_init_inputs"),
        ] = None,
        directory: Annotated[
            str | None, Field(description="an existing workspace directory on the server's machine")
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

    @server.tool(annotations=WRITES)
    @readable_errors
    async def end_session(session_id: SessionId) -> SessionInfo:
        """Close a session; a workspace the server created is deleted (its journal history stays)."""
        info = registry.info(registry.get(session_id, _client()))
        registry.end(session_id, _client())
        return info

    @server.tool(annotations=READ_ONLY)
    @readable_errors
    async def session_status(session_id: SessionId) -> SessionStatus:
        """The session's files, best result so far and evaluation history (from the journal)."""
        return registry.status(session_id, _client())

    @server.tool(name="read_file", annotations=READ_ONLY)
    @readable_errors
    async def read_file_tool(session_id: SessionId, path: WorkspacePath) -> FileContent:
        """Read a text file of the workspace."""
        return await read_file(registry.get(session_id, _client()), path)

    @server.tool(name="write_file", annotations=WRITES)
    @readable_errors
    async def write_file_tool(session_id: SessionId, path: WorkspacePath, content: str) -> FileWritten:
        """Create or replace a file of the workspace (protected harness files are refused)."""
        return await write_file(registry.get(session_id, _client()), path, content)

    @server.tool(name="edit_file", annotations=WRITES)
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
            registry.get(session_id, _client()), path, old_text, new_text, replace_all=replace_all
        )

    @server.tool(name="list_files", annotations=READ_ONLY)
    @readable_errors
    async def list_files_tool(session_id: SessionId, pattern: str = "**/*") -> FileList:
        """Workspace files matching a glob pattern."""
        return await list_files(registry.get(session_id, _client()), pattern)

    @server.tool(name="search_files", annotations=READ_ONLY)
    @readable_errors
    async def search_files_tool(
        session_id: SessionId,
        regex: str,
        pattern: str = "**/*",
        max_hits: Annotated[int, Field(ge=1, le=1000)] = 200,
    ) -> SearchResult:
        """Lines matching a regular expression in workspace files."""
        return await search_files(registry.get(session_id, _client()), regex, pattern, max_hits=max_hits)

    @server.tool(name="compile", annotations=WRITES)
    @readable_errors
    async def compile_tool(
        session_id: SessionId, ctx: Context, request: CompileRequest | None = None
    ) -> Outcome[BuildResult]:
        """Build the workspace's kernels incrementally; diagnostics name file, line and column."""
        session = registry.get(session_id, _client())
        return await _as_job(
            ctx,
            jobs,
            "compile",
            session_id,
            lambda progress: compile_kernels(session, request, progress=progress),
        )

    @server.tool(name="verify", annotations=WRITES)
    @readable_errors
    async def verify_tool(
        session_id: SessionId, ctx: Context, request: VerifyRequest | None = None
    ) -> Outcome[VerifyResult]:
        """Build, then check ModelNew against the reference on fresh secret inputs in a separate process."""
        session = registry.get(session_id, _client())
        return await _as_job(
            ctx,
            jobs,
            "verify",
            session_id,
            lambda progress: verify_kernels(session, request, progress=progress),
        )

    @server.tool(name="profile", annotations=WRITES)
    @readable_errors
    async def profile_tool(
        session_id: SessionId, ctx: Context, request: ProfileRequest | None = None
    ) -> Outcome[ProfileResult]:
        """Build, then time ModelNew against PyTorch eager and torch.compile (every timed output rechecked)."""
        session = registry.get(session_id, _client())
        return await _as_job(
            ctx,
            jobs,
            "profile",
            session_id,
            lambda progress: profile_kernels(session, request, progress=progress),
        )

    @server.tool(name="evaluate", annotations=WRITES)
    @readable_errors
    async def evaluate_tool(
        session_id: SessionId, ctx: Context, request: EvaluateRequest | None = None
    ) -> Outcome[EvalResult]:
        """verify + profile + reward (paper milestones: -1 fail, 1 correct, 2 beats eager, 3 beats both)."""
        session = registry.get(session_id, _client())
        return await _as_job(
            ctx,
            jobs,
            "evaluate",
            session_id,
            lambda progress: evaluate_kernels(session, request, progress=progress),
        )

    @server.tool(annotations=READ_ONLY)
    @readable_errors
    async def wait_job(
        job_id: Annotated[str, Field(description="from a tool's answer with status running")],
        ctx: Context,
        timeout_s: Annotated[float, Field(ge=0, le=600, description="how long to wait at most")] = 45.0,
    ) -> JobState:
        """Wait for a job a tool handed back (status running); its result once done."""

        async def forward(message: str) -> None:
            await ctx.report_progress(0, message=message)

        return await jobs.wait(job_id, _client(), min(timeout_s, jobs.budget_s), forward)

    @server.tool(annotations=WRITES)
    @readable_errors
    async def cancel_job(
        job_id: Annotated[str, Field(description="from a tool's answer with status running")],
    ) -> JobState:
        """Stop a running job (its GPU work is killed at once); a finished job is left as it is."""
        client = _client()
        return await anyio.to_thread.run_sync(lambda: jobs.cancel(job_id, client))

    @server.tool(name="run", annotations=WRITES)
    @readable_errors
    async def run_tool(session_id: SessionId, request: RunRequest) -> RunResult:
        """Run a command in the workspace (e.g. a tuning script) in the sandbox: no network, limits, killed
        with its whole process tree at the time limit; stdout and stderr come back capped."""
        return await run_command(registry.get(session_id, _client()), request)

    def cache() -> Path:
        return registry.cache_dir or default_cache_dir()

    @server.tool(annotations=READ_ONLY)
    @readable_errors
    async def suite_summary(
        run: Annotated[str, Field(description="a bench run id (see bench://runs)")],
    ) -> SuiteSummary:
        """How a suite run did (cuda-agent bench): pass rate, fast_p, geomean speedups, SOL, per level."""
        return await anyio.to_thread.run_sync(lambda: summary_of(run_directory(cache(), run, paths=False)))

    @server.resource("bench://runs", mime_type="application/json")
    def bench_runs_resource() -> str:
        """Suite runs on this machine: run id -> report directory."""
        return json.dumps(runs_index(cache()), indent=1)

    @server.resource("bench://{run_id}/summary", mime_type="application/json")
    def bench_summary_resource(run_id: str) -> str:
        """One suite run's summary, as JSON."""
        return summary_of(run_directory(cache(), run_id, paths=False)).model_dump_json(indent=1)

    @server.resource("session://{session_id}/reference", mime_type="text/x-python")
    def reference_resource(session_id: str) -> str:
        """The task's reference program (model.py as the harness keeps it)."""
        return registry.get(session_id, _client()).workspace.reference_code

    @server.resource("session://{session_id}/history", mime_type="application/json")
    def history_resource(session_id: str) -> str:
        """The session's status and evaluation history, as JSON."""
        return registry.status(session_id, _client()).model_dump_json(indent=1)

    @server.resource("guide://skill", mime_type="text/markdown")
    def skill_resource() -> str:
        """How to write kernels for this workspace: layout, rules, workflow (the workspace's SKILL.md)."""
        return harness_text("SKILL.md")

    @server.resource("gpu://specs", mime_type="application/json")
    def gpu_resource() -> str:
        """The machine's GPUs (name, memory, driver) and their published peak bandwidth."""
        return gpu_specs().model_dump_json(indent=1)

    @server.prompt()
    def optimize_kernel(session_id: str) -> str:
        """Start an optimization loop on a session's task."""
        return OPTIMIZE_PROMPT.format(session_id=session_id)

    return server


OPTIMIZE_PROMPT = """You are optimizing session {session_id}. Read guide://skill and
session://{session_id}/reference. Write kernels/<name>.cu (pure CUDA, an extern "C" launcher),
kernels/<name>_binding.cpp (REGISTER_BINDING) and model_new.py (class ModelNew calling cuda_extension).
Loop: compile until it builds, verify until it passes, then profile and make it faster than both PyTorch
eager and torch.compile; finish with evaluate. Never call PyTorch compute ops in ModelNew.forward."""


async def _as_job(
    ctx: Context,
    jobs: JobBoard,
    kind: JobKind,
    session_id: str,
    work: Callable[[Callable[[BuildProgress], None]], Awaitable[R]],
) -> Outcome[R]:
    """Run `work` as a job and wait for it up to the board's budget, forwarding its progress as MCP
    progress notifications; past the budget, answer with a handle for `wait_job`. A cancelled call
    cancels its job."""
    client = _client()
    # Starting a job waits for the jobs' loop to take it: done in a thread, never on this loop.
    job_id = await anyio.to_thread.run_sync(lambda: jobs.start(kind, session_id, client, work))
    step = 0

    async def forward(message: str) -> None:
        nonlocal step
        step += 1
        await ctx.report_progress(step, message=message)

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
