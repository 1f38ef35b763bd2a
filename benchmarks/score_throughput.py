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
import threading
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


class GpuBusy:
    """NVML's utilization of GPU 0 (the share of each sample period with a kernel running), sampled every
    100 ms while the timed pass runs; None where NVML cannot be read."""

    def __init__(self) -> None:
        self.samples: list[int] = []
        self._stop = threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self._nvml = pynvml
        except Exception:
            self._nvml = None
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.samples.append(int(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))

    def __enter__(self) -> GpuBusy:
        if self._nvml is not None:
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def fraction(self) -> float | None:
        return round(sum(self.samples) / (100 * len(self.samples)), 3) if self.samples else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--solutions", type=int, default=24)
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("CUDA_AGENT_JUDGE_SERVICE", "off")  # the environment's own judges, as a trainer's
    settings = EnvironmentSettings(device="cuda", baselines="cached")
    warm = [example_solution(name) for name in EXAMPLES]
    anyio.run(lambda: score_batch(warm, settings=settings))
    batch = [example_solution(EXAMPLES[i % len(EXAMPLES)]) for i in range(args.solutions)]
    with GpuBusy() as busy:
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
        "gpu_busy_fraction_nvml": busy.fraction,
        "messages": sorted({x.message[:300] for x in scores if x.message})[:8],
        "targets": {"evaluations_per_s": 3.0, "gpu_busy_fraction": 0.7},
    }
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
