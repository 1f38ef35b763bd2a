"""Per-task overhead of a finished suite run, from its report (summary.json): what the runner adds around
the evaluation, and everything beyond the kernel's own timed samples.

    python benchmarks/suite_overhead.py bench-report --out results/suite_overhead_h200_<commit>.json

For each correct task whose baselines came from the cache: runner_s = wall - (verify + profile), the
suite's own share (solution import or copy, the cached build check, the baseline check, rows, journal);
beyond_kernel_s = wall - timed samples, everything a task costs besides timing the kernel (verify's trials
included). Medians and p90s over the tasks; the target is beyond_kernel <= 2 s with cached baselines.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def quantile(values: list[float], q: float) -> float | None:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))] if ordered else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    data = json.loads((args.report / "summary.json").read_text())
    rows = [
        r for r in data["rows"] if r["outcome"] == "correct" and r["baselines_cached"] and r["evaluation_s"]
    ]
    runner = [r["wall_s"] - r["evaluation_s"] for r in rows]
    beyond = [r["wall_s"] - (r["timed_s"] or 0.0) for r in rows]
    verify = [sum(v for k, v in r["phases_s"].items() if k == "verify.judge") for r in rows]
    result = {
        "run_id": data["summary"]["run_id"],
        "environment": data["summary"]["environment"],
        "tasks": len(rows),
        "runner_s": {"median": statistics.median(runner) if runner else None, "p90": quantile(runner, 0.9)},
        "beyond_kernel_s": {
            "median": statistics.median(beyond) if beyond else None,
            "p90": quantile(beyond, 0.9),
        },
        "verify_judge_s": {"median": statistics.median(verify) if verify else None},
        "per_task": [
            {
                "task": r["task_id"],
                "wall_s": r["wall_s"],
                "evaluation_s": r["evaluation_s"],
                "timed_s": r["timed_s"],
            }
            for r in rows
        ],
    }
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "per_task"}, indent=1))


if __name__ == "__main__":
    main()
