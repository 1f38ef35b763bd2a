"""Benchmark: what the unprivileged view costs per `run` call and per evaluation (issue 17).

    python benchmarks/isolation_cost.py --runs 30 --evaluations 8 --out results.json

Per `run` (the tool layer's `run_command`, the path an MCP call takes): the median wall time of `true`
and of `python -c pass` in a relu workspace, for the session's isolating executor (namespaces view, a
uid of its own, Landlock, the quota overlay) against the same command with reduced isolation (no view:
what the opt-in runs), and each view backend alone at the executor (`namespaces` with and without the
quota overlay, `bwrap` where installed). Target: <= 50 ms added per `run`.

Per evaluation: a judge server started as the worker uid in its own namespaces (`$CUDA_AGENT_JUDGE_USER
=auto`, the default) against one started as the server's user (`server`): its start, and the median
warm `verify` (device `cpu` here, `cuda` with `--device cuda` on a GPU machine; each mode in a fresh
process so the pools do not mix). On a GPU the kernel time change is what sandbox_overhead.py measures.
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

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "relu"
TORCH_MODEL_NEW = (
    "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        return x.clamp_min(0)\n"
)


def _median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 2)


async def run_figures(runs: int) -> dict[str, object]:
    from cuda_agent_mcp.executors import LocalExecutor, ProcessLimits
    from cuda_agent_mcp.executors.sandboxed import SandboxedExecutor, view_problems
    from cuda_agent_mcp.isolation.quota import WorkspaceQuota
    from cuda_agent_mcp.tasks import load_task_file
    from cuda_agent_mcp.tools import Session
    from cuda_agent_mcp.tools.run import RunRequest, run_command

    work = Path(tempfile.mkdtemp(prefix="cuda-agent-isolation-bench-"))
    work.chmod(0o755)  # bubblewrap (as another uid when root) must reach its working directory itself
    task = load_task_file(EXAMPLE / "model.py")
    figures: dict[str, object] = {"view_problems": dict(view_problems())}

    async def tool_path(session: Session, argv: list[str]) -> float:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            result = await run_command(session, RunRequest(argv=argv))
            times.append(time.perf_counter() - started)
            assert result.process.ok, result.process.output[-500:]
        return _median_ms(times)

    isolated = Session.create(task, work / "isolated", cache_dir=work / "cache")
    reduced = Session.create(task, work / "reduced", cache_dir=work / "cache", executor=LocalExecutor())
    reduced._run_executor = LocalExecutor()  # what reduced isolation runs where no view can be built
    python = [sys.executable, "-c", "pass"]
    for name, argv in (("true", ["true"]), ("python", python)):
        figures[f"run_tool_{name}_ms"] = {
            "isolated": await tool_path(isolated, argv),
            "reduced": await tool_path(reduced, argv),
            "isolation": list(isolated.run_executor.isolation),  # type: ignore[attr-defined]
        }
        row = figures[f"run_tool_{name}_ms"]
        row["added"] = round(row["isolated"] - row["reduced"], 2)  # type: ignore[index,operator]

    limits = ProcessLimits(timeout_s=60)
    backends: dict[str, dict[str, float]] = {}
    candidates: list[tuple[str, object, WorkspaceQuota | None]] = [("local", LocalExecutor(), None)]
    for backend in ("namespaces", "bwrap"):
        if dict(view_problems()).get(backend):
            continue
        executor = SandboxedExecutor()
        executor.backend = backend  # type: ignore[assignment]
        candidates.append((backend, executor, None))
        if backend == "namespaces":
            candidates.append(
                ("namespaces+quota", executor, WorkspaceQuota(bytes=1 << 30, files=4096, present=8))
            )
    for name, executor, quota in candidates:
        directory = work / f"exec-{name}"
        directory.mkdir()
        times = []
        for _ in range(runs):
            options = {"quota": quota} if quota is not None else {}
            result = await executor.run(["true"], cwd=directory, limits=limits, **options)  # type: ignore[attr-defined]
            assert result.ok, result.output[-500:]
            times.append(result.wall_s)
        backends[name] = {"true_ms": _median_ms(times)}
    figures["executor_true_ms"] = backends
    shutil.rmtree(work, ignore_errors=True)
    return figures


def evaluation_figures(evaluations: int, device: str) -> dict[str, object]:
    """Each judge mode measured in a fresh process (the pools are per process)."""
    results = {}
    for mode in ("auto", "server"):
        env = {**os.environ, "CUDA_AGENT_JUDGE_USER": mode}
        done = subprocess.run(
            [sys.executable, __file__, "--one-mode", "--evaluations", str(evaluations), "--device", device],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    added = results["auto"]["verify_median_s"] - results["server"]["verify_median_s"]
    return {**results, "verify_added_s": round(added, 4)}


def one_mode(evaluations: int, device: str) -> dict[str, object]:
    from cuda_agent_mcp.tasks import load_task_file
    from cuda_agent_mcp.tools import Session, VerifyRequest, verify_kernels

    work = Path(tempfile.mkdtemp(prefix="cuda-agent-judge-bench-"))
    shutil.copytree(EXAMPLE, work / "ws")
    if device == "cpu":
        (work / "ws" / "model.py").write_text(
            (EXAMPLE / "model.py")
            .read_text()
            .replace("batch_size = 4096\ndim = 8192", "batch_size = 64\ndim = 256")
        )
        (work / "ws" / "model_new.py").write_text(TORCH_MODEL_NEW)
    cache = Path(os.environ.get("CUDA_AGENT_CACHE", work / "cache"))
    session = Session.open(work / "ws", cache_dir=cache)
    del load_task_file
    request = VerifyRequest(device=device, audit=device != "cpu", trials=2)  # type: ignore[arg-type]
    times, starts, judge = [], [], ""
    for _ in range(evaluations + 1):
        started = time.perf_counter()
        result = anyio.run(verify_kernels, session, request)
        times.append(time.perf_counter() - started)
        starts.append(result.phases_s.get("judge_start", 0.0))
        judge = result.environment.get("judge", "")
        assert result.verdict.status == "passed", result.verdict
    shutil.rmtree(work, ignore_errors=True)
    return {
        "judge": judge,
        "first_verify_s": round(times[0], 3),
        "judge_start_s": round(starts[0], 3),
        "verify_median_s": round(statistics.median(times[1:]), 4),
        "evaluations": evaluations,
        "device": device,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--evaluations", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--one-mode", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.one_mode:
        print(json.dumps(one_mode(args.evaluations, args.device)))
        return
    result = {
        "benchmark": "isolation_cost",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "machine": f"{platform.node()} ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}), uid {os.geteuid()}",
        "runs": args.runs,
        "run": anyio.run(run_figures, args.runs),
        "evaluation": evaluation_figures(args.evaluations, args.device),
    }
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
