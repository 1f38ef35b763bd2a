"""What every command shares: the consoles, running one async call with readable errors, JSON output."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

from cuda_agent_mcp.errors import CudaAgentError, InfraError

out = Console()
err = Console(stderr=True)
T = TypeVar("T")


def run(work: Callable[[], Awaitable[T]]) -> T:
    """Run one async tool call; errors become one readable line and an exit code, never a traceback."""
    try:
        return anyio.run(work)
    except CudaAgentError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(3 if isinstance(exc, InfraError) else 2) from None


def emit_json(model: BaseModel) -> None:
    sys.stdout.write(model.model_dump_json(indent=2) + "\n")


def guarded(function: Callable[..., T], *args: object, **kwargs: object) -> T:
    """A synchronous step with the same error contract as `run`."""
    try:
        return function(*args, **kwargs)
    except CudaAgentError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(3 if isinstance(exc, InfraError) else 2) from None
