"""One verify or profile job, from the job description to the report."""

from __future__ import annotations

from pathlib import Path

import torch

from cuda_agent_mcp.evaluation.job import EvalJob, JudgeReport
from cuda_agent_mcp.isolation.cgroup import CageUnavailable
from cuda_agent_mcp.judge.baselines import measure_baselines
from cuda_agent_mcp.judge.judge import HarnessFault, Judge, TaskFault, VerdictReached
from cuda_agent_mcp.judge.kernels import foreign_work
from cuda_agent_mcp.judge.socket_worker import WorkerStartFailed
from cuda_agent_mcp.judge.sol import peaks_for, reference_work, speed_of_light
from cuda_agent_mcp.judge.timing import physical_floor_ms
from cuda_agent_mcp.judge.worker_client import Worker, WorkerLost, WorkerPool
from cuda_agent_mcp.results import Crashed, KernelBreakdown, Passed, Rejected, TimingStats
from cuda_agent_mcp.wire.protocol import FrameError
from cuda_agent_mcp.wire.refs import remove_shm_files, shm_tag
from cuda_agent_mcp.wire.transport import TransportError

# On the CPU there is no profiler trace of device work: nothing there may be rewarded above correctness.
NO_TRACE_ON_CPU = (
    "kernel_trace: the CPU path has no device trace (it times pure-PyTorch candidates for tests)"
)


def run_job(
    job: EvalJob, scratch: Path, env: dict[str, str], workers: WorkerPool | None = None
) -> JudgeReport:
    """Run one verify or profile job to a report. Candidate faults are verdicts; judge faults raise.
    `workers` holds workers started ahead (see server.py); without it each is started when needed."""
    if job.mode == "baselines":
        return _baselines_only(job, scratch, env, workers)
    tag = shm_tag()  # the judge's own shared-memory files (CPU tensors); each worker has its own tag
    try:
        judge = Judge(job, scratch, env, workers)
    except Exception as exc:  # the reference's own constructor or get_init_inputs failed in the judge
        remove_shm_files(tag)
        return _fault_report(
            TaskFault(f"the reference could not be built: {type(exc).__name__}: {exc}"[:2000])
        )
    gpu = torch.cuda.get_device_name(judge.device) if judge.device.type == "cuda" else "cpu"
    worker: Worker | None = None
    null: Worker | None = None
    try:
        eager = compiled = None
        cached = False
        if job.mode == "profile":
            # Baselines first, in clean workers, before any candidate code runs in this job (a candidate
            # cannot reach them). What fails there is the task's or the machine's, never the candidate's.
            with judge.clock.phase("baselines"):
                eager, compiled, cached = _baselines(judge)
        worker = judge.start_worker(Path(job.candidate_dir), "model_new", "ModelNew")
        if job.mode == "verify":
            verdict = judge.verify(worker)
            return JudgeReport(
                verdict=verdict,
                distributions=judge.distributions_used,
                gpu=gpu,
                phases_s=judge.clock.as_dict(),
                environment=_judge_environment(gpu, judge),
                hidden_sizes=judge.size_plan.describe(),
                judged_against=judge.judged_against,
                sanitizer=judge.sanitizer,
            )
        null = judge.start_null_worker()
        stats, out_bytes = judge.time_worker(worker, job.timeouts.call_s, null=null)
        if null is not None:
            null.close()
            null = None
        kernels: KernelBreakdown | None = None
        missing = [NO_TRACE_ON_CPU] if judge.device.type != "cuda" else []
        # Traced even when the workspace compiled no kernel: then any kernel time is someone else's
        # (unless it is a library the task allows).
        if judge.device.type == "cuda":
            with judge.clock.phase("kernel_trace"):
                kernels, missing = judge.trace_kernels(worker, job.timeouts.call_s, stats.median_ms)
            if (reason := foreign_work(kernels)) is not None:
                raise VerdictReached(Rejected(reason="foreign_kernels", message=reason))
        worker.close()
        worker = None
        floor = physical_floor_ms(gpu, out_bytes)
        if floor is not None and stats.median_ms < 0.5 * floor:
            raise VerdictReached(
                Rejected(
                    reason="below_physical_floor",
                    message=f"median {stats.median_ms:.4f} ms is below half the time needed just to write the "
                    f"outputs at peak bandwidth ({floor:.4f} ms)",
                )
            )
        with judge.clock.phase("speed_of_light"):
            best = min((b.median_ms for b in (eager, compiled) if b is not None), default=None)
            cache = (
                Path(job.baseline_cache_path).with_name("gpu_peaks.json") if job.baseline_cache_path else None
            )
            sol = speed_of_light(
                reference_work(judge.reference, judge.init_args),
                peaks_for(judge.device, cache),
                stats.median_ms,
                best,
            )
        return JudgeReport(
            verdict=Passed(trials=stats.samples, max_abs_error=0.0, max_rel_error=0.0),
            candidate=stats,
            eager=eager,
            compiled=compiled,
            baselines_cached=cached,
            physical_floor_ms=floor,
            kernels=kernels,
            gpu=gpu,
            phases_s=judge.clock.as_dict(),
            environment=_judge_environment(gpu, judge),
            evidence_missing=missing,
            speed_of_light=sol,
            faster_than_sol=sol is not None and stats.median_ms < sol.t_sol_ms,
            judged_against=judge.judged_against,
        )
    except VerdictReached as reached:
        return JudgeReport(
            verdict=reached.verdict,
            distributions=judge.distributions_used,
            gpu=gpu,
            phases_s=judge.clock.as_dict(),
            environment=_judge_environment(gpu, judge),
        )
    except (HarnessFault, TaskFault) as fault:
        return _fault_report(fault, gpu, judge.clock.as_dict(), _judge_environment(gpu, judge))
    except CageUnavailable as exc:  # the machine's: no process of the candidate runs uncaged
        return _fault_report(
            HarnessFault(str(exc)), gpu, judge.clock.as_dict(), _judge_environment(gpu, judge)
        )
    finally:
        for started in (worker, null):
            if started is not None:
                started.close()
        judge.close()
        remove_shm_files(tag)


