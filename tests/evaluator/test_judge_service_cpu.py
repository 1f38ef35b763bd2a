"""Warm judge servers: reuse across jobs, recovery after a hung job, and a pool of fresh workers."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.evaluation import judge_service
from cuda_agent_mcp.evaluation.judge_service import JudgePool
from cuda_agent_mcp.results import Passed, WrongOutput
from cuda_agent_mcp.tools import Session, VerifyRequest, verify_kernels
from cuda_agent_mcp.tools.evaluate import JudgeFailed
from cuda_agent_mcp.tools.session import judge_env
from cuda_agent_mcp.wire.refs import FAMILY_CHARS, remove_judge_shm
from tests.evaluator.test_tools_cpu import TORCH_CANDIDATE, cpu_session
from tests.processes import alive, children, cmdline

pytestmark = pytest.mark.nvcc

CPU_VERIFY = VerifyRequest(device="cpu", trials=2, audit=False, call_timeout_s=5.0)


@pytest.fixture
def pool(tmp_path: Path):
    judges = JudgePool(tmp_path / "logs")
    yield judges
    judges.close()


@pytest.fixture
def session(tmp_path: Path, shared_build_cache: Path, pool: JudgePool) -> Session:
    return cpu_session(tmp_path, shared_build_cache, judges=pool)


def _write_candidate(session: Session, suffix: str = "") -> None:
    (session.workspace.root / "model_new.py").write_text(TORCH_CANDIDATE.replace("{suffix}", suffix))


def test_one_judge_server_serves_consecutive_jobs_and_each_job_gets_a_fresh_worker(
    session: Session, pool: JudgePool, tmp_path: Path
) -> None:
    # The candidate notes the process it was loaded in (pid, parent pid).
    record = Path("/dev/shm") / f"cuda-agent-test-loaded-in-{tmp_path.name}.txt"  # writable in its view
    note = f"\nimport os\nopen({str(record)!r}, 'a').write(f'{{os.getpid()}} {{os.getppid()}}\\n')\n"
    (session.workspace.root / "model_new.py").write_text(TORCH_CANDIDATE.replace("{suffix}", "") + note)
    first = anyio.run(lambda: verify_kernels(session, CPU_VERIFY))
    assert isinstance(first.verdict, Passed), first.verdict
    assert first.phases_s["judge_start"] > 0
    server = next(iter(pool._idle.values()))[0]

    (session.workspace.root / "model_new.py").write_text(TORCH_CANDIDATE.replace("{suffix}", " + 0.5") + note)
    second = anyio.run(lambda: verify_kernels(session, CPU_VERIFY))
    assert isinstance(second.verdict, WrongOutput), second.verdict
    assert pool.started == 1 and second.phases_s["judge_start"] == 0.0
    # Each job loaded the candidate in a process of its own, forked by the server's fork server (a
    # child of the judge server), and gone once its job ended.
    # A judge started as the worker uid has a /dev/shm of its own: the record is read through its root.
    record = Path(f"/proc/{server.process.pid}/root{record}")
    loads = [tuple(map(int, line.split())) for line in record.read_text().splitlines()]
    record.unlink()
    assert len(loads) == 2 and loads[0][0] != loads[1][0]
    fork_servers = {parent for _, parent in loads}
    assert len(fork_servers) == 1 and fork_servers <= children(server.process.pid)
    assert not any(alive(pid) for pid, _ in loads)
    assert children(fork_servers.pop()) == set()


def test_the_pool_keeps_as_many_warm_judges_as_jobs_ran_at_once(session: Session, pool: JudgePool) -> None:
    _write_candidate(session)

    async def two_at_once() -> list[object]:
        verdicts: list[object] = []

        async def one() -> None:
            verdicts.append((await verify_kernels(session, CPU_VERIFY)).verdict)

        async with anyio.create_task_group() as group:
            group.start_soon(one)
            group.start_soon(one)
        return verdicts

    first = anyio.run(two_at_once)
    assert all(isinstance(v, Passed) for v in first), first
    assert pool.started == 2 and sum(len(idle) for idle in pool._idle.values()) == 2
    second = anyio.run(two_at_once)
    assert all(isinstance(v, Passed) for v in second), second
    assert pool.started == 2  # the second pair found both servers warm


def test_a_judge_started_ahead_serves_the_next_job_and_an_unclaimed_one_is_closed(
    session: Session, pool: JudgePool, tmp_path: Path
) -> None:
    _write_candidate(session)
    env = judge_env(None)
    assert pool.prewarm(env) is True
    assert pool.prewarm(env) is False  # one is starting already
    result = anyio.run(lambda: verify_kernels(session, CPU_VERIFY))
    assert isinstance(result.verdict, Passed), result.verdict
    assert pool.started == 1  # the job claimed the server started ahead instead of starting its own

    other = JudgePool(tmp_path / "other-logs")
    assert other.prewarm(env) is True
    starting = next(iter(other._starting.values()))
    other.close()  # closed while it starts: waited for, then closed, not left behind
    server = starting.result(timeout=0)
    assert other.started == 1 and not alive(server.process.pid)


def test_a_hung_job_kills_its_judge_and_the_next_job_gets_a_new_one(
    session: Session, pool: JudgePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    (session.workspace.root / "model_new.py").write_text(
        TORCH_CANDIDATE.replace("{suffix}", "")
        + "\nimport time\nModelNew.forward = lambda self, x: time.sleep(3600)\n"
    )
    hung = VerifyRequest(device="cpu", trials=1, audit=False, call_timeout_s=600.0, timeout_s=20.0)
    killed: list[str] = []

    def remove_and_note(tag: str) -> None:
        killed.append(tag)
        remove_judge_shm(tag)

    monkeypatch.setattr(judge_service, "remove_judge_shm", remove_and_note)
    with pytest.raises(JudgeFailed, match="longer than its limit"):
        anyio.run(lambda: verify_kernels(session, hung))
    assert not pool._idle.get(next(iter(pool._idle), ()), [])  # the hung server was not kept
    # The killed judge's shared inputs (and its worker's files) were removed for it. Only its family of
    # names counts: other processes on this machine may make files of their own meanwhile.
    assert killed, "the killed judge's shared memory was never cleaned up"
    left = [p for tag in killed for p in Path("/dev/shm").glob(f"cuda-agent-{tag[:FAMILY_CHARS]}*")]
    assert not left, left

    _write_candidate(session)
    result = anyio.run(lambda: verify_kernels(session, CPU_VERIFY))
    assert isinstance(result.verdict, Passed), result.verdict
    assert pool.started == 2


def test_closing_the_pool_ends_its_servers(session: Session, pool: JudgePool) -> None:
    _write_candidate(session)
    anyio.run(lambda: verify_kernels(session, CPU_VERIFY))
    server = next(iter(pool._idle.values()))[0]
    pool.close()
    assert server.process.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(server.process.pid, 0)


def test_cancelling_a_call_stops_its_judge_and_journals_the_cancellation(
    session: Session, pool: JudgePool
) -> None:
    (session.workspace.root / "model_new.py").write_text(
        TORCH_CANDIDATE.replace("{suffix}", "")
        + "\nimport time\nModelNew.forward = lambda self, x: time.sleep(3600)\n"
    )
    hung = VerifyRequest(device="cpu", trials=1, audit=False, call_timeout_s=3600, timeout_s=3600)

    async def cancel_after_the_job_starts() -> float:
        started = time.monotonic()
        with anyio.move_on_after(20):
            await verify_kernels(session, hung)
        return time.monotonic() - started

    waited = anyio.run(cancel_after_the_job_starts)
    assert waited < 60  # the cancellation was not held up by the hung job
    assert not any(pool._idle.values()) or not any(s.alive for idle in pool._idle.values() for s in idle)
    servers = [pid for pid in children(os.getpid()) if b"cuda_agent_mcp.judge" in cmdline(pid)]
    assert not servers, "the cancelled job's judge is still running"
    (latest, *_) = session.journal.records(session_id=session.id)
    assert latest.status == "failed" and "Cancel" in (latest.error or "")
