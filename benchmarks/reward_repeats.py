"""Benchmark: does the same kernel get the same reward every time (issue 16, "Rewards that repeat")?

    python benchmarks/reward_repeats.py --repeats 50 --concurrency 1 --concurrency 8 --out results.json

Each bundled example's own kernel is scored `--repeats` times through `score_batch` (full evaluate:
verify, profile with cached baselines, reward), once with one evaluation at a time and once with
`--concurrency` evaluations in flight on the GPU. Per example and setting: the reward distribution, the
share of the most common reward, the speedups' spread, and how many results were `within_noise`. The
target: a solution whose speedup is at least 3% from a threshold gets the same reward in >= 99% of
repeats; one inside that band is reported within noise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import Counter
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


def summary(scores: list, wall_s: float) -> dict:
    rewards = Counter(s.reward for s in scores)
    eager = [s.speedup_vs_eager for s in scores if s.speedup_vs_eager]
    compiled = [s.speedup_vs_compile for s in scores if s.speedup_vs_compile]
    return {
        "repeats": len(scores),
        "wall_s": round(wall_s, 2),
        "rewards": dict(sorted(rewards.items())),
        "most_common_share": round(rewards.most_common(1)[0][1] / len(scores), 3) if scores else None,
        "statuses": dict(Counter(s.status for s in scores)),
        "speedup_vs_eager": _spread(eager),
        "speedup_vs_compile": _spread(compiled),
        "messages": sorted({s.message[:200] for s in scores if s.message})[:5],
    }


def _spread(values: list[float]) -> dict | None:
    if not values:
        return None
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--concurrency", type=int, action="append")
    parser.add_argument("--examples", nargs="*", default=list(EXAMPLES))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    settings = EnvironmentSettings(device="cuda", baselines="cached")
    anyio.run(lambda: score_batch([example_solution(n) for n in args.examples], settings=settings))  # caches
    result: dict = {
        "benchmark": "reward_repeats",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "gpus": [g.name for g in gpu_specs().gpus],
        "target": "same milestone reward in >= 99% of repeats for speedups >= 3% from a threshold",
        "runs": {},
    }
    for concurrency in args.concurrency or [1, 8]:
        for name in args.examples:
            batch = [example_solution(name)] * args.repeats
            started = time.perf_counter()
            scores = anyio.run(
                lambda b=batch, c=concurrency: score_batch(b, settings=settings, concurrency=c)
            )
            result["runs"][f"{name}@{concurrency}"] = summary(scores, time.perf_counter() - started)
            print(name, concurrency, json.dumps(result["runs"][f"{name}@{concurrency}"]), flush=True)
            if args.out:
                args.out.write_text(json.dumps(result, indent=2) + "\n")  # written as it goes
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
