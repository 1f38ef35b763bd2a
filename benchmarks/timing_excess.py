"""Diagnostic: how far the judge's clock runs beyond the worker's on honest small kernels.

    python benchmarks/timing_excess.py --repeats 8 --out results.json

Each bundled example is built and profiled `--repeats` times (baselines cached after the first). For every
profile it records the verdict of each judge run (a second run happens after a clock disagreement) and, for
the candidate and both baselines, the judge's excess over the worker's wall clock net of the round trip
(median and worst call). The `timing_disagreement` rule allows 0.5 ms + 25 % of the kernel time per call; a
worst call near that margin explains an occasional rejection of an honest kernel.

It also times, in this process, what a worker does between its clock stopping and its reply (sharing a
fresh output by CUDA IPC), since that is inside the judge's clock and outside the worker's.
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

from cuda_agent_mcp.results import ProfileResult, TimingStats
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import ProfileRequest, Session, compile_kernels, profile_kernels

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = ("relu", "bias_add_relu", "row_sum")


def _excess(stats: TimingStats | None) -> dict[str, float | None] | None:
    if stats is None:
        return None
    return {
        "median_ms": stats.median_ms,
        "excess_median_ms": stats.judge_excess_median_ms,
        "excess_max_ms": stats.judge_excess_max_ms,
        "discarded": stats.discarded_samples,
        "samples": stats.samples,
    }


def _record(result: ProfileResult) -> dict[str, object]:
    return {
        "verdict": result.verdict.model_dump(exclude={"log_tail"}),
        "first_verdict": result.first_verdict.model_dump() if result.first_verdict else None,
        "measurements": result.measurements,
        "candidate": _excess(result.candidate),
        "eager": _excess(result.eager),
        "compiled": _excess(result.compiled),
    }


async def profile_example(name: str, repeats: int, work: Path, device: str) -> dict[str, object]:
    example = REPO / "examples" / name
    session = Session.create(
        load_task_file(example / "model.py", task_id=f"example/{name}"), work / name, cache_dir=work / "cache"
    )
    shutil.copytree(example / "kernels", session.workspace.root / "kernels", dirs_exist_ok=True)
    shutil.copy(example / "model_new.py", session.workspace.root / "model_new.py")
    build = await compile_kernels(session)
    assert build.ok, build.summary
    runs = [_record(await profile_kernels(session, ProfileRequest(baselines="measure", device=device)))]
    for _ in range(repeats - 1):
        runs.append(_record(await profile_kernels(session, ProfileRequest(device=device))))
    return {"example": name, "runs": runs}


def share_cost_ms(numel: int, calls: int) -> dict[str, float]:
    """Time `share` of a freshly allocated CUDA tensor, as a worker does after each timed call."""
    import torch

    from cuda_agent_mcp.wire.transport import share

    costs = []
    for _ in range(calls):
        output = torch.empty(numel, device="cuda")
        torch.cuda.synchronize()
        started = time.perf_counter()
        share(output)
        costs.append((time.perf_counter() - started) * 1e3)
        del output
    ordered = sorted(costs)
    return {
        "numel": numel,
        "median_ms": statistics.median(ordered),
        "p99_ms": ordered[int(0.99 * (len(ordered) - 1))],
        "max_ms": ordered[-1],
    }


async def run(repeats: int, device: str) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="cuda-agent-timing-excess-"))
    try:
        examples = [await profile_example(name, repeats, work, device) for name in EXAMPLES]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "timing_excess",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "repeats": repeats,
        "margin_ms": "0.5 + 0.25 x kernel time, per call",
        "examples": examples,
        "share_cost": [share_cost_ms(n, 500) for n in (1 << 10, 1 << 20, 1 << 24)]
        if device == "cuda"
        else [],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = anyio.run(run, args.repeats, args.device)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
