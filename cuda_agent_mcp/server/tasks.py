"""MCP Tasks, in both wire shapes, for the long tools (compile, verify, profile, evaluate).

mcp 2.3.0 serves neither, and hosts speak two that do not interoperate:

- 2025-11-25 (handshake era): the client declares `capabilities.tasks` at `initialize` and asks per
  call with `params.task = {"ttl": ms}`; the server answers `{"task": Task}` and serves `tasks/get`,
  `tasks/result` (blocks until the task ends, then the tool's own result), `tasks/cancel` (the Task) and
  `tasks/list`. Long tools list `execution.taskSupport = "optional"`; other tools refuse `params.task`.
- 2026-07-28 (the `io.modelcontextprotocol/tasks` extension): the client names the extension in the
  request's `_meta` client capabilities, the server may answer `{"resultType": "task", ...Task}` and
  serves `tasks/get` (the result inlined once completed), `tasks/update` and `tasks/cancel` (empty acks).

Both ride the job board: a task is a job started without waiting, its id the job's id, visible only to
the client that started it. A client that declares neither gets what it always got: the result within
the budget or a `wait_job` handle. No tool requires tasks.

The extension (SDK hook `Extension`) serves the `tasks/*` methods and advertises itself; `TaskShapes`
(SDK hook `ServerMiddleware`) turns a task-mode `tools/call` into a task handle and adds the 2025 shape's
capability and per-tool flags, which no extension hook reaches.
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND, PaginatedRequestParams, RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field

from cuda_agent_mcp.errors import UnknownJob
from cuda_agent_mcp.server.jobs import JobBoard, JobState

IDENTIFIER = "io.modelcontextprotocol/tasks"
LONG_TOOLS = frozenset({"compile", "verify", "profile", "evaluate"})
RELATED_TASK = "io.modelcontextprotocol/related-task"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
DEFAULT_TTL_MS = 3_600_000
MAX_TTL_MS = 24 * DEFAULT_TTL_MS
POLL_INTERVAL_MS = 1000
Shape = Literal["2025-11-25", "2026-07-28"]


@dataclass(frozen=True)
class TaskMode:
    """Set for the length of one task-mode `tools/call`: the tool starts its job and returns at once."""

    shape: Shape
    ttl_ms: int


# Read by the long tools (server/app.py `_as_job`): set, they answer with the job's handle at once.
TASK_MODE: contextvars.ContextVar[TaskMode | None] = contextvars.ContextVar(
    "cuda_agent_task_mode", default=None
)


@dataclass
class _Task:
    job_id: str
    client: str
    shape: Shape
    ttl_ms: int
    created: float


class TaskStore:
    """Task ids (the jobs' ids) and what each one was created with."""

    def __init__(self, jobs: JobBoard, client: Callable[[], str]) -> None:
        self.jobs = jobs
        self.client = client
        self._tasks: dict[str, _Task] = {}

    def add(self, job_id: str, mode: TaskMode) -> _Task:
        task = _Task(job_id, self.client(), mode.shape, mode.ttl_ms, time.time())
        self._tasks[job_id] = task
        return task

    def find(self, task_id: str) -> tuple[_Task, JobState]:
        """The task and its job's state, for the calling client; -32602 otherwise (unknown, another
        client's, or expired)."""
        task = self._tasks.get(task_id)
        if task is not None and time.time() - task.created > task.ttl_ms / 1000:
            self._tasks.pop(task_id, None)
            task = None
        if task is None or task.client != self.client():
            raise MCPError(
                code=INVALID_PARAMS, message=f"Failed to retrieve task: no task {task_id!r} for this client"
            )
        try:
            return task, self.jobs.state(task_id, task.client)
        except UnknownJob:
            self._tasks.pop(task_id, None)
            raise MCPError(
                code=INVALID_PARAMS, message=f"Failed to retrieve task: task {task_id!r} expired"
            ) from None

    def mine(self) -> list[tuple[_Task, JobState]]:
        client = self.client()
        found = []
        for task_id, task in list(self._tasks.items()):
            if task.client == client:
                try:
                    found.append(self.find(task_id))
                except MCPError:
                    continue
        return sorted(found, key=lambda pair: -pair[0].created)


# -- the wire --------------------------------------------------------------------------------------


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def task_status(state: JobState, tool_failed: bool) -> str:
    if state.status == "running":
        return "working"
    if state.status == "cancelled":
        return "cancelled"
    # A tool's own error (is_error) completes the task; only a crash of ours fails it.
    return "failed" if state.status == "failed" and not tool_failed else "completed"


def task_fields(task: _Task, state: JobState) -> dict[str, Any]:
    """The Task object in the task's shape."""
    updated = task.created + state.elapsed_s
    fields: dict[str, Any] = {
        "taskId": task.job_id,
        "status": task_status(state, tool_failed=state.status == "failed" and _is_tool_error(state)),
        "createdAt": _iso(task.created),
        "lastUpdatedAt": _iso(updated),
    }
    if state.progress:
        fields["statusMessage"] = state.progress
    elif state.status == "failed":
        fields["statusMessage"] = state.error or "failed"
    if task.shape == "2025-11-25":
        fields |= {"ttl": task.ttl_ms, "pollInterval": POLL_INTERVAL_MS}
    else:
        fields |= {"ttlMs": task.ttl_ms, "pollIntervalMs": POLL_INTERVAL_MS}
    return fields


def _is_tool_error(state: JobState) -> bool:
    return bool(state.error) and state.error_kind == "tool"


def tool_result(state: JobState) -> dict[str, Any]:
    """What the tool call would have answered: the outcome envelope, or its error as an is_error result."""
    if state.status == "done":
        structured = {
            "status": "done",
            "result": state.result.model_dump(mode="json") if state.result else None,
        }
        structured["job"] = None
        return {
            "content": [{"type": "text", "text": json.dumps(structured)}],
            "structuredContent": structured,
            "isError": False,
        }
    message = "the task was cancelled" if state.status == "cancelled" else state.error or "the task failed"
    return {"content": [{"type": "text", "text": message}], "isError": True}


def requested_mode(method: str, params: dict[str, Any] | None, protocol_version: str) -> TaskMode | None:
    """Whether this `tools/call` asks for a task, and in which shape."""
    if method != "tools/call" or not isinstance(params, dict):
        return None
    task = params.get("task")
    if isinstance(task, dict):
        ttl = task.get("ttl")
        ttl_ms = int(ttl) if isinstance(ttl, int | float) and ttl > 0 else DEFAULT_TTL_MS
        return TaskMode("2025-11-25", min(ttl_ms, MAX_TTL_MS))
    meta = params.get("_meta")
    capabilities = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    if isinstance(extensions, dict) and IDENTIFIER in extensions:
        return TaskMode("2026-07-28", DEFAULT_TTL_MS)
    return None


# -- the SDK hooks ---------------------------------------------------------------------------------


class _TaskParams(RequestParams):
    model_config = ConfigDict(extra="allow")

    task_id: str = Field(alias="taskId")


class TasksExtension(Extension):
    """`io.modelcontextprotocol/tasks`: the `tasks/*` methods of both shapes."""

    identifier = IDENTIFIER

    def __init__(self, store: TaskStore) -> None:
        self.store = store

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", _TaskParams, self._get),
            MethodBinding("tasks/result", _TaskParams, self._result),
            MethodBinding("tasks/cancel", _TaskParams, self._cancel),
            MethodBinding("tasks/list", PaginatedRequestParams, self._list),
            MethodBinding("tasks/update", _TaskParams, self._update),
        ]

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> dict[str, Any]:
        task, state = self.store.find(params.task_id)
        fields = task_fields(task, state)
        if task.shape == "2026-07-28":
            fields["resultType"] = "complete"
            if fields["status"] == "completed":
                fields["result"] = tool_result(state) | {"resultType": "complete"}
            elif fields["status"] == "failed":
                fields["error"] = {"code": -32603, "message": state.error or "failed"}
        return fields

    async def _result(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> dict[str, Any]:
        """2025 shape: wait for the task to end, then answer as the tool call would have."""
        task, state = self.store.find(params.task_id)
        if task.shape != "2025-11-25":
            raise MCPError(
                code=METHOD_NOT_FOUND, message="tasks/result is not part of the 2026-07-28 tasks extension"
            )
        while state.status == "running":
            await anyio.sleep(0.05)
            task, state = self.store.find(params.task_id)
        return tool_result(state) | {"_meta": {RELATED_TASK: {"taskId": task.job_id}}}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> dict[str, Any]:
        task, state = self.store.find(params.task_id)
        if state.status != "running":
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Cannot cancel task: it is already {task_fields(task, state)['status']}",
            )
        state = await anyio.to_thread.run_sync(lambda: self.store.jobs.cancel(task.job_id, task.client))
        if task.shape == "2026-07-28":
            return {"resultType": "complete"}
        return task_fields(task, state)

    async def _list(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams
    ) -> dict[str, Any]:
        return {"tasks": [task_fields(task, state) for task, state in self.store.mine()[:100]]}

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> dict[str, Any]:
        self.store.find(params.task_id)  # no task of ours ever waits for input: nothing to deliver
        return {"resultType": "complete"}


