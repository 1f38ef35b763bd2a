"""Tool arguments of the wrong shape, refused in one readable line instead of pydantic's dump.

The SDK validates a `tools/call`'s arguments against the tool's parameters and, when they do not fit,
answers an `is_error` result with the whole `ValidationError` text (input values, error types,
documentation URLs). When a call comes back as an error, this middleware runs the same validation
(`fn_metadata.validate_arguments`, what the SDK ran) and, where it fails, replaces that text with one
line such as `invalid arguments for read_file: path: expected a string (got 123)`: each field, what it
expects, what came. The rest of the SDK's result (its envelope for the client's protocol version) stays.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.tools import Tool
from pydantic import ValidationError
from pydantic_core import ErrorDetails

MAX_FIELDS = 5  # named in the message; the rest are counted
# What a field expects, by pydantic error type, where its own message says it less plainly.
_EXPECTS = {
    "missing": "required",
    "string_type": "expected a string",
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "list_type": "expected a list",
    "extra_forbidden": "unknown field",
}


class ArgumentErrors:
    """Middleware: the SDK's answer to arguments that do not fit a tool, in one readable line."""

    def __init__(self, tool: Callable[[str], Tool | None]) -> None:
        self.tool = tool

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        params = ctx.params or {}
        if ctx.method != "tools/call" or not isinstance(result, dict) or not result.get("isError"):
            return result
        arguments = params.get("arguments") or {}
        tool = self.tool(params["name"]) if isinstance(params.get("name"), str) else None
        if tool is None or not isinstance(arguments, dict):
            return result  # the SDK's own answer (unknown tool, malformed params)
        try:
            tool.fn_metadata.validate_arguments(arguments)
        except ValidationError as exc:
            return {**result, "content": [{"type": "text", "text": readable(tool.name, exc)}]}
        return result  # the arguments fit: the tool's own error


def readable(tool: str, error: ValidationError) -> str:
    """`invalid arguments for TOOL: field: what it expects (got what came); ...`, one line."""
    problems = [_describe(e) for e in error.errors()]
    text = "; ".join(problems[:MAX_FIELDS])
    if len(problems) > MAX_FIELDS:
        text += f"; and {len(problems) - MAX_FIELDS} more"
    return f"invalid arguments for {tool}: {text}"


def _describe(error: ErrorDetails) -> str:
    """`field: what it expects (got what came)`, one line."""
    field = ".".join(str(part) for part in error["loc"]) or "arguments"
    kind = error["type"]
    expects = _EXPECTS.get(kind)
    if expects is None:
        message = error["msg"].split("\n")[0]
        if message.startswith("Input should be "):
            rest = message.removeprefix("Input should be ").replace("a valid ", "a ")
            expects = f"expected {rest}" if rest[:1] in ("a", "'", '"') else f"expected a value {rest}"
        else:
            expects = message.removeprefix("Value error, ")
    if kind == "missing":
        return f"{field}: {expects}"
    return f"{field}: {expects} (got {_shown(error.get('input'))})"


def _shown(value: Any) -> str:
    """The value as JSON, cut short: enough to recognise it, never a whole file's content."""
    try:
        text = json.dumps(value, default=str)
    except ValueError:
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."
