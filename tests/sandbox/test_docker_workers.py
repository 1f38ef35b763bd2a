"""The fault suite's CPU cases with evaluation workers in containers (the Docker backend), on a real engine.

Each case asserts the structured verdict and that the next evaluation by the same pool passes.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.evaluation.job import JudgeReport, Timeouts
from cuda_agent_mcp.evaluation.judge_service import JudgePool
from cuda_agent_mcp.isolation.containers import remove_container
from cuda_agent_mcp.isolation.worker_containers import (
    WORKER_LABEL,
    JudgeIdentity,
    gpu_worker_problem,
    judge_label,
    remove_orphans,
)
from cuda_agent_mcp.judge import judge as judge_module
from cuda_agent_mcp.judge.container_worker import ContainerWorkerPool
from cuda_agent_mcp.results import Crashed, Passed, Rejected, TimedOut
from cuda_agent_mcp.tools import VerifyRequest, verify_kernels
from cuda_agent_mcp.tools.evaluate import JudgeFailed
from tests.evaluator.conftest import HONEST, SLEEPS_IN_INIT, honest_running, judge
from tests.evaluator.test_memory_budget_cpu import hog, watched  # noqa: F401 (a fixture, used by name)
from tests.evaluator.test_tools_cpu import TORCH_CANDIDATE, cpu_session
from tests.sandbox.conftest import docker_executor, unavailable, worker_containers


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContainerWorkerPool]:
    scratch = tmp_path_factory.mktemp("container-workers")
    try:
        workers = ContainerWorkerPool(scratch, {"PATH": os.environ["PATH"]})
    except ExecutorUnavailable as exc:
        unavailable(str(exc))
    yield workers
    workers.close()


@pytest.fixture
def run_judge(tmp_path: Path, pool: ContainerWorkerPool):
    def run(candidate: str, **job: object) -> JudgeReport:
        return judge(tmp_path, candidate, workers=pool, **job)

    return run


def test_an_honest_candidate_passes_in_a_container_and_the_record_says_so(run_judge) -> None:
    report = run_judge(HONEST)
    assert isinstance(report.verdict, Passed), report.verdict
    assert report.environment["worker_isolation"].startswith("container (docker)")
    assert report.phases_s["worker_start"] < 60


def test_a_gigabyte_printed_to_stdout_is_cut_off_and_reported(run_judge) -> None:
    report = run_judge(
        honest_running("import sys\nfor _ in range(1024):\n    sys.stdout.write('x' * (1 << 20))")
    )
    assert isinstance(report.verdict, Crashed), report.verdict
    assert "File too large" in report.verdict.message
    assert isinstance(run_judge(HONEST).verdict, Passed)


def test_writing_outside_its_directory_fails_and_plants_nothing(run_judge, tmp_path) -> None:
    target = tmp_path / "planted.bin"
    report = run_judge(honest_running(f"open({str(target)!r}, 'wb').write(b'0' * 1024)"))
    assert isinstance(report.verdict, Crashed), report.verdict
    assert not target.exists()
    assert isinstance(run_judge(HONEST).verdict, Passed)


def test_the_reference_other_workspaces_and_the_judge_are_out_of_reach(run_judge, tmp_path) -> None:
    other = tmp_path / "other-session"
    other.mkdir()
    (other / "model_new.py").write_text("SECRET = 1\n")
    reads = [
        str(Path(judge_module.__file__)),
        str(tmp_path / "reference" / "model.py"),
        str(other / "model_new.py"),
    ]
    probe = honest_running(
        "import os\n"
        "got = []\n"
        f"for path in {reads!r} + [f'/proc/{{os.getppid()}}/mem', '/proc/1/environ']:\n"
        "    try:\n"
        "        open(path, 'rb').read(1)\n"
        "        got.append('read ' + path)\n"
        "    except OSError:\n"
        "        pass\n"
        "raise RuntimeError('VIEW ' + repr(got))"
    )
    report = run_judge(probe)
    assert isinstance(report.verdict, Crashed), report.verdict
    view = report.verdict.message[report.verdict.message.index("VIEW") :]
    assert "read " not in view, view
    assert isinstance(run_judge(HONEST).verdict, Passed)


def test_no_network_inside_the_container(run_judge) -> None:
    probe = honest_running(
        "import socket\n"
        "reached = []\n"
        "for family, address in [(socket.AF_INET, ('1.1.1.1', 53)), (socket.AF_INET, ('127.0.0.1', 2375))]:\n"
        "    try:\n"
        "        socket.create_connection(address, timeout=2).close()\n"
        "        reached.append(address)\n"
        "    except OSError:\n"
        "        pass\n"
        "raise RuntimeError('REACHED ' + repr(reached))"
    )
    report = run_judge(probe)
    assert isinstance(report.verdict, Crashed), report.verdict
    assert "REACHED []" in report.verdict.message


def test_sleeping_forever_in_init_is_a_load_timeout_and_the_container_is_gone(run_judge, pool) -> None:
    report = run_judge(SLEEPS_IN_INIT, timeouts=Timeouts(load_s=5, call_s=10))
    assert isinstance(report.verdict, TimedOut), report.verdict
    assert report.verdict.phase == "load" and report.verdict.limit_s == 5
    assert len(worker_containers(pool)) <= 1  # only the one started ahead: the sleeper's was removed
    assert isinstance(run_judge(HONEST).verdict, Passed)


def test_a_process_that_escaped_with_setsid_and_a_double_fork_is_rejected_and_dies_with_its_container(
    run_judge, pool
) -> None:
    escape = honest_running(
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(3600)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)"
    )
    running_before = set(worker_containers(pool))
    report = run_judge(escape)
    assert isinstance(report.verdict, Rejected), report.verdict
    assert report.verdict.reason == "process_left_running" and report.verdict.evidence["processes_left"] == 1
    # The worker's container (with the escaped process in it) is gone; only the one started ahead runs.
    deadline = time.monotonic() + 10
    while len(set(worker_containers(pool)) - running_before) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(worker_containers(pool)) <= 1


def test_a_fork_bomb_stops_at_the_pids_limit_and_leaves_nothing_behind(run_judge, pool) -> None:
    bomb = honest_running(
        "import os, time\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "time.sleep(3600)"
    )
    report = run_judge(bomb, timeouts=Timeouts(load_s=60, call_s=10))
    assert isinstance(report.verdict, TimedOut | Crashed), report.verdict
    assert len(worker_containers(pool)) <= 1  # the bomb's container was removed with everything in it
    assert isinstance(run_judge(HONEST).verdict, Passed)


def test_a_worker_container_that_died_while_waiting_is_replaced_not_blamed(run_judge, pool) -> None:
    assert isinstance(run_judge(HONEST).verdict, Passed)  # a container is being started ahead now
    deadline = time.monotonic() + 120
    while not list(pool.scratch.glob("worker-*/worker.log")) and time.monotonic() < deadline:
        time.sleep(0.2)  # the worker opens its log once connected: it is ready and waiting
    assert worker_containers(pool)
    for container_id in worker_containers(pool):
        pool.client.containers.get(container_id).kill()
    report = run_judge(HONEST)
    assert isinstance(report.verdict, Passed), report.verdict


def test_allocating_100_gb_of_host_memory_is_a_crash_not_a_dead_machine(run_judge) -> None:
    report = run_judge(honest_running("import torch\nhog = torch.ones(100 * 2**30, dtype=torch.uint8)"))
    assert isinstance(report.verdict, Crashed), report.verdict
    assert isinstance(run_judge(HONEST).verdict, Passed)


@pytest.mark.usefixtures("watched")
def test_a_container_over_its_memory_budget_is_killed_and_rejected_for_it(run_judge) -> None:
    """The memory watch names a container's processes by their host pids (its cgroup) and stops it by its id:
    the same verdict as a forked worker's (tests/evaluator/test_memory_budget_cpu.py, whose NVML reports
    resident host memory)."""
    honest = run_judge(HONEST)
    assert isinstance(honest.verdict, Passed), honest.verdict
    assert honest.environment["gpu_memory_limit"].startswith("at most 2.00 GiB")
    report = run_judge(hog("call"))
    assert isinstance(report.verdict, Rejected), report.verdict
    assert report.verdict.reason == "gpu_memory_exceeded", report.verdict
    assert report.verdict.evidence["held_bytes"] > report.verdict.evidence["budget_bytes"]
    assert isinstance(run_judge(HONEST).verdict, Passed)


def test_a_segfault_in_native_code_is_a_crash_and_the_next_evaluation_is_clean(run_judge) -> None:
    report = run_judge(honest_running("import ctypes\nctypes.string_at(0)"))
    assert isinstance(report.verdict, Crashed), report.verdict
    assert report.verdict.kind == "process_exited" and report.verdict.phase == "call"
    assert isinstance(run_judge(HONEST).verdict, Passed)


@pytest.mark.nvcc
def test_a_session_on_the_docker_executor_evaluates_in_containers_and_a_killed_judge_leaves_none(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """Through the tool layer: the build and the worker both run in containers; a job past its limit
    kills its judge, and the judge's worker containers go with it."""
    judges = JudgePool(tmp_path / "logs")
    session = cpu_session(tmp_path, shared_build_cache, executor=docker_executor(), judges=judges)
    candidate = session.workspace.root / "model_new.py"
    candidate.write_text(TORCH_CANDIDATE.replace("{suffix}", ""))
    try:
        result = anyio.run(
            lambda: verify_kernels(session, VerifyRequest(device="cpu", trials=2, audit=False))
        )
        assert isinstance(result.verdict, Passed), result.verdict
        assert result.environment["worker_isolation"].startswith("container (docker)")

        candidate.write_text(
            TORCH_CANDIDATE.replace("{suffix}", "")
            + "\nimport time\nModelNew.forward = lambda self, x: time.sleep(3600)\n"
        )
        hung = VerifyRequest(device="cpu", trials=1, audit=False, call_timeout_s=600.0, timeout_s=40.0)
        with pytest.raises(JudgeFailed, match="longer than its limit"):
            anyio.run(lambda: verify_kernels(session, hung))
        servers = judges.started
        client = session.executor.client()  # type: ignore[attr-defined]
        left = [
            c
            for c in client.containers.list(all=True, filters={"label": WORKER_LABEL})
            if (judge := JudgeIdentity.parse(c.labels[WORKER_LABEL])) is None or judge.gone
        ]
        assert not left, [c.labels for c in left]
        assert servers == 1
    finally:
        judges.close()


