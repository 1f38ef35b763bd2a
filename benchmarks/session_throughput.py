"""Benchmark: evaluations per second with many concurrent sessions on one machine.

    python benchmarks/session_throughput.py --sessions 8 --seconds 30 --out results.json
    python benchmarks/session_throughput.py --mode profile --sessions 8 --seconds 40 --out results.json

`--mode verify` (correctness only) measures throughput; `--mode profile` (timed, cached baselines)
measures whether timed evaluations stay serialized per GPU (every lease is recorded: an exclusive one must
never overlap another) and the timing quality (each profile's CV and median) against `--sessions 1`.

Each session is a workspace of the bundled bias_add_relu example (an L1-size fused elementwise task,
8192 x 4096 fp32) holding its correct kernel; all sessions share one GPU scheduler and one judge pool,
as the sessions of one `cuda-agent serve` do. Every session verifies (5 trials) in a loop for
`--seconds`; the figure is completed verifies per second over that window, after one untimed verify per
session (build cache, judges warm).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import (
    ProfileRequest,
    Session,
    VerifyRequest,
    compile_kernels,
    profile_kernels,
    verify_kernels,
)
from cuda_agent_mcp.tools.gpu import gpu_specs, visible_gpu_scheduler

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "bias_add_relu"


def new_session(root: Path, index: int, scheduler: object) -> Session:
    task = load_task_file(EXAMPLE / "model.py", task_id="examples/bias_add_relu")
    session = Session.create(task, root / f"session-{index}", scheduler=scheduler)  # type: ignore[arg-type]
    shutil.copytree(EXAMPLE / "kernels", session.workspace.root / "kernels", dirs_exist_ok=True)
    shutil.copy(EXAMPLE / "model_new.py", session.workspace.root / "model_new.py")
    return session


def record_leases(scheduler: GpuScheduler) -> list[tuple[float, float, bool]]:
    """Every lease the scheduler grants from now on, as (start, end, exclusive)."""
    leases: list[tuple[float, float, bool]] = []
    grant = scheduler.lease

    @asynccontextmanager
    async def recorded(owner: str, *, exclusive: bool, on_wait=None):  # type: ignore[no-untyped-def]
        async with grant(owner, exclusive=exclusive, on_wait=on_wait) as lease:
            started = time.perf_counter()
            try:
                yield lease
            finally:
                leases.append((started, time.perf_counter(), exclusive))

    scheduler.lease = recorded  # type: ignore[method-assign]
    return leases


def overlapping_exclusive(leases: list[tuple[float, float, bool]]) -> int:
    """How many exclusive leases overlapped any other lease (0 when timing is serialized)."""
    return sum(
        1
        for i, (start, end, exclusive) in enumerate(leases)
        if exclusive and any(s < end and start < e for j, (s, e, _) in enumerate(leases) if j != i)
    )


async def run(sessions: int, seconds: float, mode: str) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix="cuda-agent-sessions-"))
    scheduler = visible_gpu_scheduler()
    assert scheduler is not None, "needs a GPU"
    request = VerifyRequest(device="cuda", trials=5)
    workspaces = [new_session(root, i, scheduler) for i in range(sessions)]
    assert (await compile_kernels(workspaces[0])).ok
    verdicts: list[str] = []
    latencies: list[float] = []
    timings: list[tuple[float, float]] = []  # (median ms, CV) of each passed profile

    async def verify(session: Session) -> None:
        started = time.perf_counter()
        if mode == "profile":
            profiled = await profile_kernels(session, ProfileRequest(baselines="cached"))
            if profiled.candidate is not None:
                timings.append((profiled.candidate.median_ms, profiled.candidate.cv))
            status = profiled.verdict.status
        else:
            status = (await verify_kernels(session, request)).verdict.status
        latencies.append(time.perf_counter() - started)
        verdicts.append(status)

    if mode == "profile":  # baselines measured once, then cached for every session
        await profile_kernels(workspaces[0], ProfileRequest(baselines="measure"))

    async with anyio.create_task_group() as group:  # untimed: builds (cache hits) and judges warm
        for session in workspaces:
            group.start_soon(verify, session)
    verdicts.clear()
    latencies.clear()
    timings.clear()
    leases = record_leases(scheduler)
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()

    async def loop(session: Session) -> None:
        while time.perf_counter() < deadline:
            await verify(session)

    async with anyio.create_task_group() as group:
        for session in workspaces:
            group.start_soon(loop, session)
    elapsed = time.perf_counter() - started
    shutil.rmtree(root, ignore_errors=True)
    result: dict[str, object] = {
        "benchmark": "session_throughput",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "gpus": [g.name for g in gpu_specs().gpus],
        "mode": mode,
        "task": "examples/bias_add_relu (8192 x 4096 fp32), its correct kernel, "
        + ("verify with 5 trials" if mode == "verify" else "profile with cached baselines"),
        "sessions": sessions,
        "window_s": round(elapsed, 2),
        "evaluations": len(verdicts),
        "evaluations_per_s": round(len(verdicts) / elapsed, 3),
        "statuses": {s: verdicts.count(s) for s in set(verdicts)},
        "latency_s": {
            "median": round(statistics.median(latencies), 3),
            "max": round(max(latencies), 3),
        },
        "leases": len(leases),
        "exclusive_leases_overlapping_another": overlapping_exclusive(leases),
    }
    if mode == "verify":
        result["target_per_s"] = 4.0
    if timings:
        medians = [m for m, _ in timings]
        cvs = [c for _, c in timings]
        result["profiles"] = {
            "count": len(timings),
            "cv_median": round(statistics.median(cvs), 5),
            "cv_max": round(max(cvs), 5),
            "median_ms_median": round(statistics.median(medians), 5),
            "median_ms_spread": round((max(medians) - min(medians)) / statistics.median(medians), 5),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--mode", choices=("verify", "profile"), default="verify")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = anyio.run(run, args.sessions, args.seconds, args.mode)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
