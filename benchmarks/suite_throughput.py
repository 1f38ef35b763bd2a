"""100 level-1 solutions scored by one `run_suite` on one GPU, baselines cached: how long does it take?

The suite's level-1 workspace solutions are repeated to N tasks: task i is a copy of problem k = i mod K
(same reference code, so the same cached baselines) under the id throughput/level1/<i>, with that
problem's solution. Run after a suite run that recorded its baselines (or with them in the judge cache):

    python benchmarks/suite_throughput.py --tasks 100 --baselines benchmarks/baselines \
        --out results/suite_throughput_h200_<commit>.json

Writes the wall time, tasks per minute, the outcome counts and the per-task figures of benchmarks/
suite_overhead.py. Nothing is measured twice: the run's report directory is a temporary one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import anyio

from cuda_agent_mcp.bench import SolutionSpec, SuiteRequest, run_suite

REPO = Path(__file__).resolve().parent.parent
KERNELBENCH = REPO.parent / "shared" / "benchmarks" / "kernelbench"
SOLUTIONS = REPO / "benchmarks" / "suites" / "workspaces" / "kernelbench" / "level1"


def build_tree(root: Path, count: int, kernelbench: Path) -> tuple[Path, Path]:
    problems = {int(p.name.split("_")[0]): p for p in (kernelbench / "level1").glob("*.py")}
    available = sorted(int(d.name) for d in SOLUTIONS.iterdir() if (d / "model_new.py").is_file())
    tasks, solutions = root / "tasks", root / "solutions"
    (tasks / "level1").mkdir(parents=True)
    for i in range(1, count + 1):
        number = available[(i - 1) % len(available)]
        source = problems[number]
        (tasks / "level1" / f"{i}_{source.stem.split('_', 1)[1]}.py").write_text(source.read_text())
        shutil.copytree(SOLUTIONS / str(number), solutions / "level1" / str(i))
    return tasks, solutions


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="suite-throughput-") as tmp:
        tasks, solutions = build_tree(Path(tmp), args.tasks, args.kernelbench)
        request = SuiteRequest(
            sources=[str(tasks)],
            solutions=SolutionSpec(kind="workspaces", path=str(solutions)),
            out_dir=str(Path(tmp) / "report"),
            baseline_tables=[str(p) for p in args.baselines],
            budget_s=args.budget,
            trials=args.trials,
        )
        started = time.monotonic()
        result = await run_suite(request)
        wall = time.monotonic() - started
    rows = result.rows
    cached = [r for r in rows if r.baselines_cached and r.evaluation_s is not None]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
    ).stdout
    figures = {
        "commit": commit.strip(),
        "environment": result.summary.environment,
        "tasks": len(rows),
        "wall_s": round(wall, 1),
        "tasks_per_minute": round(60 * len(rows) / wall, 1),
        "target": "100 tasks in <= 600 s",
        "outcomes": {o: sum(1 for r in rows if r.outcome == o) for o in {r.outcome for r in rows}},
        "baselines_cached": len(cached),
        "median_task_wall_s": statistics.median(r.wall_s for r in rows) if rows else None,
        "median_runner_s": statistics.median(r.wall_s - (r.evaluation_s or 0) for r in cached)
        if cached
        else None,
        "median_beyond_kernel_s": statistics.median(r.wall_s - (r.timed_s or 0) for r in cached)
        if cached
        else None,
        "settings": {"trials": args.trials, "budget_s": args.budget},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument(
        "--kernelbench", type=Path, default=KERNELBENCH, help="the KernelBench tree (level1/ ...)"
    )
    parser.add_argument("--baselines", type=Path, nargs="*", default=[REPO / "benchmarks" / "baselines"])
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    anyio.run(main, parser.parse_args())
