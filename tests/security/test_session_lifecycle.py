"""Sessions a client abandons: they end by themselves, limits say how to end them, a reconnecting client
finds its own, and no workspace outlives its server (a stdio server's exit, a killed server's leftovers)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from cuda_agent_mcp.server.jobs import JobBoard
from cuda_agent_mcp.server.sessions import SessionRegistry
from cuda_agent_mcp.tasks import TaskCatalog
from tests.security.conftest import (
    ALICE,
    BOB,
    Server,
    require_view,
    server_environment,
    start,
    start_http,
    stop,
    text,
)

CLIENTS = {f"client{i}": f"client{i}-" + "c" * 24 for i in range(4)}  # with alice and bob


def _http(tmp_path: Path, cache: Path, *args: str) -> Server:
    require_view()
    home, tokens, env = server_environment(tmp_path, cache)
    with tokens.open("a") as table:
        table.writelines(f"{name} {token}\n" for name, token in CLIENTS.items())
    root = tmp_path / "sessions"
    return start_http(Server("http", home, root, cache, tokens, env, args=["--root", str(root), *args]))


def test_abandoned_sessions_end_when_idle_so_neither_their_client_nor_others_stay_locked_out(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    # The idle time-out must outlast filling the server (256 sessions; over 6 s on a slow CI machine),
    # or the first client's sessions end before the server is full.
    idle_s = 30.0
    server = _http(tmp_path, shared_build_cache, "--session-idle-timeout", f"{idle_s:g}")

    async def fill(token: str, count: int) -> list[dict]:
        async with server.client(token) as client:
            return [await start(client) for _ in range(count)]

    async def refused(token: str) -> str:
        async with server.client(token) as client:
            answer = await client.call_tool("start_session", {"task_id": "examples/relu"})
            assert answer.is_error
            return text(answer)

    async def work():  # type: ignore[no-untyped-def]
        began = time.monotonic()
        alice = await fill(ALICE, 64)
        own_limit = await refused(ALICE)
        for name in ("client0", "client1", "client2"):  # 64 + 3 x 64 = 256: the server is full
            await fill(CLIENTS[name], 64)
        last_start = time.monotonic()
        server_limit = await refused(CLIENTS["client3"])
        assert last_start - began < idle_s, "filling the server outlasted the idle time-out"
        # Everyone disappears: the last session ends one time-out after its start, once the reaper
        # (every time-out / 4) looks, plus a margin.
        await anyio.sleep(max(0.0, last_start + idle_s * 1.25 + 3 - time.monotonic()))
        again = await fill(BOB, 1)
        return alice, own_limit, server_limit, again

    try:
        alice, own_limit, server_limit, again = anyio.run(work)
    finally:
        stop(server)
    assert "at most 64 sessions" in own_limit and "end_session" in own_limit and "list_sessions" in own_limit
    assert "at most 256 sessions" in server_limit and "idle sessions end by themselves" in server_limit
    assert again and not any(Path(s["workspace"]).exists() for s in alice)


def test_a_reconnecting_client_lists_its_own_sessions_and_no_one_elses(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    server = _http(tmp_path, shared_build_cache)

    async def work():  # type: ignore[no-untyped-def]
        async with server.client(ALICE) as alice:
            mine = {(await start(alice))["session_id"] for _ in range(2)}
        async with server.client(ALICE) as alice:
            listed = (await alice.call_tool("list_sessions", {})).structured_content
        async with server.client(BOB) as bob:
            theirs = (await bob.call_tool("list_sessions", {})).structured_content
        return mine, listed, theirs

    try:
        mine, listed, theirs = anyio.run(work)
    finally:
        stop(server)
    assert {s["session_id"] for s in listed["sessions"]} == mine
    assert all(0 < s["ends_in_s"] <= 3600 for s in listed["sessions"])
    assert theirs["sessions"] == []


@pytest.mark.parametrize("mode", ["remove", "keep", "archive"])
def test_a_stdio_server_removes_its_workspaces_at_exit_unless_told_otherwise(
    mode: str, tmp_path: Path, shared_build_cache: Path
) -> None:
    require_view()
    _, _, env = server_environment(tmp_path, shared_build_cache)
    archive = tmp_path / "archive"
    args = ["-m", "cuda_agent_mcp", "serve", "--root", str(tmp_path / "sessions")]
    args += {"remove": [], "keep": ["--keep-workspaces"], "archive": ["--archive-sessions", str(archive)]}[
        mode
    ]

    async def work():  # type: ignore[no-untyped-def]
        async with Client(StdioServerParameters(command=sys.executable, args=args, env=env)) as client:
            return await start(client)

    workspace = Path(anyio.run(work)["workspace"])
    deadline = time.monotonic() + 20  # the server ends its sessions as it exits
    while time.monotonic() < deadline and workspace.exists() != (mode == "keep"):
        time.sleep(0.2)
    assert workspace.exists() == (mode == "keep")
    if mode == "archive":
        kept = list(archive.iterdir())
        assert len(kept) == 1 and kept[0].name.startswith(workspace.name) and (kept[0] / "model.py").is_file()


def test_the_workspaces_of_a_killed_server_are_removed_by_the_next_one(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    first = _http(tmp_path, shared_build_cache)

    async def open_one(server: Server) -> dict:
        async with server.client(ALICE) as alice:
            return await start(alice)

    left = Path(anyio.run(open_one, first)["workspace"])
    assert first.process is not None
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait()
    assert left.exists()
    second = _http(tmp_path, shared_build_cache)
    try:
        assert not left.exists() and not left.parent.exists()
        assert Path(anyio.run(open_one, second)["workspace"]).exists()
    finally:
        stop(second)


def test_an_idle_session_has_its_running_jobs_cancelled(tmp_path: Path) -> None:
    registry = SessionRegistry(tmp_path / "sessions", TaskCatalog(), idle_timeout_s=0.5)
    jobs = JobBoard()
    registry.on_end = jobs.cancel_session
    session = registry.start(task_id="examples/relu")

    async def forever(progress):  # type: ignore[no-untyped-def]
        await anyio.sleep(3600)

    job = jobs.start("verify", session.id, "local", forever)
    deadline = time.monotonic() + 10  # the reaper looks twice a second here
    while time.monotonic() < deadline and session.workspace.root.exists():
        time.sleep(0.1)
    assert registry.ids() == [] and not session.workspace.root.exists()
    assert jobs.state(job, "local").status == "cancelled"


HUNG_CANDIDATE = (
    "import time\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        time.sleep(3600)\n"
)


def test_another_client_cannot_read_wait_for_or_cancel_a_clients_session_or_job(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """The server's own tools (sessions and jobs) answer for the calling client only: Bob, who has read
    Alice's session and job ids off the wire, gets "no such session/job" for each of them."""
    server = _http(tmp_path, shared_build_cache, "--tool-budget", "1")
    verify = {"device": "cpu", "audit": False, "trials": 1, "call_timeout_s": 600.0, "timeout_s": 600.0}

    async def work():  # type: ignore[no-untyped-def]
        async with server.client(ALICE) as alice:
            session = (await start(alice))["session_id"]
            wrote = await alice.call_tool(
                "write_file", {"session_id": session, "path": "model_new.py", "content": HUNG_CANDIDATE}
            )
            assert not wrote.is_error, text(wrote)
            running = await alice.call_tool("verify", {"session_id": session, "request": verify})
            assert running.structured_content["status"] == "running", text(running)
            job = running.structured_content["job"]["job_id"]
        async with server.client(BOB) as bob:
            tries = [
                await bob.call_tool("wait_job", {"job_id": job, "timeout_s": 0}),
                await bob.call_tool("cancel_job", {"job_id": job}),
                await bob.call_tool("session_status", {"session_id": session}),
                await bob.call_tool("end_session", {"session_id": session}),
            ]
        async with server.client(ALICE) as alice:
            still = await alice.call_tool("wait_job", {"job_id": job, "timeout_s": 0})
            cancelled = await alice.call_tool("cancel_job", {"job_id": job})
        return tries, still, cancelled

    try:
        tries, still, cancelled = anyio.run(work)
    finally:
        stop(server)
    assert all(t.is_error for t in tries), [text(t) for t in tries]
    assert [("no job" in text(t), "no session" in text(t)) for t in tries] == [
        (True, False), (True, False), (False, True), (False, True)
    ]  # fmt: skip
    assert not still.is_error and still.structured_content["status"] == "running"
    assert not cancelled.is_error and cancelled.structured_content["status"] == "cancelled"
