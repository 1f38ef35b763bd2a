"""Benchmark: correctness-only evaluations per second with many concurrent sessions on one machine.

    python benchmarks/session_throughput.py --sessions 8 --seconds 30 --out results.json

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
from pathlib import Path

import anyio

from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, VerifyRequest, compile_kernels, verify_kernels
from cuda_agent_mcp.tools.gpu import gpu_specs, visible_gpu_scheduler

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "bias_add_relu"


def new_session(root: Path, index: int, scheduler: object) -> Session:
    task = load_task_file(EXAMPLE / "model.py", task_id="examples/bias_add_relu")
    session = Session.create(task, root / f"session-{index}", scheduler=scheduler)  # type: ignore[arg-type]
    shutil.copytree(EXAMPLE / "kernels", session.workspace.root / "kernels", dirs_exist_ok=True)
    shutil.copy(EXAMPLE / "model_new.py", session.workspace.root / "model_new.py")
    return session


async def run(sessions: int, seconds: float) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix="cuda-agent-sessions-"))
    scheduler = visible_gpu_scheduler()
    request = VerifyRequest(device="cuda", trials=5)
    workspaces = [new_session(root, i, scheduler) for i in range(sessions)]
    assert (await compile_kernels(workspaces[0])).ok
    verdicts: list[str] = []
    latencies: list[float] = []

    async def verify(session: Session) -> None:
        started = time.perf_counter()
        result = await verify_kernels(session, request)
        latencies.append(time.perf_counter() - started)
        verdicts.append(result.verdict.status)

    async with anyio.create_task_group() as group:  # untimed: builds (cache hits) and judges warm
        for session in workspaces:
            group.start_soon(verify, session)
    verdicts.clear()
    latencies.clear()
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
    return {
        "benchmark": "session_throughput",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "gpus": [g.name for g in gpu_specs().gpus],
        "task": "examples/bias_add_relu (8192 x 4096 fp32), its correct kernel, verify with 5 trials",
        "sessions": sessions,
        "window_s": round(elapsed, 2),
        "verifies": len(verdicts),
        "verifies_per_s": round(len(verdicts) / elapsed, 3),
        "statuses": {s: verdicts.count(s) for s in set(verdicts)},
        "latency_s": {
            "median": round(statistics.median(latencies), 3),
            "max": round(max(latencies), 3),
        },
        "target_per_s": 4.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = anyio.run(run, args.sessions, args.seconds)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