def _baselines(judge: Judge) -> tuple[TimingStats | None, TimingStats | None, bool]:
    """The baselines, with any failure of the reference's (a verdict reached in its clean workers, an
    exception) turned into the task's fault; the harness's own failures stay the infrastructure's."""
    try:
        return measure_baselines(judge)
    except VerdictReached as reached:
        verdict = reached.verdict
        detail = getattr(verdict, "message", "") or verdict.status
        raise TaskFault(
            f"the reference failed while its baselines were measured ({verdict.status}): {detail}"[:2000]
        ) from None
    except (
        HarnessFault,
        TaskFault,
        WorkerLost,
        TransportError,
        FrameError,
        WorkerStartFailed,
        CageUnavailable,
    ):
        raise
    except Exception as exc:
        raise TaskFault(
            f"the reference failed while its baselines were measured: {type(exc).__name__}: {exc}"[:2000]
        ) from None


def _fault_report(
    fault: HarnessFault | TaskFault,
    gpu: str = "",
    phases: dict[str, float] | None = None,
    environment: dict[str, str] | None = None,
) -> JudgeReport:
    """A report that carries no verdict on the candidate: the tool layer retries an infrastructure
    failure on a fresh judge and names a task error as such; neither is ever scored."""
    task = isinstance(fault, TaskFault)
    return JudgeReport(
        verdict=Crashed(
            phase="load",
            kind="exception",
            message="no verdict: " + ("task error" if task else "infrastructure"),
        ),
        infra_error=None if task else str(fault),
        task_error=str(fault) if task else None,
        gpu=gpu,
        phases_s=phases or {},
        environment=environment or {},
    )


def _baselines_only(
    job: EvalJob, scratch: Path, env: dict[str, str], workers: WorkerPool | None
) -> JudgeReport:
    """The reference's eager and torch.compile timings alone. Any failure here is the task's (its reference
    does not build, run or time on this device), reported as a verdict the caller names a task error."""
    tag = shm_tag()
    gpu = torch.cuda.get_device_name() if job.device == "cuda" else "cpu"
    try:
        judge = Judge(job, scratch, env, workers)
    except Exception as exc:  # the reference's own constructor or get_init_inputs failed in the judge
        return JudgeReport(
            verdict=Crashed(phase="load", kind="exception", message=f"the reference failed: {exc}"[:2000]),
            gpu=gpu,
            environment=_environment(gpu, "none"),
        )
    try:
        with judge.clock.phase("baselines"):
            eager, compiled, cached = measure_baselines(judge)
        return JudgeReport(
            verdict=Passed(trials=0, max_abs_error=0.0, max_rel_error=0.0),
            eager=eager,
            compiled=compiled,
            baselines_cached=cached,
            gpu=gpu,
            phases_s=judge.clock.as_dict(),
            environment=_judge_environment(gpu, judge),
        )
    except VerdictReached as reached:
        return JudgeReport(
            verdict=reached.verdict,
            gpu=gpu,
            phases_s=judge.clock.as_dict(),
            environment=_judge_environment(gpu, judge),
        )
    except (WorkerLost, TransportError, FrameError, WorkerStartFailed, CageUnavailable):
        raise  # the harness's own failures: never the task's
    except Exception as exc:  # the reference raised while the judge computed its outputs
        return JudgeReport(
            verdict=Crashed(
                phase="call",
                kind="exception",
                message=f"the reference failed: {type(exc).__name__}: {exc}"[:2000],
            ),
            gpu=gpu,
            phases_s=judge.clock.as_dict(),
            environment=_judge_environment(gpu, judge),
        )
    finally:
        judge.close()  # its memory pools go back for later jobs
        remove_shm_files(tag)


def _judge_environment(gpu: str, judge: Judge) -> dict[str, str]:
    """What an evaluation ran on and the defences in force for it, each as the judge found it (at the end
    of the job: the memory limit says what was seen)."""
    return {
        **_environment(gpu, judge.workers.isolation),
        "gpu_exclusivity": judge.gpu_exclusivity,
        "gpu_memory_limit": judge.candidate_memory.describe(),
    }


def _environment(gpu: str, isolation: str) -> dict[str, str]:
    """What an evaluation ran on, for the journal."""
    found = {
        "gpu": gpu,
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda or ""),
        "worker_isolation": isolation,
    }
    driver = getattr(torch._C, "_cuda_getDriverVersion", None)
    if driver is not None and torch.cuda.is_available():
        version = int(driver())
        found["driver_cuda"] = f"{version // 1000}.{version % 1000 // 10}"
    return found
