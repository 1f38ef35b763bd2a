"""Build every solution of a suite with the project's builder, without a GPU: do they all compile?

Usage (the KernelBench problems in ../shared/benchmarks/kernelbench, sm_90 code without a GPU):
    CUDA_AGENT_ARCH=sm_90 python benchmarks/suite_builds.py --kind workspaces \
        --solutions benchmarks/suites/workspaces --out results/suite_builds_workspaces.json
    CUDA_AGENT_ARCH=sm_90 python benchmarks/suite_builds.py --kind kernelbench --rules kernelbench \
        --solutions benchmarks/suites/kernelbench_singlefile --out results/suite_builds_kernelbench.json
Each solution is laid out (and a single file imported) exactly as `cuda-agent bench run` does, then built;
the JSON lists every build's outcome, time and kernels. Results are written after each solution.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
import time
from pathlib import Path

import anyio

from cuda_agent_mcp.agent.snapshot import restore
from cuda_agent_mcp.bench.kernelbench_import import import_kernelbench_solution
from cuda_agent_mcp.bench.models import SolutionSpec
from cuda_agent_mcp.bench.rules import task_under
from cuda_agent_mcp.bench.runner import KERNELBENCH_BUILD_LIMITS
from cuda_agent_mcp.bench.solutions import find_solutions, workspace_files
from cuda_agent_mcp.build import BuildLimits
from cuda_agent_mcp.executors import LocalExecutor
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tools import Session, compile_kernels

REPO = Path(__file__).resolve().parent.parent
KERNELBENCH = REPO.parent / "shared" / "benchmarks" / "kernelbench"


async def main(args: argparse.Namespace) -> None:
    catalog = TaskCatalog([args.tasks], include_bundled=False)
    tasks = catalog.list()
    spec = SolutionSpec(kind=args.kind, path=str(args.solutions))
    found, _ = find_solutions(spec, tasks)
    kind = "workspace" if args.kind == "workspaces" else "kernelbench"
    results: list[dict[str, object]] = []
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="suite-builds-") as tmp:
        for task in tasks:
            if task.id not in found:
                continue
            path = found[task.id]
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", task.id)
            session = Session.create(
                task_under(args.rules, task, kind),
                Path(tmp) / slug,
                build_limits=KERNELBENCH_BUILD_LIMITS if kind == "kernelbench" else BuildLimits(),
            )
            started = time.monotonic()
            if kind == "workspace":
                files = workspace_files(path)
            else:
                imported = await import_kernelbench_solution(
                    path, executor=LocalExecutor(), scratch_root=Path(tmp) / "scratch"
                )
                if not imported.ok:
                    results.append(
                        {"task": task.id, "ok": False, "summary": f"import failed: {imported.message}"}
                    )
                    _write(args.out, commit, results)
                    continue
                files = imported.files
            restore(session, files)
            build = await compile_kernels(session)
            results.append(
                {
                    "task": task.id,
                    "solution": str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path),
                    "ok": build.ok,
                    "summary": build.summary,
                    "wall_s": round(time.monotonic() - started, 1),
                    "kernels": [k.name for k in build.kernels],
                    "errors": [f"{d.file}:{d.line}: {d.message}" for d in build.errors][:5],
                }
            )
            print(
                f"{task.id}: {'ok' if build.ok else 'FAILED ' + build.summary} ({results[-1]['wall_s']} s)",
                flush=True,
            )
            _write(args.out, commit, results)


def _write(out: Path, commit: str, results: list[dict[str, object]]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"built": sum(1 for r in results if r["ok"]), "failed": sum(1 for r in results if not r["ok"])}
    out.write_text(json.dumps({"commit": commit, "summary": summary, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solutions", type=Path, required=True)
    parser.add_argument("--kind", choices=["workspaces", "kernelbench"], required=True)
    parser.add_argument("--rules", choices=["cuda-agent", "kernelbench"], default="cuda-agent")
    parser.add_argument("--tasks", type=Path, default=KERNELBENCH)
    parser.add_argument("--out", type=Path, required=True)
    arguments = parser.parse_args()
    anyio.run(main, arguments)
