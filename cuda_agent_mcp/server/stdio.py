"""The MCP server over stdio, with every bad frame answered (the SDK's transport drops them unanswered).

The SDK's `stdio_server` turns a line it cannot parse into an exception its dispatcher only logs, and
reads a request whose id is not a string or an integer as a notification: the client waits forever.
Here each line is checked first (`frames.check_frame`); a bad one gets its JSON-RPC error on stdout,
through the SDK's own writer, and the session goes on. Good lines go to the SDK unchanged.

With stdin handed to it, the SDK leaves fd 0 alone, so this claims it the way the SDK would: the wire
moves to a private descriptor and fd 0 reads /dev/null, so no handler or child reads the protocol.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import AsyncIterator, Iterator
from io import TextIOWrapper
from typing import IO, Any, cast

import anyio
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import WriteStream
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError

from cuda_agent_mcp.server.frames import check_frame


def serve_stdio(server: MCPServer) -> None:
    """`server.run()` for stdio, answering bad frames (see the module docstring)."""
    anyio.run(_serve, server)


async def _serve(server: MCPServer) -> None:
    with _claimed_stdin() as wire:
        lines = _CheckedLines(anyio.wrap_file(TextIOWrapper(wire, encoding="utf-8", errors="replace")))
        async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
            lines.replies = write_stream
            lines.ready.set()
            lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs; no public handle
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


class _CheckedLines:
    """The protocol's lines, good ones yielded to the SDK's reader, bad ones answered here."""

    def __init__(self, lines: anyio.AsyncFile[str]) -> None:
        self.lines = lines
        self.replies: WriteStream[SessionMessage] | None = None
        self.ready = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self.lines:
            if not line.strip():
                continue  # not a frame: nothing to answer
            bad = check_frame(line)
            if bad is None:
                yield line
                continue
            await self.ready.wait()
            assert self.replies is not None
            error = JSONRPCError.model_validate(bad.reply())
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self.replies.send(SessionMessage(error))


@contextlib.contextmanager
def _claimed_stdin() -> Iterator[IO[bytes]]:
    try:
        wire = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:  # no descriptor to move: read fd 0 in place
        with os.fdopen(0, "rb", closefd=False) as stdin:
            yield stdin
        return
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        # Never closed: the reader thread may still block on it after the transport exits.
        yield os.fdopen(wire, "rb", closefd=False)
    finally:
        os.dup2(wire, 0)
