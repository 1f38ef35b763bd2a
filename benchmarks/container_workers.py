"""Benchmark: a verify round trip with evaluation workers in containers against forked workers.

    python benchmarks/container_workers.py --repeats 5 --pause 10 --out results.json

Runs where Docker runs (the GPU machine has no engine): the judge on the CPU, the bias_add_relu example
at small sizes with a pure-PyTorch candidate, through the tool layer (`verify_kernels`, builds cached).
Three paths: forked workers (the process sandbox's warm path); worker containers with a pause between
calls (the container started ahead is warm when the call comes, as between an agent's turns); and worker
containers back to back (each call waits for the start of the container the previous call replaced).
Reported: wall time per verify (median, min, max) and the judge's `worker_start` phase.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from cuda_agent_mcp.evaluation.judge_service import JudgePool
from cuda_agent_mcp.executors import DockerExecutor, Executor, LocalExecutor
from cuda_agent_mcp.results import Passed
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, VerifyRequest, compile_kernels, verify_kernels

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "bias_add_relu"
SMALL = ("batch_size = 8192\nfeatures = 4096", "batch_size = 16\nfeatures = 32")
CANDIDATE = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return (x + self.bias).clamp_min(0)
"""
REQUEST = VerifyRequest(device="cpu", trials=3, audit=False)


def _session(root: Path, executor: Executor, cache: Path, judges: JudgePool) -> Session:
    reference = root / "reference.py"
    reference.write_text((EXAMPLE / "model.py").read_text().replace(*SMALL))
    session = Session.create(
        load_task_file(reference, task_id="bench/bias_add_relu"),
        root / "ws",
        executor=executor,
        cache_dir=cache,
        judges=judges,
    )
    shutil.copytree(EXAMPLE / "kernels", session.workspace.root / "kernels", dirs_exist_ok=True)
    (session.workspace.root / "model_new.py").write_text(CANDIDATE)
    return session


def measure(session: Session, repeats: int, pause_s: float) -> dict[str, object]:
    """Wall time of `repeats` verify calls after one warm-up call (which starts the judge)."""
    build = anyio.run(lambda: compile_kernels(session))
    assert build.ok, build.failure
    first = anyio.run(lambda: verify_kernels(session, REQUEST))
    assert isinstance(first.verdict, Passed), first.verdict
    walls, starts = [], []
    for _ in range(repeats):
        time.sleep(pause_s)
        started = time.perf_counter()
        result = anyio.run(lambda: verify_kernels(session, REQUEST))
        walls.append(time.perf_counter() - started)
        assert isinstance(result.verdict, Passed), result.verdict
        starts.append(result.phases_s.get("worker_start", 0.0))
    return {
        "pause_s": pause_s,
        "verify_s": {
            "median": round(statistics.median(walls), 3),
            "min": round(min(walls), 3),
            "max": round(max(walls), 3),
        },
        "worker_start_s": {"median": round(statistics.median(starts), 3), "max": round(max(starts), 3)},
        "worker_isolation": first.environment.get("worker_isolation", ""),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pause", type=float, default=10.0, help="seconds between calls (an agent's turn)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict[str, object] = {
        "commit": os.environ.get("BENCH_COMMIT")
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs, no GPU: the judge on the CPU)",
        "python": sys.version.split()[0],
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cache = root / "cache"
        paths = [
            ("forked", LocalExecutor(), args.pause),
            ("container_after_pause", DockerExecutor(), args.pause),
            ("container_back_to_back", DockerExecutor(), 0.0),
        ]
        for name, executor, pause in paths:
            judges = JudgePool(root / name / "logs")
            (root / name).mkdir(exist_ok=True)
            try:
                results[name] = measure(_session(root / name, executor, cache, judges), args.repeats, pause)
            finally:
                judges.close()
            print(name, json.dumps(results[name]), flush=True)
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