def test_containers_whose_judge_is_gone_are_removed_and_others_are_kept(pool: ContainerWorkerPool) -> None:
    def labelled(judge: str) -> Any:
        return pool.client.containers.run(
            pool.settings.image,
            ["sleep", "600"],
            detach=True,
            network_mode="none",
            labels={WORKER_LABEL: judge},
        )

    host = socket.gethostname()
    gone = labelled(JudgeIdentity(host, 999999999, "0").label())  # no such process
    reused_pid = labelled(JudgeIdentity(host, os.getpid(), "0").label())  # this pid, another start time
    live = labelled(judge_label())
    elsewhere = labelled(JudgeIdentity("another-host", 999999999, "0").label())  # not ours to judge
    try:
        assert remove_orphans(pool.client) >= 2
        remaining = {c.id for c in pool.client.containers.list(all=True, filters={"label": WORKER_LABEL})}
        assert gone.id not in remaining and reused_pid.id not in remaining
        assert live.id in remaining and elsewhere.id in remaining
    finally:
        for container in (gone, reused_pid, live, elsewhere):
            remove_container(container)


def test_gpu_workers_in_containers_are_refused_for_a_root_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getuid", lambda: 0)
    problem = gpu_worker_problem("0")
    assert problem is not None and "non-root" in problem
    assert gpu_worker_problem(None) is None
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    assert gpu_worker_problem("0") is None


