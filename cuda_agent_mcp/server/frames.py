"""JSON-RPC frames the SDK would drop or answer with a validation dump, answered with the spec's codes.

One check for both transports: a frame that is not JSON is -32700 (Parse error), one that is JSON but not
a JSON-RPC 2.0 message MCP accepts is -32600 (Invalid Request), each with a one-line message saying what
is wrong. The reply carries the request's id when it had a usable one, else null. Batches are refused:
MCP dropped them (2025-06-18) and the SDK parses one message per frame.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError

PARSE_ERROR, INVALID_REQUEST = -32700, -32600


@dataclass(frozen=True)
class BadFrame:
    """Why a frame is refused, and the reply that says so."""

    code: int
    message: str
    id: str | int | None = None

    def reply(self) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": self.message}}


def check_frame(frame: str | bytes) -> BadFrame | None:
    """None when `frame` is one JSON-RPC message the SDK accepts; else what is wrong with it."""
    try:
        message = json.loads(frame)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return BadFrame(PARSE_ERROR, f"Parse error: not JSON ({str(exc).split(':')[0]})")
    if isinstance(message, list):
        return BadFrame(
            INVALID_REQUEST, "Invalid Request: a JSON-RPC message is an object (batches are not supported)"
        )
    if not isinstance(message, dict):
        return BadFrame(INVALID_REQUEST, "Invalid Request: a JSON-RPC message is an object")
    request = "method" in message
    # Only a request's id is echoed: a response's id names one of the server's own requests.
    usable_id = request and _is_id(message.get("id"))
    problem = _problem(message, request)
    if problem is None:
        try:
            jsonrpc_message_adapter.validate_python(message, by_name=False)
        except ValidationError:  # what the checks above do not name: still one line, no dump
            problem = "not a JSON-RPC message this server accepts"
    if problem is None:
        return None
    return BadFrame(INVALID_REQUEST, f"Invalid Request: {problem}", message["id"] if usable_id else None)


def _problem(message: dict[str, Any], request: bool) -> str | None:
    if message.get("jsonrpc") != "2.0":
        return '"jsonrpc" must be "2.0"'
    if request:
        if not isinstance(message["method"], str):
            return '"method" must be a string'
        if "id" in message and not _is_id(message["id"]):
            return '"id" must be a string or an integer'
        if "params" in message and not isinstance(message["params"], dict):
            return '"params" must be an object'
        return None
    if "id" not in message or not ("result" in message or "error" in message):
        return 'a request needs "method", a response "id" and "result" or "error"'
    if "result" in message and not isinstance(message["result"], dict):
        return '"result" must be an object'
    return None


def _is_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)
