"""What every command shares: the consoles, one readable line (or one JSON object) for every failure,
JSON output.

The contract (tests/cli): a user never sees a traceback; `--json` prints exactly one JSON object on
stdout whatever happens, an `{"error": {...}}` object when the command failed; exit codes are 0 ok, 1 a
failed check (build, verdict), 2 the caller's mistake, 3 infrastructure (ours or the machine's).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Literal, NoReturn, TypeVar

import anyio
import typer
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console
from rich.markup import escape

from cuda_agent_mcp.errors import CudaAgentError, InfraError

out = Console()
err = Console(stderr=True)
T = TypeVar("T")

ErrorKind = Literal["usage", "infrastructure", "internal"]
EXIT_CODES: dict[ErrorKind, int] = {"usage": 2, "infrastructure": 3, "internal": 3}
# Set to see the traceback of an internal error (a bug) instead of its one-line summary.
DEBUG_ENV = "CUDA_AGENT_DEBUG"


class ErrorDetails(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ErrorKind = Field(description="usage: the caller's mistake; infrastructure: ours or the machine's")
    type: str = Field(description="the exception class")
    message: str = Field(description="one line: what went wrong and what to do")
    detail: str | None = Field(default=None, description="the whole message, when it had several lines")


class ErrorOutput(BaseModel):
    """What a `--json` command prints on stdout when it fails."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    error: ErrorDetails


def wants_json() -> bool:
    return "--json" in sys.argv[1:]


def help_markup() -> Literal["rich"] | None:
    """Rich help panels on a terminal; click's plain help (never cut, only wrapped) when piped."""
    return "rich" if out.is_terminal else None


def one_line(message: str) -> str:
    """A multi-line message (a judge's traceback, a compiler's log) as its first and last lines."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else message.strip()
    head = lines[0].removesuffix("Traceback (most recent call last):").strip()
    return f"{head} {lines[-1]}" if head else lines[-1]


def describe_validation(exc: ValidationError) -> str:
    """A pydantic refusal as one line naming each bad value and what was expected."""
    parts = []
    for error in exc.errors(include_url=False):
        field = str(error["loc"][-1]) if error["loc"] else exc.title
        value = error.get("input")
        shown = f"={value!r}" if isinstance(value, str | int | float | bool) else ""
        parts.append(f"{field}{shown}: {error['msg']}")
    return "; ".join(parts)


def explain(exc: BaseException) -> tuple[ErrorKind, str, str] | None:
    """(kind, class name, message) for an exception a user can act on; None for a bug of ours."""
    leaf = first_leaf(exc)
    if isinstance(leaf, ValidationError):
        return "usage", type(leaf).__name__, describe_validation(leaf)
    if isinstance(leaf, InfraError):
        return "infrastructure", type(leaf).__name__, str(leaf)
    if isinstance(leaf, CudaAgentError):
        return "usage", type(leaf).__name__, str(leaf)
    if isinstance(leaf, FileNotFoundError | NotADirectoryError | IsADirectoryError):
        return "usage", type(leaf).__name__, f"{leaf.strerror or leaf}: {leaf.filename or ''}".strip(": ")
    if isinstance(leaf, OSError):
        return "infrastructure", type(leaf).__name__, f"{type(leaf).__name__}: {leaf}"
    return None


def first_leaf(exc: BaseException) -> BaseException:
    """The first of our own errors inside an exception group (parallel compiles raise groups), else the
    first leaf; a plain exception is itself."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    leaves = list(_leaves(exc))
    return next((e for e in leaves if isinstance(e, CudaAgentError)), leaves[0] if leaves else exc)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return found


def fail(
    message: str, *, kind: ErrorKind = "usage", type_name: str = "UsageError", as_json: bool | None = None
) -> NoReturn:
    """Report a failure: one line on stderr (markup escaped: `[mcp]` stays), the error object on stdout
    under --json, and the exit code of its kind."""
    line = one_line(message)
    if wants_json() if as_json is None else as_json:
        details = ErrorDetails(
            kind=kind, type=type_name, message=line, detail=message if message.strip() != line else None
        )
        sys.stdout.write(ErrorOutput(error=details).model_dump_json() + "\n")
    err.print(f"[red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)  # one line, at any width
    raise typer.Exit(EXIT_CODES[kind])


def fail_with(exc: BaseException, *, as_json: bool | None = None) -> NoReturn:
    """`fail` for an exception: ours, a validation error, an OSError, or (re-raised) anything else."""
    explained = explain(exc)
    if explained is None:
        raise exc
    kind, type_name, message = explained
    fail(message, kind=kind, type_name=type_name, as_json=as_json)


def run(work: Callable[[], Awaitable[T]], *, as_json: bool | None = None) -> T:
    """Run one async tool call; errors become one readable line and an exit code, never a traceback."""
    try:
        return anyio.run(work)
    except typer.Exit:
        raise
    except Exception as exc:
        fail_with(exc, as_json=as_json)


def emit_json(model: BaseModel) -> None:
    sys.stdout.write(model.model_dump_json(indent=2) + "\n")


def emit_json_data(data: object) -> None:
    """Plain JSON on stdout (no colour, no wrapping), for values that are not one model."""
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def guarded(function: Callable[..., T], *args: object, as_json: bool | None = None, **kwargs: object) -> T:
    """A synchronous step with the same error contract as `run`."""
    try:
        return function(*args, **kwargs)
    except typer.Exit:
        raise
    except Exception as exc:
        fail_with(exc, as_json=as_json)


def internal_error(exc: BaseException) -> NoReturn:
    """The last net (cli.app.main): a bug of ours as one line, unless $CUDA_AGENT_DEBUG asks for more."""
    if os.environ.get(DEBUG_ENV):
        raise exc
    fail(
        f"internal error, please report it: {type(exc).__name__}: {exc} "
        f"(set {DEBUG_ENV}=1 to see the traceback)",
        kind="internal",
        type_name=type(exc).__name__,
    )
