"""Every MCP tool registered from its one declaration: the tool layer's (`tools.TOOLS`) and the server's
own (`server_tools.SERVER_TOOLS`, sessions, jobs and suites, entered with `TOOLS.with_tools`).

Each tool's parameters are its request model's fields (or, for tools whose arguments are all settings,
one optional object of the request model), after `session_id` for tools that run on a session. Long tools
run as jobs (`calls.run_as_job`). The context a tool runs on is made per call: the caller's session, the
task catalogue, or a `ServerCall`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, cast

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from cuda_agent_mcp.results import BuildResult, EvalResult, ProfileResult, VerifyResult
from cuda_agent_mcp.server.calls import SessionId, current_client, hints, readable_errors, run_as_job
from cuda_agent_mcp.server.jobs import JobBoard, JobKind, Outcome, Progress
from cuda_agent_mcp.server.logs import send_log
from cuda_agent_mcp.server.server_tools import SERVER_TOOLS, ServerCall
from cuda_agent_mcp.server.sessions import SessionRegistry
from cuda_agent_mcp.server.views import (
    CompileView,
    EvaluateView,
    ProfileView,
    ResultView,
    VerifyView,
    view_of,
)
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tools import TOOLS, Session, Tool, ToolRegistry
from cuda_agent_mcp.tools.registry import as_function
from cuda_agent_mcp.tools.run import RunResult

MCP_TOOLS: ToolRegistry = TOOLS.with_tools(*SERVER_TOOLS)
# What the long tools answer with on MCP: compact views of their results (server/views.py).
VIEWS: dict[type[BaseModel], type[BaseModel]] = {
    BuildResult: CompileView,
    VerifyResult: VerifyView,
    ProfileResult: ProfileView,
    EvalResult: EvaluateView,
}
# What the MCP description adds to a tool's own (where the server answers differently from a policy).
_MCP_NOTES = {"run": " A quota or limit reached is an error naming it, with the command's last output."}


def _as_error(result: BaseModel) -> None:
    """Results the server answers as tool errors: a `run` that reached a quota (the session lives on)."""
    if isinstance(result, RunResult) and result.limit is not None:
        tail = result.process.output[-2000:]
        raise ToolError(f"{result.limit}\n--- the command's last output ---\n{tail}")


def _answer(result: BaseModel) -> CallToolResult:
    """The result as structured content, and as text the model reads: compact JSON without the fields
    left unset (the SDK's own text is the same JSON indented, a quarter of it spaces)."""
    text = result.model_dump_json(exclude_none=True)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=result.model_dump(mode="json")
    )


def _context(
    tool: Tool, sessions: SessionRegistry, jobs: JobBoard, ctx: Context, session_id: str | None
) -> Any:
    client = current_client()
    if tool.context is Session:
        assert session_id is not None  # a required parameter of these tools' signatures
        return sessions.use(session_id, client)
    if tool.context is TaskCatalog:
        return sessions.catalog
    if tool.context is ServerCall:

        async def forward(message: str) -> None:
            await ctx.report_progress(0, message=message)
            await send_log(ctx, "info", "cuda-agent.job", message)

        return ServerCall(sessions=sessions, jobs=jobs, client=client, forward=forward)
    raise TypeError(f"tool {tool.name} runs on a {tool.context.__name__}, which the MCP server has not")


def _function(tool: Tool, sessions: SessionRegistry, jobs: JobBoard) -> Callable[..., Any]:
    async def call(ctx: Context, **arguments: Any) -> Any:
        # A session tool's `session_id` picks its context; a server tool's (end_session) is a request field.
        session_id = arguments.pop("session_id") if tool.context is Session else None
        context = _context(tool, sessions, jobs, ctx, session_id)
        if tool.nested is not None:
            request = arguments.get(tool.nested) or tool.request()
        else:
            request = tool.request(**arguments)
        if tool.long_running:
            kind = cast(JobKind, tool.name)
            sid = cast(str, session_id)

            async def work(progress: Progress) -> ResultView:
                result = await tool(context, request, progress=progress)
                sessions.keep_result(sid, kind, result)  # the details the view leaves out
                return view_of(result)

            return _answer(await run_as_job(ctx, jobs, kind, sid, work))
        result = await tool(context, request)
        _as_error(result)
        return _answer(result)

    keyword = inspect.Parameter.KEYWORD_ONLY
    before = (
        [inspect.Parameter("session_id", keyword, annotation=SessionId)] if tool.context is Session else []
    )
    after = [inspect.Parameter("ctx", keyword, annotation=Context)]
    returns = cast(Any, Outcome)[VIEWS[tool.result]] if tool.long_running else tool.result
    signature = tool.signature(before=before, after=after, returns=returns)
    description = tool.description + _MCP_NOTES.get(tool.name, "")
    return as_function(readable_errors(call), tool.name, description, signature)


def register_tools(server: MCPServer, sessions: SessionRegistry, jobs: JobBoard) -> None:
    """Every tool of `MCP_TOOLS` exposed on MCP, with its title and hints."""
    for tool in MCP_TOOLS.exposed_on("mcp"):
        annotations = hints(
            read_only=tool.read_only, destructive=tool.destructive, idempotent=tool.idempotent
        )
        server.add_tool(_function(tool, sessions, jobs), title=tool.title, annotations=annotations)
