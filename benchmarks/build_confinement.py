"""Benchmark: what the build's view costs per compile (principle 7, `build/confine.py`).

    python benchmarks/build_confinement.py --out results.json [--pairs 15]

Compiles the ReLU example's kernel (kernels/relu.cu, the inner loop's one recompiled file) with the
build's own nvcc command line, once directly and once through the Landlock wrapper, alternating so that
load on the machine hits both alike; reports both medians and the median of the paired differences.
Also times the wrapper alone around `/bin/true` (interpreter start, Landlock, exec).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from cuda_agent_mcp.build import BuildFlags, discover_toolchain
from cuda_agent_mcp.build.confinement import (
    TEMP_DIR,
    build_environment,
    plan_view,
    toolchain_readable,
)
from cuda_agent_mcp.build.flags import nvcc_command
from cuda_agent_mcp.executors import LocalExecutor

REPO = Path(__file__).resolve().parent.parent
KERNEL = REPO / "examples" / "relu" / "kernels" / "relu.cu"


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stdout + done.stderr
    return elapsed


def run(pairs: int) -> dict[str, object]:
    toolchain = discover_toolchain()
    view = plan_view(LocalExecutor())
    assert view.landlock, "this machine has no Landlock: nothing to measure"
    staging = Path(tempfile.mkdtemp(prefix="cuda-agent-confine-bench-"))
    (staging / TEMP_DIR).mkdir()
    (staging / "kernels").mkdir()
    shutil.copy(KERNEL, staging / "kernels" / "relu.cu")
    env = build_environment(toolchain, staging)
    readable = toolchain_readable(toolchain)
    argv = nvcc_command(toolchain, BuildFlags(), "./kernels/relu.cu", "./kernels/relu.cu.o", ["."])
    confined = view.command(argv, staging=staging, readable=readable)
    wrapper_only = view.command(["/bin/true"], staging=staging, readable=readable)
    direct_s, confined_s, wrapper_s = [], [], []
    _timed(argv, staging, env)  # warm the page cache
    for index in range(pairs):
        order = [(argv, direct_s), (confined, confined_s)]
        for command, sink in order if index % 2 == 0 else reversed(order):
            sink.append(_timed(command, staging, env))
        wrapper_s.append(_timed(wrapper_only, staging, env))
    shutil.rmtree(staging, ignore_errors=True)
    differences = [c - d for c, d in zip(confined_s, direct_s, strict=True)]
    return {
        "benchmark": "build_confinement",
        "commit": os.environ.get("BENCH_COMMIT")
        or subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip(),
        "machine": {
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "toolchain": toolchain.describe(),
        },
        "view": list(view.layers),
        "unit": "examples/relu kernels/relu.cu, nvcc -O3 -arch=sm_90 (the build's own command line)",
        "pairs": pairs,
        "direct_compile_median_s": round(statistics.median(direct_s), 4),
        "confined_compile_median_s": round(statistics.median(confined_s), 4),
        "paired_difference_median_s": round(statistics.median(differences), 4),
        "wrapper_alone_median_s": round(statistics.median(wrapper_s), 4),
        "direct_compile_s": [round(t, 4) for t in direct_s],
        "confined_compile_s": [round(t, 4) for t in confined_s],
        "wrapper_alone_s": [round(t, 4) for t in wrapper_s],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = json.dumps(run(args.pairs), indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
