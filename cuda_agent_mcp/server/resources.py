"""The server's resources, prompts and completions.

A resource that cannot be read answers with its reason, never a bare "error creating resource": a
`NotFound` (an unknown session or task) is the SDK's `ResourceNotFoundError` (JSON-RPC -32602, invalid
params, as SEP-2164 asks), another error of ours its `ResourceError` (-32603) saying what failed. Completions offer
this client's session ids and the catalog's task ids, by prefix.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import Completion, CompletionArgument, PromptReference, ResourceTemplateReference

from cuda_agent_mcp.errors import CudaAgentError, NotFound
from cuda_agent_mcp.server.sessions import SessionRegistry
from cuda_agent_mcp.tools.gpu import gpu_specs
from cuda_agent_mcp.workspace import harness_text

P = ParamSpec("P")
T = TypeVar("T")
_MAX_COMPLETIONS = 100

OPTIMIZE_PROMPT = """You are optimizing session {session_id}. Read guide://skill and
session://{session_id}/reference. Write kernels/<name>.cu (pure CUDA, an extern "C" launcher),
kernels/<name>_binding.cpp (REGISTER_BINDING) and model_new.py (class ModelNew calling cuda_extension).
Loop: compile until it builds, verify until it passes, then profile and make it faster than both PyTorch
eager and torch.compile; finish with evaluate. Never call PyTorch compute ops in ModelNew.forward."""

START_PROMPT = """Start a session on task {task_id} with start_session(task_id="{task_id}"), then read
guide://skill and the session's reference, and optimize it as the optimize_kernel prompt describes."""


def with_reasons(read: Callable[P, T]) -> Callable[P, T]:
    """Our errors in a resource function become the SDK's resource errors, message kept."""

    @functools.wraps(read)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return read(*args, **kwargs)
        except NotFound as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        except CudaAgentError as exc:
            raise ResourceError(str(exc)) from exc

    return wrapper


def add_resources(server: MCPServer, registry: SessionRegistry, client: Callable[[], str]) -> None:
    @server.resource("session://{session_id}/reference", mime_type="text/x-python", title="Session reference")
    @with_reasons
    def reference_resource(session_id: str) -> str:
        """The task's reference program (model.py as the harness keeps it)."""
        return registry.get(session_id, client()).workspace.reference_code

    @server.resource("session://{session_id}/history", mime_type="application/json", title="Session history")
    @with_reasons
    def history_resource(session_id: str) -> str:
        """The session's status and evaluation history, as JSON."""
        return registry.status(session_id, client()).model_dump_json(indent=1)

    @server.resource(
        "session://{session_id}/result/{kind}", mime_type="application/json", title="Full result"
    )
    @with_reasons
    def result_resource(session_id: str, kind: str) -> str:
        """The full result of the session's latest compile, verify, profile or evaluate (every timing
        sample, hash and phase the tool's compact answer leaves out), as JSON."""
        return registry.latest_result(session_id, kind, client()).model_dump_json(indent=1)

    @server.resource("guide://skill", mime_type="text/markdown", title="Workspace guide")
    def skill_resource() -> str:
        """How to write kernels for this workspace: layout, rules, workflow (the workspace's SKILL.md)."""
        return harness_text("SKILL.md")

    @server.resource("gpu://specs", mime_type="application/json", title="GPU specs")
    @with_reasons
    def gpu_resource() -> str:
        """The machine's GPUs (name, memory, driver) and their published peak bandwidth."""
        return gpu_specs().model_dump_json(indent=1)

    @server.prompt(title="Optimize a session's kernel")
    def optimize_kernel(session_id: str) -> str:
        """Start an optimization loop on a session's task."""
        return OPTIMIZE_PROMPT.format(session_id=session_id)

    @server.prompt(title="Start on a task")
    def start_task(task_id: str) -> str:
        """Start a session on a task of the catalog and optimize it."""
        return START_PROMPT.format(task_id=task_id)

    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument, context: Any
    ) -> Completion | None:
        if argument.name == "session_id":
            known = registry.ids(client())
        elif argument.name == "task_id":
            known = [summary.id for summary in registry.catalog.list()]
        else:
            return None
        matches = sorted(value for value in known if value.startswith(argument.value))
        return Completion(
            values=matches[:_MAX_COMPLETIONS], total=len(matches), has_more=len(matches) > _MAX_COMPLETIONS
        )
