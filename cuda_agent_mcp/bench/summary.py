"""A run's summary (what `bench show`, the MCP tool and the report print) and the index of runs by id."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from cuda_agent_mcp.bench.metrics import language_groups, suite_groups
from cuda_agent_mcp.bench.models import SolutionSpec, SuiteRequest, SuiteSummary, TaskRow
from cuda_agent_mcp.bench.rundir import RunDirectory, RunManifest, read_run
from cuda_agent_mcp.errors import UsageError

RUNS_INDEX = "bench/runs.json"


def build_summary(
    run_dir: RunDirectory, request: SuiteRequest, *, started_at: float, complete: bool
) -> SuiteSummary:
    return summarize(
        run_dir.manifest,
        run_dir.ordered(),
        request.solutions,
        started_at=started_at,
        finished_at=time.time(),
        complete=complete,
        resumed=run_dir.resumed,
    )


def summarize(
    manifest: RunManifest,
    rows: list[TaskRow],
    solutions: SolutionSpec,
    *,
    started_at: float,
    finished_at: float | None,
    complete: bool,
    resumed: int = 0,
) -> SuiteSummary:
    groups = suite_groups(rows)
    overall = groups[0]
    environment = next((r.environment for r in rows if r.environment), {})
    notes: list[str] = []
    if not complete:
        notes.append(
            f"partial: {len(rows)} of {len(manifest.tasks)} tasks have a row; run the same command again to continue"
        )
    if resumed:
        notes.append(f"{resumed} rows come from an earlier, interrupted run of the same request")
    if overall.correct and overall.sol_measured < overall.correct:
        notes.append(
            f"{overall.correct - overall.sol_measured} of {overall.correct} correct tasks have no speed-of-light "
            "figure (not measured)"
        )
    correct = [r for r in rows if r.outcome == "correct"]
    if correct and all(r.speedup_vs_compile_ci is None for r in correct):
        notes.append("speedup confidence intervals were not measured")
    if errors := overall.task_errors:
        notes.append(f"{len(errors)} task error(s) (baseline failed), left out of every denominator")
    if errors := overall.infra_errors:
        notes.append(
            f"{len(errors)} infrastructure error(s), left out of every denominator; run again to retry them"
        )
    return SuiteSummary(
        run_id=manifest.run_id,
        rules=str(manifest.request.get("rules", "cuda-agent")),  # type: ignore[arg-type]  # the manifest's, validated here
        device=str(manifest.request.get("device", "cuda")),
        solutions=describe_solutions(solutions),
        selected=len(manifest.tasks),
        measured=len(rows),
        complete=complete,
        groups=groups,
        languages=language_groups(rows),
        environment=environment,
        notes=notes,
        started_at=started_at,
        finished_at=finished_at,
    )


def describe_solutions(spec: SolutionSpec) -> str:
    if spec.kind == "kernelbench":
        return f"KernelBench single-file solutions in {spec.path}"
    details = [spec.model] if spec.kind == "policy" and spec.model else []
    if spec.language != "cuda":
        details.append(f"{spec.language} kernels")
    what = f"policy {spec.policy}" if spec.kind == "policy" else f"workspaces in {spec.path}"
    return what + (f" ({', '.join(details)})" if details else "")


def summary_of(directory: Path) -> SuiteSummary:
    """The summary of a report directory, finished or still running."""
    manifest, rows = read_run(directory)
    written = directory / "summary.json"
    finished = None
    if written.is_file():
        try:
            finished = json.loads(written.read_text()).get("summary", {}).get("finished_at")
        except ValueError:
            finished = None
    spec = SolutionSpec.model_validate(manifest.request["solutions"])
    complete = len(rows) == len(manifest.tasks) and not any(r.outcome == "infra_error" for r in rows)
    return summarize(
        manifest, rows, spec, started_at=manifest.created_at, finished_at=finished, complete=complete
    )


def register_run(cache_dir: Path, run_id: str, directory: Path) -> None:
    """Remember where run `run_id` writes its report (for `bench://runs` and summaries by id)."""
    index = cache_dir / RUNS_INDEX
    runs = runs_index(cache_dir)
    runs[run_id] = str(directory.resolve())
    index.parent.mkdir(parents=True, exist_ok=True)
    temporary = index.with_name(f".runs.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(runs, indent=1) + "\n")
    os.replace(temporary, index)


def runs_index(cache_dir: Path) -> dict[str, str]:
    try:
        data = json.loads((cache_dir / RUNS_INDEX).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def run_directory(cache_dir: Path, run: str, *, paths: bool = True) -> Path:
    """A run's report directory from its id (see register_run) or, where `paths`, its path (the MCP
    server takes ids only: a remote client names no directories of this machine)."""
    known = runs_index(cache_dir)
    if run in known:
        return Path(known[run])
    path = Path(run)
    if paths and (path / "run.json").is_file():
        return path
    where = "a run id from bench://runs" if not paths else "a run id or a report directory"
    raise UsageError(f"no bench run {run!r}: give {where}")