def test_a_gpu_that_no_container_can_be_given_is_refused_in_one_line_before_a_judge_starts(
    tmp_path: Path, shared_build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on a GPU machine whose driver libraries cannot be found: the session says so before any judge
    starts (a judge would fail each worker container and be retried three times)."""
    from cuda_agent_mcp.isolation import containers
    from cuda_agent_mcp.isolation.gpu_access import GpuAccessUnavailable
    from cuda_agent_mcp.tools import session as session_module

    session = cpu_session(
        tmp_path, shared_build_cache, executor=docker_executor(), judges=JudgePool(tmp_path)
    )

    def no_driver(gpu: str) -> None:
        raise GpuAccessUnavailable("libcuda.so.1 was found neither in the loader's cache nor in /usr/lib64")

    monkeypatch.setattr(session_module, "judge_gpu", lambda env: "0")
    monkeypatch.setattr(session_module, "gpu_worker_problem", lambda gpu: None)
    monkeypatch.setattr(containers, "device_access", no_driver)
    monkeypatch.setenv("CUDA_AGENT_DOCKER_GPU", "devices")
    with pytest.raises(
        ExecutorUnavailable, match=r"no way to give a container GPU 0: libcuda\.so\.1 was found"
    ):
        session.check_worker_backend({})
    monkeypatch.setenv("CUDA_AGENT_DOCKER_GPU", "toolkit")  # asked for: not second-guessed here
    session.check_worker_backend({})
    monkeypatch.setenv("CUDA_AGENT_DOCKER_GPU", "devices")
    session.check_worker_backend({})  # checked once per session and GPU: it runs before every evaluation
