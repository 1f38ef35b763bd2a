"""Grouping by kernel language: per-language figures beside the overall ones, a CUDA-only report that
reads as before, and run directories written before languages existed still resuming."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from cuda_agent_mcp.bench.metrics import language_groups, suite_groups
from cuda_agent_mcp.bench.models import SolutionSpec, SuiteRequest, TaskRow
from cuda_agent_mcp.bench.report import CSV_COLUMNS, write_report
from cuda_agent_mcp.bench.rundir import RunDirectory
from cuda_agent_mcp.bench.summary import summarize
from cuda_agent_mcp.cli.bench_commands import summary_table
from cuda_agent_mcp.errors import UsageError


def row(task: str, language: str, outcome: str = "correct", *, level: int = 1, speedup: float | None = None,
        failure: str | None = None) -> TaskRow:  # fmt: skip
    return TaskRow(
        task_id=task,
        name=task,
        level=level,
        language=language,  # type: ignore[arg-type]
        solution=None,
        solution_kind=None,
        outcome=outcome,  # type: ignore[arg-type]
        failure=failure,
        speedup_vs_eager=speedup,
        speedup_vs_compile=speedup,
    )


# cuda: 2 scored, 2 correct (4x, 1x). cupy: 3 scored, 1 correct (2x) over two levels, 1 task error.
ROWS = [
    row("c1", "cuda", speedup=4.0),
    row("c2", "cuda", speedup=1.0),
    row("p1", "cupy", speedup=2.0),
    row("p2", "cupy", "incorrect", failure="wrong_output"),
    row("p3", "cupy", "incorrect", level=2, failure="compile_failed"),
    row("p4", "cupy", "task_error", level=2, failure="baseline_failed"),
]


def request(out: Path, language: str = "cuda") -> SuiteRequest:
    spec = SolutionSpec(kind="workspaces", path="/s", language=language)  # type: ignore[arg-type]
    return SuiteRequest(solutions=spec, out_dir=str(out))


def test_each_language_gets_the_overall_figures_of_its_own_rows() -> None:
    cuda, cupy = language_groups(ROWS)
    assert (cuda.group, cuda.scored, cuda.correct, cuda.pass_rate) == ("language cuda", 2, 2, 1.0)
    assert (cupy.group, cupy.scored, cupy.correct) == ("language cupy", 3, 1)
    assert cupy.pass_rate == pytest.approx(1 / 3) and cupy.task_errors == ["p4"]
    assert cuda.compile.geomean_speedup == pytest.approx(2.0)  # sqrt(4 * 1)
    assert [f.count for f in cuda.compile.fast_p] == [2, 1, 1, 1, 1]  # 1x is not faster than 1
    assert cupy.compile.fast_p[1].rate == pytest.approx(1 / 3)
    assert cupy.compile.geomean_speedup == pytest.approx(2.0)
    assert cupy.compile.geomean_speedup_failures_as_1x == pytest.approx(2 ** (1 / 3))
    # Its levels weigh in as in the overall row: level 2 has no correct task, so only level 1 counts.
    assert cupy.compile.geomean_speedup_level_weighted == pytest.approx(2.0)
    overall = suite_groups(ROWS)[0]
    assert (overall.scored, overall.correct) == (5, 3)  # the overall figures pool both languages
    assert language_groups([]) == []


def test_a_run_of_two_languages_shows_them_in_every_table(tmp_path: Path) -> None:
    run_dir = RunDirectory.open(tmp_path / "r", request(tmp_path / "r", "cupy"), [r.task_id for r in ROWS])
    summary = summarize(run_dir.manifest, ROWS, request(tmp_path, "cupy").solutions, started_at=0,
                        finished_at=1, complete=True)  # fmt: skip
    groups = [g.group for g in summary.table_groups()]
    assert groups == ["overall", "level 1", "level 2", "language cuda", "language cupy"]
    console = Console(width=250, record=True)
    console.print(summary_table(summary))
    terminal = console.export_text()
    assert "language cupy" in terminal and "33.3%" in terminal
    write_report(tmp_path / "r", summary, ROWS)
    page = (tmp_path / "r" / "report.html").read_text()
    summary_part = page[page.index("id='summary'") : page.index("id='tasks'")]
    assert "language cuda" in summary_part and "language cupy" in summary_part
    written = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert [g["pass_rate"] for g in written["summary"]["languages"]] == [1.0, pytest.approx(1 / 3)]


def test_a_cuda_only_run_reads_as_before_plus_the_language_field(tmp_path: Path) -> None:
    rows = [r for r in ROWS if r.language == "cuda"]
    run_dir = RunDirectory.open(tmp_path / "r", request(tmp_path / "r"), [r.task_id for r in rows])
    summary = summarize(run_dir.manifest, rows, request(tmp_path).solutions, started_at=0, finished_at=1,
                        complete=True)  # fmt: skip
    assert summary.table_groups() == summary.groups and [g.group for g in summary.languages] == [
        "language cuda"
    ]
    assert summary.solutions == "workspaces in /s"
    write_report(tmp_path / "r", summary, rows)
    page = (tmp_path / "r" / "report.html").read_text()
    assert "language cuda" not in page[page.index("id='summary'") : page.index("id='tasks'")]
    header = (tmp_path / "r" / "rows.csv").read_text().splitlines()[0].split(",")
    assert header[-1] == "language" and tuple(header) == CSV_COLUMNS  # the new column goes last


def test_a_run_directory_written_before_languages_existed_resumes_as_cuda(tmp_path: Path) -> None:
    out = tmp_path / "old"
    cuda = request(out)
    identity = cuda.identity()
    # A CUDA run's identity is what it was before languages existed: its solutions name no language.
    assert "language" not in identity["solutions"]  # type: ignore[operator]
    assert request(out, "cupy").identity()["solutions"]["language"] == "cupy"  # type: ignore[index]
    run_dir = RunDirectory.open(out, cuda, ["c1", "c2"])
    old_row = json.loads(row("c1", "cuda", speedup=4.0).model_dump_json())
    del old_row["language"]
    (out / "rows.jsonl").write_text(json.dumps(old_row) + "\n")
    resumed = RunDirectory.open(out, cuda, ["c1", "c2"])
    assert resumed.run_id == run_dir.run_id and resumed.rows["c1"].language == "cuda"
    # The same tree judged as CuPy is another run.
    with pytest.raises(UsageError, match="differs in solutions"):
        RunDirectory.open(out, request(out, "cupy"), ["c1", "c2"])


def test_triton_rows_get_their_own_group_after_cuda_and_cupy(tmp_path: Path) -> None:
    rows = [
        *ROWS,
        row("t1", "triton", speedup=3.0),
        row("t2", "triton", "incorrect", level=2, failure="compile_failed"),
    ]
    groups = language_groups(rows)
    assert [g.group for g in groups] == ["language cuda", "language cupy", "language triton"]
    triton = groups[2]
    assert (triton.scored, triton.correct, triton.pass_rate) == (2, 1, 0.5)
    assert triton.compile.geomean_speedup == pytest.approx(3.0)
    out = tmp_path / "r"
    run_dir = RunDirectory.open(out, request(out, "triton"), [r.task_id for r in rows])
    summary = summarize(run_dir.manifest, rows, request(out, "triton").solutions, started_at=0,
                        finished_at=1, complete=True)  # fmt: skip
    assert summary.solutions == "workspaces in /s (triton kernels)"
    assert [g.group for g in summary.table_groups()][-1] == "language triton"
    console = Console(width=250, record=True)
    console.print(summary_table(summary))
    assert "language triton" in console.export_text()
    write_report(out, summary, rows)
    page = (out / "report.html").read_text()
    assert "language triton" in page[page.index("id='summary'") : page.index("id='tasks'")]
    table = {r["task_id"]: r["language"] for r in csv.DictReader(io.StringIO((out / "rows.csv").read_text()))}
    assert (table["t1"], table["t2"], table["p1"], table["c1"]) == ("triton", "triton", "cupy", "cuda")
    written = json.loads((out / "summary.json").read_text())
    assert written["summary"]["languages"][-1]["group"] == "language triton"
    assert written["summary"]["languages"][-1]["pass_rate"] == 0.5
    assert request(out, "triton").identity()["solutions"]["language"] == "triton"  # type: ignore[index]
