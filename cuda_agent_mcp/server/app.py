"""The MCP server: every tool of the tool layer, typed, with progress, logs and readable errors.

The tool layer's tools are registered from their declarations (`registry_tools.py`); the server's own
tools (sessions, jobs, suite summaries) and resources are here. Tools take a `session_id` from `start_session`. Errors are raised as exceptions with a message the model
can act on (the SDK turns them into `is_error` results); candidate faults are not errors but verdicts in
the structured result. Long steps report progress and log lines (build steps; queue position on a shared
GPU; the judge's stages), and run as MCP tasks for clients that ask (`server/tasks.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import anyio
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context
from pydantic import Field

from cuda_agent_mcp.bench import SuiteSummary, run_directory, runs_index, summary_of
from cuda_agent_mcp.build import default_cache_dir
from cuda_agent_mcp.server.calls import SessionId, current_client, hints, readable_errors
from cuda_agent_mcp.server.jobs import JobBoard, JobState
from cuda_agent_mcp.server.logs import LogLevels, send_log
from cuda_agent_mcp.server.registry_tools import register_registry_tools
from cuda_agent_mcp.server.resources import add_resources
from cuda_agent_mcp.server.sessions import SessionInfo, SessionList, SessionRegistry, SessionStatus
from cuda_agent_mcp.server.tasks import TasksExtension, TaskShapes, TaskStore

INSTRUCTIONS = """Write CUDA kernels that replace a PyTorch reference (KernelBench format) and have them
compiled, verified and timed. Start with list_tasks and start_session; edit kernels/*.cu,
kernels/*_binding.cpp and model_new.py (read SKILL.md in the workspace first); then compile, verify,
profile, or evaluate (verify + profile + reward). model.py and the binding harness are protected.
list_sessions finds your sessions again; end_session ends one (idle ones end by themselves)."""


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
                issuer_url=authorization_server,
                resource_server_url=f"{url}/mcp",
                required_scopes=[],
                validate_token_resource=False,
            )
        else:  # static tokens: no authorization server, so no metadata pointing at one
            # The static token table is this server's own (server/auth.py): no token was issued for another
            # resource, so the SDK's RFC 8707 resource check has nothing to add (and unset, it warns twice).
            auth = AuthSettings(
                issuer_url=url or "http://127.0.0.1",
                resource_server_url=None,
                required_scopes=[],
                validate_token_resource=False,
            )
    store = TaskStore(jobs, current_client)
    server = MCPServer(
        "cuda-agent",
        instructions=INSTRUCTIONS,
        token_verifier=tokens,
        auth=auth,
        extensions=[TasksExtension(store)],
        middleware=[LogLevels(), TaskShapes(store)],
    )

    @server.tool(title="Start a session", annotations=hints())
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
        client = current_client()
        session = await anyio.to_thread.run_sync(
            lambda: registry.start(
                client=client, task_id=task_id, reference_source=reference_source, directory=directory
            )
        )
        return registry.info(session)

    @server.tool(title="List my sessions", annotations=hints(read_only=True))
    @readable_errors
    async def list_sessions() -> SessionList:
        """Your open sessions (to find them again after reconnecting), with how long until idle ones end."""
        return registry.list(current_client())

    @server.tool(title="End a session", annotations=hints(destructive=True))
    @readable_errors
    async def end_session(session_id: SessionId) -> SessionInfo:
        """Close a session: its running jobs stop and a workspace the server created is deleted (or
        archived, if the server keeps an archive); its journal history stays."""
        client = current_client()
        info = registry.info(registry.get(session_id, client))
        await anyio.to_thread.run_sync(lambda: registry.end(session_id, client))
        return info

    @server.tool(title="Session status", annotations=hints(read_only=True))
    @readable_errors
    async def session_status(session_id: SessionId) -> SessionStatus:
        """The session's files, best result so far and evaluation history (from the journal)."""
        registry.use(session_id, current_client())
        return registry.status(session_id, current_client())

    @server.tool(title="Wait for a job", annotations=hints(read_only=True))
    @readable_errors
    async def wait_job(
        job_id: Annotated[str, Field(description="from a tool's answer with status running")],
        ctx: Context,
        timeout_s: Annotated[float, Field(ge=0, le=600, description="how long to wait at most")] = 45.0,
    ) -> JobState:
        """Wait for a job a tool handed back (status running); its result once done."""
        client = current_client()
        registry.touch(jobs.session_of(job_id, client))

        async def forward(message: str) -> None:
            await ctx.report_progress(0, message=message)
            await send_log(ctx, "info", "cuda-agent.job", message)

        return await jobs.wait(job_id, client, min(timeout_s, jobs.budget_s), forward)

    @server.tool(title="Cancel a job", annotations=hints(idempotent=True))
    @readable_errors
    async def cancel_job(
        job_id: Annotated[str, Field(description="from a tool's answer with status running")],
    ) -> JobState:
        """Stop a running job (its GPU work is killed at once); a finished job is left as it is."""
        client = current_client()
        return await anyio.to_thread.run_sync(lambda: jobs.cancel(job_id, client))

    def cache() -> Path:
        return registry.cache_dir or default_cache_dir()

    @server.tool(name="suite_summary", title="Suite summary", annotations=hints(read_only=True))
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

    register_registry_tools(server, registry, jobs)
    add_resources(server, registry, current_client)
    return server
