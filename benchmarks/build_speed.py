"""Benchmark: cold build and one-.cu-edit rebuild of a one-kernel workspace (examples/relu).

    python benchmarks/build_speed.py --out results.json [--edits 10]

Cold: empty build cache, so binding.cpp, the binding and the kernel are all compiled.
Rebuild: the kernel's launcher is edited (block size and a counter, so every edit is new content
the cache has never seen), then the workspace is rebuilt; median over the edits. Each rebuild is
timed twice: the tool call in this process, and the whole `python -m cuda_agent_mcp compile` command.
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

from cuda_agent_mcp.build import discover_toolchain
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, compile_kernels

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "relu"
KERNEL = "kernels/relu.cu"
BLOCK_SIZES = (128, 256, 512, 1024)


def _git_commit() -> str:
    """The commit measured: $BENCH_COMMIT (set where the tree travels without .git), else git's HEAD."""
    if value := os.environ.get("BENCH_COMMIT"):
        return value
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        out = ""
    return out or "unknown"


def _gpu_name() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
        )
        return out.stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        return "none"


def _edit(path: Path, original: str, index: int) -> None:
    threads = BLOCK_SIZES[index % len(BLOCK_SIZES)]
    text = original.replace("const int threads = 256;", f"const int threads = {threads};  // edit {index}")
    assert text != original, "the kernel no longer has the line this benchmark edits"
    path.write_text(text)


async def run(edits: int) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="cuda-agent-bench-"))
    cache = work / "cache"
    task = load_task_file(EXAMPLE / "model.py", task_id="examples/relu")
    session = Session.create(task, work / "ws", cache_dir=cache)
    for rel in ("kernels/relu.cu", "kernels/relu_binding.cpp", "model_new.py"):
        shutil.copy(EXAMPLE / rel, session.workspace.root / rel)

    started = time.perf_counter()
    cold = await compile_kernels(session)
    cold_s = time.perf_counter() - started
    assert cold.ok, cold.summary
    per_file_cold = {f.file: f.wall_s for f in cold.files}

    kernel = session.workspace.root / KERNEL
    original = kernel.read_text()
    tool_times, cli_times, recompiled = [], [], []
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "CUDA_AGENT_CACHE": str(cache), "PYTHONPATH": pythonpath}
    for index in range(edits):
        _edit(kernel, original, 2 * index)
        started = time.perf_counter()
        result = await compile_kernels(session)
        tool_times.append(time.perf_counter() - started)
        assert result.ok, result.summary
        recompiled.append(sorted(f.file for f in result.files if f.action == "compiled"))

        _edit(kernel, original, 2 * index + 1)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "cuda_agent_mcp", "compile", str(session.workspace.root), "--json"],
            env=env, capture_output=True, text=True,
        )  # fmt: skip
        cli_times.append(time.perf_counter() - started)
        assert done.returncode == 0, done.stderr[-2000:]

    started = time.perf_counter()
    unchanged = await compile_kernels(session)
    unchanged_s = time.perf_counter() - started
    shutil.rmtree(work, ignore_errors=True)
    toolchain = discover_toolchain()
    return {
        "benchmark": "build_speed",
        "commit": _git_commit(),
        "machine": {
            "gpu": _gpu_name(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "toolchain": toolchain.describe(),
        },
        "workspace": "examples/relu (binding.cpp + kernels/relu.cu + kernels/relu_binding.cpp)",
        "cold_build_s": round(cold_s, 3),
        "cold_build_per_file_s": per_file_cold,
        "rebuild_after_cu_edit_tool_s": [round(t, 3) for t in tool_times],
        "rebuild_after_cu_edit_tool_median_s": round(statistics.median(tool_times), 3),
        "rebuild_after_cu_edit_cli_s": [round(t, 3) for t in cli_times],
        "rebuild_after_cu_edit_cli_median_s": round(statistics.median(cli_times), 3),
        "files_recompiled_per_edit": recompiled,
        "rebuild_unchanged_s": round(unchanged_s, 3),
        "unchanged_actions": {f.file: f.action for f in unchanged.files},
        "targets": {"cold_build_s": 30.0, "rebuild_after_cu_edit_median_s": 2.0},
        "reference_cuda_agent_workspace_s": {"cold": 25.9, "after_touching_one_cu": 19.5},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = anyio.run(run, args.edits)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    print(
        f"cold {result['cold_build_s']} s (target 30); rebuild after .cu edit: median "
        f"{result['rebuild_after_cu_edit_tool_median_s']} s tool call, "
        f"{result['rebuild_after_cu_edit_cli_median_s']} s CLI (target 2)"
    )


if __name__ == "__main__":
    main()
