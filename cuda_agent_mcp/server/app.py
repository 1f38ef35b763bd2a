"""The MCP server: every tool of the tool layer, typed, with progress, logs and readable errors.

Every tool is registered from its declaration (`registry_tools.py`: the tool layer's and the server's
own, `server_tools.py`); the resources are added here. Tools take a `session_id` from `start_session`. Errors are raised as exceptions with a message the model
can act on (the SDK turns them into `is_error` results); candidate faults are not errors but verdicts in
the structured result. Long steps report progress and log lines (build steps; queue position on a shared
GPU; the judge's stages), and run as MCP tasks for clients that ask (`server/tasks.py`).
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl

from cuda_agent_mcp import __version__
from cuda_agent_mcp.bench import run_directory, runs_index, summary_of
from cuda_agent_mcp.build import default_cache_dir
from cuda_agent_mcp.server.arguments import ArgumentErrors
from cuda_agent_mcp.server.calls import current_client
from cuda_agent_mcp.server.compact import CompactToolsServer
from cuda_agent_mcp.server.jobs import JobBoard
from cuda_agent_mcp.server.logs import LogLevels
from cuda_agent_mcp.server.registry_tools import register_tools
from cuda_agent_mcp.server.resources import add_resources, with_reasons
from cuda_agent_mcp.server.sessions import SessionRegistry
from cuda_agent_mcp.server.tasks import TasksExtension, TaskShapes, TaskStore

INSTRUCTIONS = """Write CUDA kernels that replace a PyTorch reference (KernelBench format) and have them
compiled, verified and timed. Start with list_tasks and start_session; edit kernels/*.cu,
kernels/*_binding.cpp and model_new.py (read SKILL.md in the workspace first); then compile, verify,
profile, or evaluate (verify + profile + reward). model.py and the binding harness are protected.
list_sessions finds your sessions again; end_session ends one (idle ones end by themselves)."""


def package_version() -> str:
    """The installed package's version (serverInfo.version), else the source tree's."""
    try:
        return metadata.version("cuda-agent-mcp")
    except metadata.PackageNotFoundError:
        return __version__


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
    store = TaskStore(jobs, current_client)
    server = CompactToolsServer(
        "cuda-agent",
        version=package_version(),
        instructions=INSTRUCTIONS,
        token_verifier=tokens,
        auth=auth,
        extensions=[TasksExtension(store)],
        # The SDK offers no public lookup of a registered tool; its tool manager is the registry.
        middleware=[
            LogLevels(),
            ArgumentErrors(lambda name: server._tool_manager.get_tool(name)),
            TaskShapes(store),
        ],
    )

    def cache() -> Path:
        return registry.cache_dir or default_cache_dir()

    @server.resource("bench://runs", mime_type="application/json", title="Suite runs")
    @with_reasons
    def bench_runs_resource() -> str:
        """Suite runs on this machine: run id -> report directory."""
        return json.dumps(runs_index(cache()), indent=1)

    @server.resource("bench://{run_id}/summary", mime_type="application/json", title="Suite summary")
    @with_reasons
    def bench_summary_resource(run_id: str) -> str:
        """One suite run's summary, as JSON."""
        return summary_of(run_directory(cache(), run_id, paths=False)).model_dump_json(indent=1)

    register_tools(server, registry, jobs)
    add_resources(server, registry, current_client)
    return server
