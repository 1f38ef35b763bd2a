"""Benchmark: `score_batch` throughput with correct solutions and cached baselines.

    python benchmarks/score_throughput.py --solutions 24 --out results.json

Solutions are the bundled examples' own kernels (elementwise, fused, reduction; L1-size), repeated to
`--solutions`. A first pass scores one of each to fill the build and baseline caches (not timed); the
timed pass scores them all: timed evaluations (verify + profile + reward) per second, one machine, all
its GPUs through one scheduler.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import anyio

from cuda_agent_mcp.agent.actions import EnvironmentSettings
from cuda_agent_mcp.env import Solution, score_batch
from cuda_agent_mcp.tools.gpu import gpu_specs

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = ("relu", "bias_add_relu", "row_sum")


def example_solution(name: str) -> Solution:
    root = REPO / "examples" / name
    files = {"model_new.py": (root / "model_new.py").read_text()}
    files.update({f"kernels/{p.name}": p.read_text() for p in (root / "kernels").iterdir()})
    return Solution(task=f"examples/{name}", files=files)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--solutions", type=int, default=24)
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = EnvironmentSettings(device="cuda", baselines="cached")
    warm = [example_solution(name) for name in EXAMPLES]
    anyio.run(lambda: score_batch(warm, settings=settings))
    batch = [example_solution(EXAMPLES[i % len(EXAMPLES)]) for i in range(args.solutions)]
    started = time.perf_counter()
    scores = anyio.run(lambda: score_batch(batch, settings=settings, concurrency=args.concurrency))
    elapsed = time.perf_counter() - started
    result = {
        "benchmark": "score_throughput",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "gpus": [g.name for g in gpu_specs().gpus],
        "solutions": len(batch),
        "concurrency": args.concurrency or "default (2 per GPU)",
        "wall_s": round(elapsed, 3),
        "evaluations_per_s": round(len(batch) / elapsed, 3),
        "statuses": {s: sum(1 for x in scores if x.status == s) for s in {x.status for x in scores}},
        "rewards": [x.reward for x in scores],
        "target_per_s": 1.0,
    }
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