class TaskShapes:
    """Middleware: task-mode `tools/call` to a task handle; the 2025 shape's advertisements."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        mode = requested_mode(ctx.method, dict(ctx.params) if ctx.params else None, ctx.protocol_version)
        if mode is None:
            result = await call_next(ctx)
            return _advertise(ctx.method, ctx.protocol_version, result)
        name = (ctx.params or {}).get("name")
        if name not in LONG_TOOLS:
            if mode.shape == "2026-07-28":
                return await call_next(ctx)  # the server decides: short tools answer directly
            raise MCPError(
                code=METHOD_NOT_FOUND, message=f"tool {name!r} does not run as a task: call it without task"
            )
        token = TASK_MODE.set(mode)
        try:
            result = await call_next(ctx)
        finally:
            TASK_MODE.reset(token)
        wire = _as_dict(result)
        job = (wire.get("structuredContent") or {}).get("job") if not wire.get("isError") else None
        if not job:
            return result  # refused before any work started (unknown session, bad arguments): as it is
        task = self.store.add(job["job_id"], mode)
        _, state = self.store.find(task.job_id)
        fields = task_fields(task, state)
        if mode.shape == "2025-11-25":
            return {"task": fields, "_meta": {RELATED_TASK: {"taskId": task.job_id}}}
        return {"resultType": "task", **fields}


def _as_dict(result: HandlerResult) -> dict[str, Any]:
    if result is None:
        return {}
    if isinstance(result, dict):
        return result
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def _advertise(method: str, version: str, result: HandlerResult) -> HandlerResult:
    """The 2025 shape's capability (at initialize) and the long tools' `taskSupport` (in tools/list)."""
    if version in MODERN_PROTOCOL_VERSIONS:
        return result  # the extension advertises itself there
    if method == "initialize":
        wire = _as_dict(result)
        capabilities = wire.setdefault("capabilities", {})
        capabilities["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        return wire
    if method == "tools/list":
        wire = _as_dict(result)
        for tool in wire.get("tools", []):
            if tool.get("name") in LONG_TOOLS:
                tool["execution"] = {"taskSupport": "optional"}
        return wire
    return result
