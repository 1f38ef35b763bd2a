"""Write a run's report: report.html (self-contained), summary.json (the summary and every row) and
rows.csv (the same rows, flat). Rewritten whole each time, atomically, from the durable rows."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path

from cuda_agent_mcp.bench import html, plots
from cuda_agent_mcp.bench.models import SuiteSummary, TaskRow

CSV_COLUMNS = (
    "task_id", "name", "level", "outcome", "failure", "message", "solution", "solution_kind", "reward",
    "candidate_ms", "eager_ms", "compile_ms", "speedup_vs_eager", "speedup_vs_eager_low", "speedup_vs_eager_high",
    "speedup_vs_compile", "speedup_vs_compile_low", "speedup_vs_compile_high", "sol_t_ms", "sol_bound",
    "sol_fraction", "sol_score", "low_confidence", "within_noise", "faster_than_sol", "evidence_missing",
    "baselines_cached", "build_wall_s", "build_files", "build_compiled", "max_registers", "journal_record", "wall_s",
    "language",  # last: the columns before it read as they did before languages existed
)  # fmt: skip
PLOTS_MISSING = (
    "Plots need matplotlib: pip install 'cuda-agent-mcp[report]' and run `cuda-agent bench report DIR`."
)


def write_report(directory: Path, summary: SuiteSummary, rows: Sequence[TaskRow]) -> list[str]:
    """The three report files; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    figures = plots.figures(rows, summary.groups)
    written = {
        "summary.json": json.dumps(
            {"summary": summary.model_dump(mode="json"), "rows": [r.model_dump(mode="json") for r in rows]},
            indent=1,
        ),
        "rows.csv": csv_text(rows),
        "report.html": html.page(summary, rows, figures, PLOTS_MISSING),
    }
    for name, text in written.items():
        _write(directory / name, text)
    return [str(directory / name) for name in written]


def csv_row(row: TaskRow) -> dict[str, object]:
    sol = row.speed_of_light
    eager_ci, compile_ci = row.speedup_vs_eager_ci, row.speedup_vs_compile_ci
    build = row.build
    return {
        "task_id": row.task_id, "name": row.name, "level": row.level, "outcome": row.outcome,
        "failure": row.failure, "message": row.message, "solution": row.solution, "solution_kind": row.solution_kind,
        "reward": row.reward, "candidate_ms": row.candidate_ms, "eager_ms": row.eager_ms, "compile_ms": row.compile_ms,
        "speedup_vs_eager": row.speedup_vs_eager,
        "speedup_vs_eager_low": eager_ci.low if eager_ci else None,
        "speedup_vs_eager_high": eager_ci.high if eager_ci else None,
        "speedup_vs_compile": row.speedup_vs_compile,
        "speedup_vs_compile_low": compile_ci.low if compile_ci else None,
        "speedup_vs_compile_high": compile_ci.high if compile_ci else None,
        "sol_t_ms": sol.t_sol_ms if sol else None, "sol_bound": sol.bound if sol else None,
        "sol_fraction": sol.fraction if sol else None, "sol_score": sol.score if sol else None,
        "low_confidence": row.low_confidence, "within_noise": row.within_noise,
        "faster_than_sol": row.faster_than_sol, "evidence_missing": ";".join(row.evidence_missing),
        "baselines_cached": row.baselines_cached,
        "build_wall_s": build.wall_s if build else None, "build_files": build.files if build else None,
        "build_compiled": build.compiled if build else None,
        "max_registers": max((k.registers for k in build.kernels), default=None) if build else None,
        "journal_record": row.journal_record, "wall_s": row.wall_s, "language": row.language,
    }  # fmt: skip


def csv_text(rows: Sequence[TaskRow]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in csv_row(row).items()})
    return buffer.getvalue()


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
