"""Task synthesis yield: candidates through the filters, yield per filter, time per candidate and per
accepted task (issue 27). One run per call; the report is written with the machine and the commit.

    python benchmarks/synth_yield.py --count 1000 --no-runtime --out benchmarks/results/synth_cheap_cpu.json
    python benchmarks/synth_yield.py --count 100 --out benchmarks/results/synth_runtime_cpu.json
    python benchmarks/synth_yield.py --count 200 --device cuda --compile --out .../synth_gpu_h200.json

KernelBench for decontamination: --against (default ../shared/benchmarks/kernelbench, else .device/kernelbench).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import anyio

from cuda_agent_mcp.synth.pipeline import synthesize
from cuda_agent_mcp.synth.settings import SynthesisSettings
from cuda_agent_mcp.tools.gpu import gpu_specs

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--runtime", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--task-audit", action="store_true")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--against", type=Path, default=None)
    parser.add_argument(
        "--run-dir", type=Path, default=None, help="keep the run here (default: a temporary one)"
    )
    parser.add_argument(
        "--stop-after", type=float, default=None, help="start no chunk after this many seconds"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    against = args.against or next(
        (
            p
            for p in (REPO.parent / "shared/benchmarks/kernelbench", REPO / ".device/kernelbench")
            if (p / "level1").is_dir()
        ),
        None,
    )
    settings = SynthesisSettings(
        count=args.count, seed=args.seed, device=args.device, runtime=args.runtime, compile=args.compile,
        against=(str(against),) if against else (), task_audit=args.task_audit, timeout_s=args.timeout,
    )  # fmt: skip
    gpus = [str(g.index) for g in gpu_specs().gpus] if args.device == "cuda" else []
    last = [0.0]

    def progress(p: object) -> None:
        now = time.monotonic()
        if now - last[0] > 15:
            last[0] = now
            print(p, flush=True)

    with tempfile.TemporaryDirectory(prefix="synth-bench-") as tmp:
        run_dir = args.run_dir or Path(tmp) / "run"
        started = time.monotonic()
        report = anyio.run(
            lambda: synthesize(
                settings,
                run_dir,
                workers=args.workers,
                gpus=gpus,
                progress=progress,
                stop_after_s=args.stop_after,
            )
        )
        wall = time.monotonic() - started
        rows = [json.loads(line) for line in (run_dir / "tasks.jsonl").read_text().splitlines()]
        decided = len((run_dir / "outcomes.jsonl").read_text().splitlines())
    result = {
        "commit": os.environ.get("BENCH_COMMIT") or _git("rev-parse", "--short", "HEAD"),
        "machine": {
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "gpus": [g.name for g in gpu_specs().gpus],
        },
        "command": "python benchmarks/synth_yield.py " + " ".join(_argv()),
        "wall_s": round(wall, 1),
        "decided": decided,
        "report": report.model_dump(mode="json", exclude={"files", "out"}),
        "accepted_examples": [
            {"ops": r["ops"], "provenance_filters": r["provenance"]["filters"]} for r in rows[:3]
        ],
        "accepted_codes": [r["code"] for r in rows],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"{report.accepted}/{report.candidates} accepted in {wall:.1f} s -> {args.out}")
    for count in report.filters:
        print(
            f"  {count.name:<15} entered {count.entered:>5} passed {count.passed:>5} dropped {count.dropped:>5} skipped {count.skipped:>5}  {'; '.join(count.top_reasons[:2])}"
        )


def _argv() -> list[str]:
    import sys

    return sys.argv[1:]


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    main()
