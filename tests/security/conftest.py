"""A real server for hostile clients: `cuda-agent serve` started by the test, over stdio or HTTP, spoken to
with the official MCP SDK client.

The server runs with a home directory of its own holding secrets an attacker would want (an SSH key,
the bearer-token file), so a test can check that no agent command reaches them. Where this machine
cannot build the sandbox's view the tests skip, saying why; with CUDA_AGENT_REQUIRE_SANDBOXES=1 (CI)
they fail instead.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import REPO
from tests.sandbox.conftest import unavailable

ALICE = "alice-" + "a" * 26
BOB = "bob-" + "b" * 28
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY----- the server's own key, never an agent's"


def require_view() -> None:
    from cuda_agent_mcp.executors.sandboxed import view_backend, view_problems

    if view_backend() is None:
        unavailable(f"no sandbox view can be built here: {view_problems()}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Server:
    """How to reach one server under test, and where its secrets and state are."""

    transport: str
    home: Path
    root: Path
    cache: Path
    tokens_file: Path
    env: dict[str, str]
    args: list[str] = field(default_factory=list)
    url: str = ""
    process: subprocess.Popen[bytes] | None = None

    @property
    def journal(self) -> Path:
        """The server's journal: its user's own, in the state directory of its home (never the cache)."""
        return self.home / ".local" / "state" / "cuda-agent-mcp" / "journal.sqlite"

    @contextlib.asynccontextmanager
    async def client(self, token: str = ALICE) -> AsyncIterator[Client]:
        if self.transport == "stdio":
            parameters = StdioServerParameters(
                command=sys.executable, args=["-m", "cuda_agent_mcp", "serve", *self.args], env=self.env
            )
            async with Client(parameters) as client:
                yield client
            return
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=600)
        async with http, Client(streamable_http_client(self.url, http_client=http)) as client:
            yield client


def server_environment(tmp_path: Path, cache: Path, **extra: str) -> tuple[Path, Path, dict[str, str]]:
    home = tmp_path / "server-home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "id_ed25519").write_text(SSH_KEY + "\n")
    tokens = home / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n")
    tokens.chmod(0o600)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "CUDA_AGENT_CACHE": str(cache),
        **extra,
    }
    return home, tokens, env


def start_http(server: Server, *extra_args: str) -> Server:
    port = free_port()
    argv = [sys.executable, "-m", "cuda_agent_mcp", "serve", "--http", f"127.0.0.1:{port}"]
    argv += ["--tokens-file", str(server.tokens_file), *server.args, *extra_args]
    process = subprocess.Popen(argv, env=server.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if process.poll() is not None:
                raise AssertionError((process.stderr.read() if process.stderr else b"").decode()) from None
            time.sleep(0.2)
    server.process, server.url = process, f"http://127.0.0.1:{port}/mcp"
    return server


def serve_http(tmp_path: Path, cache: Path, *args: str, env: dict[str, str] | None = None) -> Server:
    """A fresh HTTP server with the test's secrets in its home, sessions under tmp_path/sessions."""
    home, tokens, environment = server_environment(tmp_path, cache)
    root = tmp_path / "sessions"
    server = Server(
        "http", home, root, cache, tokens, {**environment, **(env or {})}, args=["--root", str(root), *args]
    )
    return start_http(server)


def stop(server: Server) -> str:
    """Stop an HTTP server; what it printed on stderr."""
    if server.process is None or server.process.returncode is not None:
        return ""
    server.process.terminate()
    try:
        _, err = server.process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        server.process.kill()
        _, err = server.process.communicate()
    return err.decode(errors="replace")


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest, tmp_path: Path, shared_build_cache: Path) -> Iterator[Server]:
    """The server under test, over each transport (a fresh one per test)."""
    require_view()
    home, tokens, env = server_environment(tmp_path, shared_build_cache)
    root = tmp_path / "sessions"
    running = Server(request.param, home, root, shared_build_cache, tokens, env, args=["--root", str(root)])
    if request.param == "http":
        start_http(running)
    try:
        yield running
    finally:
        stop(running)


async def start(client: Client, task_id: str = "examples/relu") -> dict[str, Any]:
    started = await client.call_tool("start_session", {"task_id": task_id})
    assert not started.is_error, started.content
    return started.structured_content


async def run(client: Client, session: str, script: str, timeout_s: float = 60) -> Any:
    """The `run` tool with a bash script; the raw result (an error result when a quota was reached)."""
    request = {"argv": ["bash", "-c", script], "timeout_s": timeout_s}
    return await client.call_tool("run", {"session_id": session, "request": request})


def text(result: Any) -> str:
    return " ".join(getattr(part, "text", "") for part in result.content)
