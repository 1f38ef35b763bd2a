"""Benchmark: what each executor backend adds to a command (no GPU needed).

    python benchmarks/executor_overhead.py --repeats 10 --out results.json

For each backend available here (local process group, the process sandbox, Docker): the median wall
time of `true` (the fixed cost of one isolated command) and of compiling the ReLU example's kernel with
nvcc (a real build step, same command line on every backend), and the latter's difference from local.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
from pathlib import Path

import anyio

from cuda_agent_mcp.build import BuildFlags, discover_toolchain
from cuda_agent_mcp.build.flags import nvcc_command
from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.executors import DockerExecutor, LocalExecutor, ProcessLimits, SandboxedExecutor

REPO = Path(__file__).resolve().parent.parent
KERNEL = REPO / "examples" / "relu" / "kernels" / "relu.cu"


async def median_s(executor: object, argv: list[str], cwd: Path, readable: list[Path], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        result = await executor.run(  # type: ignore[attr-defined]
            argv, cwd=cwd, limits=ProcessLimits(timeout_s=300), readable=readable
        )
        assert result.ok, result.output[-2000:]
        times.append(result.wall_s)
    return round(statistics.median(times), 4)


async def run(repeats: int) -> dict[str, object]:
    toolchain = discover_toolchain()
    work = Path(tempfile.mkdtemp(prefix="cuda-agent-exec-bench-"))
    shutil.copy(KERNEL, work / "relu.cu")
    compile_argv = nvcc_command(toolchain, BuildFlags(arch="sm_90"), "relu.cu", "relu.cu.o", ["."])
    backends: dict[str, object] = {"local": LocalExecutor(), "sandbox": SandboxedExecutor()}
    docker = DockerExecutor()
    try:
        docker.client()
        backends["docker"] = docker
    except ExecutorUnavailable as exc:
        print(f"docker skipped: {exc}")
    figures: dict[str, dict[str, object]] = {}
    for name, executor in backends.items():
        figures[name] = {
            "isolation": list(getattr(executor, "isolation", ())),
            "true_s": await median_s(executor, ["true"], work, [], repeats),
            "nvcc_relu_s": await median_s(
                executor, compile_argv, work, list(toolchain.readable_paths), max(3, repeats // 3)
            ),
        }
    for name in figures:
        figures[name]["nvcc_added_s"] = round(
            figures[name]["nvcc_relu_s"] - figures["local"]["nvcc_relu_s"], 3
        )  # type: ignore[operator]
    shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "executor_overhead",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "machine": f"{platform.node()} ({os.cpu_count()} cores, no GPU needed)",
        "repeats": repeats,
        "backends": figures,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = anyio.run(run, args.repeats)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
