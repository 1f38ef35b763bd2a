"""The dataset a run leaves: the accepted tasks in the CUDA-Agent-Ops-6K column layout, the rest with why.

Columns as Ops-6K has them (`ops`, `data_source`, `code`), so every loader of that dataset (ours:
`cuda-agent tasks list --tasks DIR/tasks.jsonl`) reads it unchanged; plus `id` and `provenance` (the
composer, its seed, the sizes each filter ran at, every filter's result and measured numbers). Parquet
holds the provenance as a JSON string: its values differ in type from row to row.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

from cuda_agent_mcp.synth.candidate import Candidate
from cuda_agent_mcp.synth.rundir import CandidateOutcome, RunDirectory
from cuda_agent_mcp.synth.settings import SynthesisSettings
from cuda_agent_mcp.synth.sizes import size_globals


def write_dataset(
    run: RunDirectory,
    settings: SynthesisSettings,
    candidates: dict[int, Candidate],
    decided: dict[int, CandidateOutcome],
) -> dict[str, str | None]:
    """tasks.jsonl, tasks.parquet (where pyarrow is installed) and rejected.jsonl, in candidate order."""
    rows, rejected = [], []
    for index in sorted(decided):
        decision, candidate = decided[index], candidates[index]
        if decision.accepted:
            rows.append(task_row(candidate, decision, settings))
        else:
            refusal = next(o for o in decision.outcomes if o.passed is False)
            rejected.append(
                {"index": index, "ops": list(candidate.ops), "filter": refusal.name, "reason": refusal.reason,
                 "measured": refusal.measured, "code": candidate.code}
            )  # fmt: skip
    tasks_path = _write_lines(run.root / "tasks.jsonl", rows)
    rejected_path = _write_lines(run.root / "rejected.jsonl", rejected)
    return {
        "tasks_jsonl": str(tasks_path),
        "tasks_parquet": _write_parquet(run.root / "tasks.parquet", rows),
        "rejected_jsonl": str(rejected_path),
        "report": str(run.root / "report.json"),
    }


def task_row(candidate: Candidate, decision: CandidateOutcome, settings: SynthesisSettings) -> dict[str, Any]:
    try:
        sizes = size_globals(candidate.code)
    except SyntaxError:
        sizes = {}
    return {
        "id": f"synth-{candidate.seed}-{candidate.index:06d}",
        "ops": list(candidate.ops),
        "data_source": f"torch#{len(candidate.ops)}",
        "code": candidate.code,
        "provenance": {
            "composer": candidate.composer,
            "seed": candidate.seed,
            "index": candidate.index,
            "ops": list(candidate.ops),
            "vendor_classes": list(candidate.vendor_classes),
            "composer_estimate_ms": candidate.estimate_ms,
            "notes": candidate.notes,
            "sizes": sizes,
            "ran_at_sizes": decision.ran_at_sizes or "the task's own",
            "device": settings.device,
            "filters": [o.model_dump(mode="json") for o in decision.outcomes],
            "settings_digest": settings.digest(),
            "versions": _versions(),
        },
    }


def _versions() -> dict[str, str]:
    found = {}
    for package in ("cuda-agent-mcp", "torch"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "unknown"
    return found


def _write_lines(path: Path, rows: list[dict[str, Any]]) -> Path:
    partial = path.with_suffix(".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, default=str) + "\n")
    partial.replace(path)
    return path


def _write_parquet(path: Path, rows: list[dict[str, Any]]) -> str | None:
    """None where pyarrow is not installed (`pip install 'cuda-agent-mcp[parquet]'`); the JSONL is whole."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return None
    table = pa.table(
        {
            "id": [r["id"] for r in rows],
            "ops": pa.array([r["ops"] for r in rows], type=pa.list_(pa.string())),
            "data_source": [r["data_source"] for r in rows],
            "code": [r["code"] for r in rows],
            "provenance": [json.dumps(r["provenance"], default=str) for r in rows],
        }
    )
    partial = path.with_suffix(".partial")
    pq.write_table(table, partial)
    partial.replace(path)
    return str(path)
