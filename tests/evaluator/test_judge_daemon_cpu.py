"""The judge service: one per user and cache, reached only through a 0600 socket, reused by the next
process, replaced when the code changes, ended on request, when idle, and its job's judge killed when the
client hangs up."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.errors import JudgeFailed
from cuda_agent_mcp.evaluation import judge_client, service_wire
from cuda_agent_mcp.evaluation.job import EvalJob
from cuda_agent_mcp.evaluation.judge_client import (
    ServiceJudges,
    ensure_service,
    judges_for,
    query_status,
    stop_service,
)
from cuda_agent_mcp.evaluation.service_wire import (
    SERVICE_ENV,
    RunJob,
    StatusQuery,
    StopService,
    read_token,
    socket_path,
    token_path,
)
from cuda_agent_mcp.results import Passed
from cuda_agent_mcp.tools import VerifyRequest, verify_kernels
from cuda_agent_mcp.wire.protocol import encode, read_frame_body
from tests.evaluator.test_tools_cpu import TORCH_CANDIDATE, cpu_session
from tests.processes import alive, children

pytestmark = pytest.mark.nvcc

CPU_VERIFY = VerifyRequest(device="cpu", trials=2, audit=False, call_timeout_s=5.0)


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A service of this test's own (its cache directory is the test's), stopped afterwards."""
    cache = tmp_path / "service-cache"
    cache.mkdir()
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(cache))
    monkeypatch.setenv(SERVICE_ENV, "on")
    monkeypatch.setenv(service_wire.IDLE_ENV, "120")
    path = ensure_service(cache, start=True)
    assert path is not None
    yield path
    stop_service(path)


def _candidate(session, suffix: str = "") -> None:  # type: ignore[no-untyped-def]
    (session.workspace.root / "model_new.py").write_text(TORCH_CANDIDATE.replace("{suffix}", suffix))


def test_the_socket_is_the_users_alone_and_the_service_answers_status(service: Path) -> None:
    assert stat.S_IMODE(service.stat().st_mode) == 0o600
    directory = service.parent.stat()
    assert directory.st_uid == os.getuid() and stat.S_IMODE(directory.st_mode) == 0o700
    status = query_status(service)
    assert status is not None and status.uid == os.getuid() and status.jobs_run == 0
    assert status.code == service_wire.code_fingerprint()


