"""The HTTP front door, in front of the SDK's app: throttled authentication, and JSON-RPC errors with a
message for requests the SDK would answer with plain text or a validation dump.

- A request with a valid bearer token always passes. One without (missing or wrong) counts against its
  client address: an address with `max_failures` refused authentications (401) in the last minute gets
  429 with `Retry-After` for its token-less requests until its window clears. Throttled is what failed,
  not who shares the address: behind a reverse proxy every client has the proxy's address, and one
  client guessing tokens must not lock the others out of their sessions.
- A POST body over the limit is answered 413 with a JSON-RPC error (-32600) saying the limit; a body
  that is not JSON is -32700; one that is not a JSON-RPC message is -32600 naming what is wrong
  (`frames.check_frame`, the check stdio uses too). Everything else goes to the SDK unchanged.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp.server.auth.provider import TokenVerifier

from cuda_agent_mcp.server.frames import INVALID_REQUEST, BadFrame, check_frame

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

WINDOW_S = 60.0


class FailedAuthThrottle:
    """Refused authentications per client address, over a sliding minute."""

    def __init__(self, max_failures: int = 10) -> None:
        self.max_failures = max_failures
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def retry_after_s(self, address: str) -> float:
        """0 when `address` may try; else how long until its oldest failure leaves the window."""
        now = time.monotonic()
        with self._lock:
            failures = self._failures.get(address)
            if not failures:
                return 0.0
            while failures and now - failures[0] > WINDOW_S:
                failures.popleft()
            if len(failures) < self.max_failures:
                return 0.0
            return WINDOW_S - (now - failures[0])

    def failed(self, address: str) -> None:
        with self._lock:
            self._failures.setdefault(address, deque()).append(time.monotonic())
            if len(self._failures) > 10000:  # many addresses: forget the quiet ones
                for key in [k for k, v in self._failures.items() if not v][:5000]:
                    del self._failures[key]


class HttpGuard:
    """ASGI middleware around the MCP app (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        throttle: FailedAuthThrottle | None,
        tokens: TokenVerifier | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.throttle = throttle
        self.tokens = tokens  # the app's own verifier: a valid token is never throttled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        address = (scope.get("client") or ("unknown", 0))[0]
        throttled = self.throttle is not None and not await self._valid_token(scope)
        if throttled and self.throttle is not None and (wait := self.throttle.retry_after_s(address)) > 0:
            message = (
                f"too many failed authentications from {address}: retry in {wait:.0f} s with a valid token"
            )
            retry = {"retry-after": str(max(1, round(wait)))}
            await _reply(send, 429, BadFrame(INVALID_REQUEST, message), retry)
            return
        if scope.get("method") == "POST":
            body = await _read_body(receive, self.max_body_bytes)
            if body is None:
                message = f"request body larger than {self.max_body_bytes} bytes: send a smaller request"
                await _reply(send, 413, BadFrame(INVALID_REQUEST, message))
                return
            bad = check_frame(body)
            if bad is not None:
                await _reply(send, 400, bad)
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, self._watch(send, address) if throttled else send)

    async def _valid_token(self, scope: Scope) -> bool:
        """Whether the request's bearer token is one the app accepts, read as the SDK's
        `BearerAuthBackend` reads it (no verifier: none is)."""
        header = next(
            (v.decode("latin-1") for k, v in scope.get("headers") or () if k.lower() == b"authorization"), ""
        )
        if self.tokens is None or not header.lower().startswith("bearer "):
            return False
        access = await self.tokens.verify_token(header[7:])
        return access is not None and not (access.expires_at and access.expires_at < int(time.time()))

    def _watch(self, send: Send, address: str) -> Send:
        if self.throttle is None:
            return send
        throttle = self.throttle

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message.get("status") == 401:
                throttle.failed(address)
            await send(message)

        return watched


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None once it passes `limit` (the rest is not read)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, original: Receive) -> Receive:
    """The body once, then the connection's own messages (a streamed response waits on its disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return await original()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def _reply(send: Send, status: int, frame: BadFrame, headers: dict[str, str] | None = None) -> None:
    body = json.dumps(frame.reply()).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def run_http(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    tokens: TokenVerifier | None = None,
    max_body_bytes: int = 4 * 1024 * 1024,
    max_failed_auth: int = 10,
) -> None:
    """Serve the SDK's streamable HTTP app behind the guard until interrupted; `tokens` is the app's
    verifier (None: the app asks for no token)."""
    import uvicorn

    guarded = HttpGuard(
        app, max_body_bytes=max_body_bytes, throttle=FailedAuthThrottle(max_failed_auth), tokens=tokens
    )
    uvicorn.run(guarded, host=host, port=port, log_level="warning")
