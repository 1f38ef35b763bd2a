"""The judge server: a long-lived trusted process that runs one job at a time.

    python -m cuda_agent_mcp.judge      (started by `judge_service.JudgeServer`)

Protocol, length-prefixed JSON frames (see protocol.py): the server writes a `ServerReady` once it has
imported torch and made its CUDA context, then answers each `EvalJob` read from stdin with a
`JudgeReport` on its original stdout. Everything else it (or a reference's print) writes goes to stderr,
which the client sends to a log file. EOF on stdin ends it.

It pays the interpreter, the torch import and the CUDA context once, and starts a fork server that
preloads torch for workers, so a job's candidate starts in a process that is fresh but already warm. A job that
raises is reported as `infra_error` (never scored) and the server goes on; one that hangs is the
client's to kill, with the whole server.
"""

from __future__ import annotations

import ctypes
import gc
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from cuda_agent_mcp.evaluation.job import (
    RETIRE_HELD_GPU_BYTES,
    WORKERS_ENV,
    EvalJob,
    JudgeReport,
    ServerReady,
)
from cuda_agent_mcp.isolation.identity import usable_compile_caches
from cuda_agent_mcp.judge.worker_client import ForkedWorkerPool, WorkerPool, start_fork_server
from cuda_agent_mcp.results import Crashed
from cuda_agent_mcp.wire.protocol import read_frame_body, write_frame

# Workers get only what they need: tools, locale, GPU selection and where our dependencies are. HOME,
# TMPDIR and the compile caches are each worker's own directory, USER and LOGNAME set anew
# (worker_client.py: worker_env), never the judge's.
_WORKER_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "PYTHONPATH")
_PR_SET_DUMPABLE = 4


def main() -> None:
    started = time.perf_counter()
    # Not dumpable: no process of the same user (a worker) may ptrace this one or read its memory through
    # /proc, even where Landlock is missing (measured on the H200: CUDA IPC is unaffected).
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    # No parent-death signal here: it fires when the *thread* that started us ends, and the tool layer
    # starts servers from short-lived worker threads. A watchdog notices the client's death instead.
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # prints from reference code must not reach the reply pipe
    env = {k: v for k, v in os.environ.items() if k in _WORKER_ENV_KEYS}
    scratch = Path(tempfile.mkdtemp(prefix="cuda-agent-judge-"))
    # The compile caches its starter named (persistent), else ones in its scratch (gone with it): a cache
    # that cannot be written fails every torch.compile and Triton kernel. Before the fork server starts,
    # which takes this environment.
    if moved := usable_compile_caches(os.environ, scratch / "compile-cache"):
        print(
            f"judge: {', '.join(moved)} not writable here; using {scratch / 'compile-cache'}", file=sys.stderr
        )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so the finally below cleans up
    workers = _worker_pool(scratch, env)  # its workers' start overlaps this process's torch import
    clean_ups: list[Callable[[], None]] = []
    try:
        import torch

        from cuda_agent_mcp.judge.first_use import warm_first_uses
        from cuda_agent_mcp.judge.fused_compare import warm_up
        from cuda_agent_mcp.judge.run import run_job
        from cuda_agent_mcp.judge.sanitize import close_spare

        clean_ups.append(close_spare)  # the sanitizer's target started ahead ends with us

        gpu = "cpu"
        if torch.cuda.is_available():
            torch.cuda.init()
            gpu = torch.cuda.get_device_name()
            warm_up(torch.device("cuda"))
        warm_first_uses()
        workers.ready()  # the fork server's preload too: a judge started ahead then covers all of it
        ready = ServerReady(
            gpu=gpu, torch=torch.__version__, startup_s=round(time.perf_counter() - started, 3)
        )
        write_frame(reply_fd, ready)
        while True:
            try:
                job = EvalJob.model_validate_json(read_frame_body(0))
            except EOFError:
                return
            job_started = time.perf_counter()
            report = _run_one(run_job, job, scratch, env, workers)
            cleaned = time.perf_counter()
            if torch.cuda.is_available():
                torch.cuda.ipc_collect()  # blocks whose IPC references workers dropped, before emptying
                torch.cuda.empty_cache()  # the next job's inputs may need all of it
                if _held() > RETIRE_HELD_GPU_BYTES:
                    # Before asking to be retired: the job's tensors may only sit in reference cycles
                    # (tracebacks, the judge's own). Collected only then, off the common path.
                    gc.collect()
                    torch.cuda.empty_cache()
                report = report.model_copy(update={"held_gpu_bytes": _held()})
            # The whole job in this process, its clean-up included: what the named phases leave out.
            now = time.perf_counter()
            in_judge = {
                **report.phases_s,
                "memory_cleanup": round(now - cleaned, 4),
                "in_judge": round(now - job_started, 4),
            }
            write_frame(reply_fd, report.model_copy(update={"phases_s": in_judge}))
    finally:
        workers.close()
        for clean_up in clean_ups:
            clean_up()
        shutil.rmtree(scratch, ignore_errors=True)


def _held() -> int:
    """GPU memory still allocated after a job, less the input pools kept for the next jobs on purpose."""
    import torch

    from cuda_agent_mcp.judge.staging import idle_pool_bytes

    return max(torch.cuda.memory_allocated() - idle_pool_bytes(), 0)


def _worker_pool(scratch: Path, env: dict[str, str]) -> WorkerPool:
    """Containers when the tool layer asked for them (a session on the Docker executor), else workers
    forked from a fork server started now."""
    if os.environ.get(WORKERS_ENV, "fork") == "docker":
        from cuda_agent_mcp.judge.container_worker import ContainerWorkerPool

        return ContainerWorkerPool(scratch, env)
    start_fork_server()
    return ForkedWorkerPool(scratch, env)


def _run_one(
    run_job: Callable[[EvalJob, Path, dict[str, str], WorkerPool], JudgeReport],
    job: EvalJob,
    scratch: Path,
    env: dict[str, str],
    workers: WorkerPool,
) -> JudgeReport:
    with tempfile.TemporaryDirectory(prefix="job-", dir=scratch) as job_scratch:
        try:
            return run_job(job, Path(job_scratch), env, workers)
        except Exception as exc:  # the judge's own failure: reported, never scored
            detail = "".join(traceback.format_exception(exc))[-4000:]
            return JudgeReport(
                verdict=Crashed(phase="load", kind="exception", message="judge failure"), infra_error=detail
            )


def _exit_when_orphaned(parent: int) -> None:
    """Exit as soon as the client is gone (we are re-parented), even in the middle of a job: nothing an
    evaluation starts may outlive the process that asked for it. Our workers follow (parent-death signal)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)