def test_sessions_of_two_processes_share_the_services_warm_judge(
    service: Path, tmp_path: Path, shared_build_cache: Path
) -> None:
    judges = judges_for(Path(os.environ["CUDA_AGENT_CACHE"]))
    assert isinstance(judges, ServiceJudges) and judges.path == service
    session = cpu_session(tmp_path, shared_build_cache, judges=judges)
    _candidate(session)
    first = anyio.run(lambda: verify_kernels(session, CPU_VERIFY))
    assert isinstance(first.verdict, Passed), first.verdict
    assert first.phases_s["judge_start"] > 0

    # Another process (a second CLI call) gets the same warm judge: no start paid.
    script = (
        "import anyio, sys\n"
        "from pathlib import Path\n"
        "from cuda_agent_mcp.tools import Session, verify_kernels, VerifyRequest\n"
        "s = Session.open(sys.argv[1], cache_dir=Path(sys.argv[2]))\n"
        "r = anyio.run(lambda: verify_kernels(s, VerifyRequest(device='cpu', trials=2, audit=False, call_timeout_s=5.0)))\n"
        "print(r.verdict.status, r.phases_s['judge_start'], type(s.judges).__name__)\n"
    )
    _candidate(session, " + 0.5")
    done = subprocess.run(
        [sys.executable, "-c", script, str(session.workspace.root), str(shared_build_cache)],
        capture_output=True,
        text=True,
        timeout=240,
        # The same environment as this process (the pool's key): `-c` finds the package from the root.
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    status, judge_start, kind = done.stdout.split()
    assert (status, float(judge_start), kind) == ("wrong_output", 0.0, "ServiceJudges")
    after = query_status(service)
    assert after is not None and after.jobs_run == 2 and after.judges_started == 1


def test_a_client_that_hangs_up_mid_job_gets_its_judge_killed(
    service: Path, tmp_path: Path, shared_build_cache: Path
) -> None:
    session = cpu_session(tmp_path, shared_build_cache, judges=ServiceJudges(service))
    _candidate(session, " + __import__('time').sleep(60)")  # every call hangs

    async def cancelled_after_the_judge_started() -> None:
        with anyio.move_on_after(20):
            await verify_kernels(session, CPU_VERIFY.model_copy(update={"call_timeout_s": 120.0}))

    daemon = query_status(service)
    assert daemon is not None
    anyio.run(cancelled_after_the_judge_started)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and children(daemon.pid):
        time.sleep(0.1)
    assert not children(daemon.pid), "the judge doing the abandoned job still runs"
    assert query_status(service) is not None  # the service itself goes on


def test_another_code_version_is_replaced_and_stop_ends_the_service(
    service: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = query_status(service)
    assert before is not None
    cache = Path(os.environ["CUDA_AGENT_CACHE"])
    monkeypatch.setattr(service_wire, "code_fingerprint", lambda: "other-code")
    monkeypatch.setattr(judge_client, "code_fingerprint", lambda: "other-code")
    assert ensure_service(cache, start=False) is None  # not used: it runs other code
    assert ensure_service(cache, start=True) == service
    after = query_status(service)
    assert after is not None and after.pid != before.pid
    deadline = time.monotonic() + 10
    while alive(before.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(before.pid)
    assert stop_service(service)
    assert query_status(service) is None and not service.exists()


def test_an_idle_service_ends_by_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "idle-cache"
    cache.mkdir()
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(cache))
    monkeypatch.setenv(service_wire.IDLE_ENV, "1")
    path = ensure_service(cache, start=True)
    assert path is not None
    status = query_status(path)
    assert status is not None
    deadline = time.monotonic() + 20
    while alive(status.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(status.pid) and not path.exists()


def test_off_means_judges_of_the_process_own_and_a_dead_service_is_a_judge_failure(
    service: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shared_build_cache: Path
) -> None:
    monkeypatch.setenv(SERVICE_ENV, "off")
    assert not isinstance(judges_for(Path(os.environ["CUDA_AGENT_CACHE"])), ServiceJudges)
    gone = ServiceJudges(tmp_path / "nobody.sock")
    session = cpu_session(tmp_path, shared_build_cache, judges=gone)
    _candidate(session)
    with pytest.raises((JudgeFailed, OSError)):
        anyio.run(lambda: verify_kernels(session, CPU_VERIFY))


def test_a_directory_of_someone_else_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = tmp_path / "runtime"
    (runtime / "cuda-agent").mkdir(parents=True, mode=0o755)
    os.chmod(runtime / "cuda-agent", 0o755)  # readable by others: a planted socket could be listened on
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with pytest.raises(Exception, match="not a directory of uid"):
        socket_path(tmp_path)


def test_a_request_that_is_not_a_frame_gets_no_job_run(service: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(str(service))
        connection.sendall(b"\x00\x00\x00\x05hello")
        connection.settimeout(15)
        assert connection.recv(100) == b""  # closed without an answer
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(str(service))
        connection.sendall(encode(StatusQuery(token=read_token(service))))
        assert b'"status"' in read_frame_body(connection.fileno(), time.monotonic() + 10)
    status = query_status(service)
    assert status is not None and status.jobs_run == 0


def test_a_caller_without_the_services_token_gets_no_answer_and_no_judge(
    service: Path, tmp_path: Path, shared_build_cache: Path
) -> None:
    """A candidate of the user's own uid (a judge that could not start as the worker uid) can connect to
    the socket, but its Landlock view cannot read the token: without it, no request is answered, and
    no judge is started with an environment of its choosing (PYTHONPATH pointing at its own files)."""
    token = token_path(service)
    assert stat.S_IMODE(token.stat().st_mode) == 0o600 and len(read_token(service)) == 64
    planted = tmp_path / "planted"
    planted.mkdir()
    job = RunJob(
        job=EvalJob(
            mode="verify",
            reference_path=str(planted / "model.py"),
            candidate_dir=str(planted),
            device="cpu",
            seeds=[1],
            init_seed=1,
            atol=1e-2,
            rtol=1e-2,
        ),
        env={"PYTHONPATH": str(planted)},
        timeout_s=30.0,
    )
    for forged in ("", "0" * 64, read_token(service)[:-1] + "x", "é" * 64):
        for request in (
            job.model_copy(update={"token": forged}),
            StatusQuery(token=forged),
            StopService(token=forged),
        ):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.connect(str(service))
                connection.sendall(encode(request))
                connection.settimeout(15)
                assert connection.recv(100) == b""  # closed without an answer
    status = query_status(service)
    assert status is not None and status.jobs_run == 0 and status.judges_started == 0
    assert not children(status.pid), "a judge was started for a caller without the token"
    # Refused, not crashed on: a forged token of any characters is just a wrong one.
    log = tmp_path / "service-cache" / "logs" / "judge-service.log"
    assert "Traceback" not in log.read_text()
