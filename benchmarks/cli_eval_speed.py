"""Benchmark: `cuda-agent eval` from a shell, as a user runs it, with and without the judge service.

    python benchmarks/cli_eval_speed.py --out results.json [--examples relu row_sum] [--warm 3]

Each bundled example is copied outside the repository and evaluated with `python -m cuda_agent_mcp eval
COPY --json` from `/`: first with nothing running (the judge service stopped; the first call starts it),
then `--warm` more times with the service running. Baselines are measured by the first call of each
example and cached after. Per call: the wall time of the command, its reward, and the phases of its
verify and profile (`judge_start`, `worker_start`, `sanitizer`, `in_judge`, ...). Targets (issue 25): a
level-1 task with cached baselines at most 3 s with the service running, at most 12 s with nothing running.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cli(*args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/",
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        },
    )
    return done, time.perf_counter() - started


def evaluate(workspace: Path) -> dict[str, object]:
    done, wall = cli("eval", str(workspace), "--json")
    record: dict[str, object] = {"wall_s": round(wall, 3), "exit": done.returncode}
    try:
        result = json.loads(done.stdout)
    except ValueError:
        record["error"] = (done.stdout + done.stderr)[-1500:]
        return record
    if "error" in result:
        record["error"] = result["error"]
        return record
    profile = result.get("profile") or {}
    record.update(
        reward=result["reward"],
        verify_status=result["verify"]["verdict"]["status"],
        profile_status=(profile.get("verdict") or {}).get("status"),
        baselines_cached=profile.get("baselines_cached"),
        verify_s=result["verify"].get("wall_s"),
        profile_s=profile.get("wall_s"),
        verify_phases_s=result["verify"].get("phases_s"),
        profile_phases_s=profile.get("phases_s"),
        sanitizer=(result["verify"].get("sanitizer") or {}).get("status"),
    )
    return record


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", nargs="+", default=["relu", "row_sum", "bias_add_relu"])
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cuda-agent-cli-bench-"))
    copies = {}
    for name in args.examples:
        copies[name] = work / name
        shutil.copytree(REPO / "examples" / name, copies[name])
    runs: dict[str, list[dict[str, object]]] = {name: [] for name in args.examples}
    result: dict[str, object] = {
        "benchmark": "cli_eval_speed",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "runs": runs,
        "targets": {"warm_s": 3.0, "cold_cached_s": 12.0},
    }

    def record(name: str, service: str) -> None:
        runs[name].append({"service": service, **evaluate(copies[name])})
        warm = [
            r["wall_s"] for rs in runs.values() for r in rs if r["service"] == "running" and "error" not in r
        ]
        result["warm_median_s"] = round(statistics.median(warm), 3) if warm else None
        if args.out:  # after every call: a run cut short still leaves what it measured
            args.out.write_text(json.dumps(result, indent=2) + "\n")

    cli("judges", "stop")
    first = args.examples[0]
    record(first, "none running")
    for name in args.examples[1:]:
        record(name, "running, first call of the task")
    for _ in range(args.warm):
        for name in args.examples:
            record(name, "running")
    status, _ = cli("judges", "status", "--json")
    result["service_status"] = (
        json.loads(status.stdout) if status.stdout.strip().startswith("{") else status.stdout
    )
    cli("judges", "stop")
    # Cold with cached baselines: nothing running, the task's baselines already measured.
    record(first, "none running, baselines cached")
    cli("judges", "stop")
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
