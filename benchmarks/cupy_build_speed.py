"""Benchmark: a CuPy workspace's build after a `.cu` edit, in a fresh NVRTC process and in one started ahead.

    python benchmarks/cupy_build_speed.py --out results.json [--edits 8] [--pause 0.5]

The workspace is the CuPy ReLU (benchmarks/cupy_relu) on KernelBench level1/19. Each edit changes the
kernel's bounds test (new content the cache has never seen), then the workspace is rebuilt in one
builder, with `--pause` seconds between builds (an agent reads the result and edits). A builder starts
its next NVRTC process ahead from its second build on (build/warm_compile.py), so the first two builds
are fresh processes and the rest are served by a process started ahead. The issue's targets (#28): at most
0.1 s warm and 0.3 s in a fresh process. NVRTC needs no GPU: this runs on any machine with the toolchain.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, compile_kernels

REPO = Path(__file__).resolve().parent.parent
TASK = REPO / "benchmarks" / "kernelbench_level1_19_ReLU.py"
EXAMPLE = REPO / "benchmarks" / "cupy_relu"


async def run(edits: int, pause_s: float) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="cuda-agent-cupy-build-"))
    try:
        task = load_task_file(TASK, task_id="kernelbench/level1/19")
        session = Session.create(task, work / "ws", cache_dir=work / "cache", language="cupy")
        shutil.copytree(EXAMPLE / "kernels", session.workspace.root / "kernels", dirs_exist_ok=True)
        shutil.copy(EXAMPLE / "model_new.py", session.workspace.root / "model_new.py")
        kernel = session.workspace.root / "kernels" / "relu.cu"
        original = kernel.read_text()
        builds: list[float] = []
        for index in range(edits):
            kernel.write_text(original.replace("if (i < n) y[i]", f"if (i < n + {index} - {index}) y[i]"))
            started = time.perf_counter()
            result = await compile_kernels(session)
            builds.append(round(time.perf_counter() - started, 4))
            assert result.ok and result.files[0].action == "compiled", result.summary
            await anyio.sleep(pause_s)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    fresh, ahead = builds[:2], builds[2:]
    return {
        "benchmark": "cupy_build_speed",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "machine": f"{platform.node()} ({os.cpu_count()} cores)",
        "edits": edits,
        "pause_s": pause_s,
        "build_s": builds,
        "fresh_process_s": fresh,
        "started_ahead_s": ahead,
        "started_ahead_median_s": statistics.median(ahead) if ahead else None,
        "targets_s": {"started_ahead": 0.1, "fresh_process": 0.3},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--edits", type=int, default=8)
    parser.add_argument("--pause", type=float, default=0.5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = anyio.run(run, args.edits, args.pause)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
