"""Log notifications: the build's and the judge's progress lines, streamed to the client as they happen.

Handshake-era clients (2025-11-25 and before) get the `logging` capability at `initialize` and may set a
level with `logging/setLevel` (default `info`); 2026-07-28 clients opt in per request with the
`io.modelcontextprotocol/logLevel` `_meta` key, which the SDK's session already honours. Progress
notifications carry the same lines for clients that show those instead.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_levels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()  # session -> minimum level


class LogLevels:
    """Middleware: the `logging` capability and `logging/setLevel` for handshake-era clients."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "logging/setLevel":
            level = (ctx.params or {}).get("level")
            if level in LEVELS:
                _levels[ctx.session] = level
            return {}
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            result.setdefault("capabilities", {})["logging"] = {}
        return result


async def send_log(ctx: Context, level: str, logger: str, message: str) -> None:
    """One log notification for this request's client, when its level lets it through."""
    session = ctx.request_context.session
    if LEVELS.index(level) < LEVELS.index(_levels.get(session, "info")):
        return
    # Deprecated for 2026-07-28 clients (who get log lines only when they opt in); still the way older
    # ones see them, so the SDK's warning on every line says nothing new. It warns when called, so the
    # coroutine is made inside the filter and awaited outside it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        sending = session.send_log_message(level, message, logger=logger)  # type: ignore[arg-type]  # one of LEVELS
    await sending
