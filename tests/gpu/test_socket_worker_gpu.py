"""On the GPU: the container workers' path without the container (the GPU machine has no Docker engine).

A worker started as a separate process, not forked by the judge, reached over the Unix socket of
`socket_worker.py`, with the judge's private shared-memory directory: verify and profile of the ReLU
example's compiled kernel pass as they do with forked workers. Under another uid the same worker cannot
open the judge's CUDA IPC handles, which is why GPU container workers run as the judge's user
(`container_worker.gpu_worker_problem`). Not covered: the container itself (device request, namespaces).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from cuda_agent_mcp.evaluation.job import JudgeReport, TimingPolicy
from cuda_agent_mcp.executors.local import child_python_path
from cuda_agent_mcp.isolation.containers import SANDBOX_UID
from cuda_agent_mcp.judge.socket_worker import PrivateShm, SocketWorker, worker_argv
from cuda_agent_mcp.results import BuildResult, Crashed, Passed
from cuda_agent_mcp.tools import compile_kernels
from cuda_agent_mcp.workspace.harness import EXTENSION_NAME
from tests.conftest import EXAMPLES
from tests.evaluator.conftest import judge
from tests.redteam.workspaces import relu_session

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]
T = TypeVar("T")


class ProcessSocketWorker(SocketWorker):
    """A socket worker that is a plain process (in place of a container)."""

    def __init__(self, scratch: Path, env: Mapping[str, str], shm: Path, uid: int | None) -> None:
        super().__init__(scratch, uid)
        self.output = scratch / f"{self.tag}.out"  # what it prints before it opens its log
        with self.output.open("wb") as output:
            self.process = subprocess.Popen(
                worker_argv(),
                cwd=self.directory,
                env=self.environment(env, shm),
                user=uid,
                group=uid,
                extra_groups=[] if uid is not None else None,
                start_new_session=True,
                stdout=output,
                stderr=subprocess.STDOUT,
            )

    def startup_output(self) -> str:
        return self.output.read_text(errors="replace")[-3000:]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def exit_status(self) -> int | None:
        return self.process.poll()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


class ProcessSocketPool:
    def __init__(self, scratch: Path, uid: int | None) -> None:
        self.scratch = scratch
        self.uid = uid
        self.shm = PrivateShm(uid)
        self.taken = 0

    @property
    def isolation(self) -> str:
        return f"socket worker process (uid {self.uid if self.uid is not None else os.getuid()})"

    def take(self) -> ProcessSocketWorker:
        env = {k: v for k in ("PATH", "PYTHONPATH") if (v := os.environ.get(k)) is not None}
        worker = ProcessSocketWorker(self.scratch, env, self.shm.path, self.uid)
        worker.wait_ready()
        self.taken += 1
        return worker

    def ready(self) -> None:
        """Each worker is started when taken."""

    def close(self) -> None:
        self.shm.close()


def _others_can_read(path: Path) -> bool:
    """Every directory above `path` traversable, and `path` itself readable, by any user."""
    path = path.resolve()
    return all(p.stat().st_mode & 0o001 for p in path.parents) and bool(path.stat().st_mode & 0o004)


def _worker_uid() -> int | None:
    """Another uid for the worker where we are root and it could read what it imports."""
    if os.getuid() != 0:
        return None
    needed = [Path(sys.executable), Path(sys.prefix), Path(sys.base_prefix)]
    needed += [Path(p) for p in child_python_path().split(os.pathsep) if p]
    return SANDBOX_UID if all(_others_can_read(p) for p in needed if p.exists()) else None


@pytest.fixture
def scratch() -> Iterator[Path]:
    # Not under pytest's temporary root (0700): a worker under another uid must reach its directories.
    directory = Path(tempfile.mkdtemp(prefix="cuda-agent-socket-workers-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def relu_build(tmp_path: Path, shared_build_cache: Path) -> BuildResult:
    build = anyio.run(lambda: compile_kernels(relu_session(tmp_path / "build", shared_build_cache)))
    assert build.ok and build.extension_path is not None, build.failure
    return build


def _relu_job(build: BuildResult, workers: ProcessSocketPool) -> dict[str, object]:
    """What `judge` needs to evaluate the ReLU example's build on the GPU with `workers`."""
    assert build.extension_path is not None
    return {
        "reference": (EXAMPLES / "relu" / "model.py").read_text(),
        "workers": workers,
        "files": {f"{EXTENSION_NAME}.so": Path(build.extension_path)},
        "device": "cuda",
        "workspace_kernels": sorted({kernel.name for kernel in build.kernels}),
        "timing": TimingPolicy(),
    }


RELU_CANDIDATE = (EXAMPLES / "relu" / "model_new.py").read_text()


def _judge_relu(
    tmp_path: Path, scratch: Path, uid: int | None, build: BuildResult, modes: tuple[str, ...]
) -> tuple[list[JudgeReport], str, int]:
    """Evaluate the ReLU build once per mode with socket workers under `uid`: the reports, the pool's
    isolation and how many workers it started."""
    pool = ProcessSocketPool(scratch, uid)
    try:
        reports = []
        for mode in modes:
            (tmp_path / mode).mkdir()
            reports.append(judge(tmp_path / mode, RELU_CANDIDATE, mode=mode, **_relu_job(build, pool)))
        return reports, pool.isolation, pool.taken
    finally:
        pool.close()


def _in_fresh_process(function: Callable[..., T], *args: object) -> T:
    """`function(*args)` in a spawned process: the judge makes its CUDA context there, not in the test
    process (whose holding the GPU other tests' health probes would count as a leftover of ours)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as executor:
        return executor.submit(function, *args).result(timeout=600)


def test_verify_and_profile_of_a_compiled_kernel_through_socket_workers(
    tmp_path: Path, relu_build: BuildResult, scratch: Path
) -> None:
    (verified, profiled), isolation, taken = _in_fresh_process(
        _judge_relu, tmp_path, scratch, None, relu_build, ("verify", "profile")
    )
    assert isinstance(verified.verdict, Passed), verified.verdict
    assert verified.environment["worker_isolation"] == isolation
    assert isinstance(profiled.verdict, Passed), profiled.verdict
    assert profiled.candidate is not None and profiled.kernels is not None
    assert taken == 2
    print(
        f"\nsocket workers ({isolation}): verify phases {verified.phases_s}; "
        f"profile median {profiled.candidate.median_ms:.4f} ms, cv {profiled.candidate.cv:.4f}"
    )


def test_a_worker_under_another_uid_cannot_open_the_judges_cuda_ipc_handles(
    tmp_path: Path, relu_build: BuildResult, scratch: Path
) -> None:
    uid = _worker_uid()
    if uid is None:
        pytest.skip("needs root and a checkout other users can read")
    (report,), _, _ = _in_fresh_process(_judge_relu, tmp_path, scratch, uid, relu_build, ("verify",))
    assert isinstance(report.verdict, Crashed), report.verdict
    assert "cannot open CUDA IPC handle" in report.verdict.message
