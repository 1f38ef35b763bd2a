"""Long tool calls through the SDK client: past the budget a job handle, completed by wait_job; a job is
stopped by cancel_job or by the client cancelling its call; a client's running jobs are limited."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from cuda_agent_mcp.server.app import build_server
from cuda_agent_mcp.server.jobs import JobBoard
from cuda_agent_mcp.server.sessions import SessionRegistry
from cuda_agent_mcp.tasks import TaskCatalog
from tests.conftest import EXAMPLES
from tests.server.test_mcp_server import SMALL_RELU

pytestmark = pytest.mark.nvcc

# A correct candidate that takes its time (0.4 s a call), and one that never returns.
SLOW = (
    "import time\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        time.sleep(0.4)\n        return x.clamp_min(0)\n"
)
HUNG = SLOW.replace("time.sleep(0.4)", "time.sleep(3600)")
CPU = {"device": "cpu", "audit": False, "trials": 2, "call_timeout_s": 600.0, "timeout_s": 600.0}


def _server(tmp_path: Path, cache: Path, board: JobBoard):
    registry = SessionRegistry(tmp_path / "sessions", TaskCatalog(), cache_dir=cache)
    return build_server(registry, jobs=board)


async def _session(client: Client, model_new: str) -> str:
    started = await client.call_tool("start_session", {"reference_source": SMALL_RELU})
    session = started.structured_content["session_id"]
    for name in ("relu.cu", "relu_binding.cpp"):
        text = (EXAMPLES / "relu" / "kernels" / name).read_text()
        await client.call_tool(
            "write_file", {"session_id": session, "path": f"kernels/{name}", "content": text}
        )
    await client.call_tool(
        "write_file", {"session_id": session, "path": "model_new.py", "content": model_new}
    )
    built = await client.call_tool("compile", {"session_id": session})
    if built.structured_content["status"] == "running":  # a cold build takes longer than the budget
        job_id = built.structured_content["job"]["job_id"]
        while (await client.call_tool("wait_job", {"job_id": job_id})).structured_content[
            "status"
        ] == "running":
            pass
    return session


async def _history(client: Client, session: str) -> list[dict]:
    status = await client.call_tool("session_status", {"session_id": session})
    return status.structured_content["history"]


def test_a_verify_past_the_budget_hands_back_a_job_that_wait_job_completes(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    board = JobBoard(budget_s=1.0)

    async def work():
        async with Client(_server(tmp_path, shared_build_cache, board)) as client:
            session = await _session(client, SLOW)
            started = time.monotonic()
            answer = await client.call_tool("verify", {"session_id": session, "request": CPU})
            answered_s = time.monotonic() - started
            assert answer.structured_content["status"] == "running", answer.content
            job = answer.structured_content["job"]
            assert job["kind"] == "verify" and "wait_job" in job["message"]
            states = []
            for _ in range(300):
                waited = await client.call_tool("wait_job", {"job_id": job["job_id"], "timeout_s": 30})
                assert not waited.is_error, waited.content
                states.append(waited.structured_content)
                if states[-1]["status"] != "running":
                    break
            return answered_s, states, await _history(client, session)

    answered_s, states, history = anyio.run(work)
    assert answered_s < 10  # the budget, not the work, decided when the call answered
    final = states[-1]
    assert final["status"] == "done", final
    assert final["result"]["verdict"]["status"] == "passed" and final["elapsed_s"] > 1.0
    assert final["progress"] == {"phase": "done", "percent": 100, "message": final["progress"]["message"]}
    assert all(s["status"] == "running" for s in states[:-1])
    assert history[0]["kind"] == "verify" and history[0]["status"] == "done"  # journaled as any verify


def test_wait_job_waits_its_own_timeout_and_says_where_the_job_is(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    board = JobBoard(budget_s=1.0)

    async def work():
        async with Client(_server(tmp_path, shared_build_cache, board)) as client:
            session = await _session(client, HUNG)
            answer = await client.call_tool("verify", {"session_id": session, "request": CPU})
            job_id = answer.structured_content["job"]["job_id"]
            started = time.monotonic()
            waited = await client.call_tool("wait_job", {"job_id": job_id, "timeout_s": 4})
            waited_s = time.monotonic() - started
            cancelled = await client.call_tool("cancel_job", {"job_id": job_id})
            return waited, waited_s, cancelled

    waited, waited_s, cancelled = anyio.run(work)
    # The caller's timeout, not the server's 1 s budget per call, decided when wait_job answered.
    assert 4 <= waited_s < 12, waited_s
    state = waited.structured_content
    assert state["status"] == "running"
    # Built (a cache hit), then the judge runs: the second of verify's two steps.
    assert state["progress"]["phase"] == "verify" and state["progress"]["percent"] == 50, state
    assert "judge" in state["progress"]["message"]
    assert cancelled.structured_content["status"] == "cancelled"
    assert "result" not in cancelled.structured_content  # cancel_job answers with the state alone


def test_cancel_job_stops_a_hung_job_and_the_journal_records_it(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    board = JobBoard(budget_s=1.0)

    async def work():
        async with Client(_server(tmp_path, shared_build_cache, board)) as client:
            session = await _session(client, HUNG)
            answer = await client.call_tool("verify", {"session_id": session, "request": CPU})
            job_id = answer.structured_content["job"]["job_id"]
            started = time.monotonic()
            cancelled = await client.call_tool("cancel_job", {"job_id": job_id})
            cancel_s = time.monotonic() - started
            unknown = await client.call_tool("wait_job", {"job_id": "nope"})
            return cancelled.structured_content, cancel_s, unknown, await _history(client, session)

    cancelled, cancel_s, unknown, history = anyio.run(work)
    assert cancelled["status"] == "cancelled" and cancel_s < 15
    assert unknown.is_error and "no job 'nope'" in unknown.content[0].text
    assert history[0]["kind"] == "verify" and history[0]["status"] == "failed"
    assert "Cancel" in (history[0]["error"] or "")


def test_a_client_cancelling_its_call_stops_the_job(tmp_path: Path, shared_build_cache: Path) -> None:
    board = JobBoard(budget_s=600.0)

    async def work():
        async with Client(_server(tmp_path, shared_build_cache, board)) as client:
            session = await _session(client, HUNG)
            with anyio.move_on_after(8):  # the client gives up on the call: the SDK sends cancellation
                await client.call_tool("verify", {"session_id": session, "request": CPU})
            for _ in range(100):
                history = await _history(client, session)
                if history and history[0]["status"] != "running":
                    break
                await anyio.sleep(0.2)
            return history

    history = anyio.run(work)
    assert history[0]["kind"] == "verify" and history[0]["status"] == "failed", history[0]
    assert all(job.ended.is_set() for job in board._jobs.values())


def test_a_client_may_run_only_so_many_jobs_at_once(tmp_path: Path, shared_build_cache: Path) -> None:
    board = JobBoard(budget_s=1.0, max_running_per_client=1)

    async def work():
        async with Client(_server(tmp_path, shared_build_cache, board)) as client:
            session = await _session(client, HUNG)
            first = await client.call_tool("verify", {"session_id": session, "request": CPU})
            second = await client.call_tool("verify", {"session_id": session, "request": CPU})
            await client.call_tool("cancel_job", {"job_id": first.structured_content["job"]["job_id"]})
            return first, second

    first, second = anyio.run(work)
    assert first.structured_content["status"] == "running"
    assert second.is_error and "at most 1 jobs running in the background" in second.content[0].text
