"""The MCP server over streamable HTTP, as a real process: bearer tokens, clients isolated from each other,
and many concurrent sessions."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import EXAMPLES, REPO

pytestmark = pytest.mark.nvcc

ALICE = "alice-" + "a" * 24
BOB = "bob-" + "b" * 24


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def url(tmp_path: Path, shared_build_cache: Path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# two clients\nalice {ALICE}\nbob {BOB}\n")
    port = _free_port()
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "CUDA_AGENT_CACHE": str(shared_build_cache),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "cuda_agent_mcp", "serve", "--http", f"127.0.0.1:{port}",
         "--tokens-file", str(tokens), "--root", str(tmp_path / "sessions")],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp"
    server.terminate()
    server.wait(timeout=20)


def _client(url: str, token: str):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=300)
    return http, Client(streamable_http_client(url, http_client=http))


def test_requests_without_a_valid_bearer_token_are_refused(url: str) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert httpx2.post(url, json=request).status_code == 401
    wrong = httpx2.post(url, json=request, headers={"Authorization": "Bearer " + "x" * 30})
    assert wrong.status_code == 401


def test_one_client_cannot_see_or_touch_another_clients_session(url: str) -> None:
    async def work():
        http, alice = _client(url, ALICE)
        async with http, alice:
            started = await alice.call_tool("start_session", {"task_id": "examples/relu"})
            session = started.structured_content["session_id"]
        http, bob = _client(url, BOB)
        async with http, bob:
            read = await bob.call_tool("read_file", {"session_id": session, "path": "model.py"})
            ended = await bob.call_tool("end_session", {"session_id": session})
        http, alice = _client(url, ALICE)
        async with http, alice:
            mine = await alice.call_tool("read_file", {"session_id": session, "path": "model.py"})
        return read, ended, mine

    read, ended, mine = anyio.run(work)
    assert read.is_error and "no session" in read.content[0].text
    assert ended.is_error
    assert not mine.is_error and "class Model" in mine.structured_content["content"]


def test_thirty_two_concurrent_sessions_compile_without_failure(url: str) -> None:
    kernels = {
        name: (EXAMPLES / "relu" / "kernels" / name).read_text() for name in ("relu.cu", "relu_binding.cpp")
    }

    async def one(client: Client, results: list) -> None:
        started = await client.call_tool("start_session", {"task_id": "examples/relu"})
        session = started.structured_content["session_id"]
        # Full isolation: every session's commands and builds run in a view, as a uid of their own.
        assert {"filesystem", "pid", "network"} <= set(started.structured_content["isolation"])
        for name, text in kernels.items():
            await client.call_tool(
                "write_file", {"session_id": session, "path": f"kernels/{name}", "content": text}
            )
        built = await client.call_tool("compile", {"session_id": session})
        # A cold cache on a loaded machine may pass the budget: then the job handle is followed.
        content = await _wait(client, built) if not built.is_error else {}
        results.append((built.is_error, content.get("ok"), content.get("summary") or built.content))

    async def work():
        results: list = []
        http, client = _client(url, ALICE)
        async with http, client, anyio.create_task_group() as group:
            for _ in range(32):
                group.start_soon(one, client, results)
        return results

    results = anyio.run(work)
    assert len(results) == 32
    assert all(not is_error and ok for is_error, ok, _ in results), results[:3]


async def _wait(client: Client, answer) -> dict:  # type: ignore[no-untyped-def]
    """A tool's outcome, following its job handle through wait_job when it ran past the budget."""
    assert not answer.is_error, answer.content
    state = answer.structured_content
    while state["status"] == "running":
        waited = await client.call_tool("wait_job", {"job_id": state["job"]["job_id"], "timeout_s": 45})
        assert not waited.is_error, waited.content
        state = waited.structured_content
    assert state["status"] == "done", state
    return state["result"]


@pytest.mark.gpu
def test_a_full_session_over_http_scores_a_correct_kernel_and_a_wrong_one(url: str) -> None:
    root = EXAMPLES / "bias_add_relu"
    correct = {"model_new.py": (root / "model_new.py").read_text()}
    correct |= {f"kernels/{p.name}": p.read_text() for p in (root / "kernels").iterdir()}
    wrong = dict(correct)
    wrong["kernels/bias_add_relu.cu"] = correct["kernels/bias_add_relu.cu"].replace(
        "x[i] + __ldg(bias + i % features)", "x[i]"
    )
    assert wrong != correct

    async def evaluate(client: Client, session: str, files: dict[str, str]) -> dict:
        for path, text in files.items():
            written = await client.call_tool(
                "write_file", {"session_id": session, "path": path, "content": text}
            )
            assert not written.is_error, written.content
        return await _wait(client, await client.call_tool("evaluate", {"session_id": session}))

    async def work():
        http, client = _client(url, ALICE)
        async with http, client:
            started = await client.call_tool("start_session", {"task_id": "examples/bias_add_relu"})
            session = started.structured_content["session_id"]
            return await evaluate(client, session, correct), await evaluate(client, session, wrong)

    good, bad = anyio.run(work)
    print(
        "correct kernel:",
        good["reward"],
        good["profile"]["speedup_vs_eager"],
        good["profile"]["speedup_vs_compile"],
    )
    print(
        "wrong kernel:",
        bad["reward"],
        bad["verify"]["verdict"]["status"],
        bad["verify"]["verdict"].get("message"),
    )
    assert good["verify"]["verdict"]["status"] == "passed" and good["reward"] >= 1
    assert bad["reward"] == -1 and bad["verify"]["verdict"]["status"] == "wrong_output"
