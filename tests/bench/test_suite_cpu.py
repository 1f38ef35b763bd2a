"""The suite runner end to end on the CPU: real builds, the judge and its workers, the journal, the report;
every kind of bad input; resuming a finished and a killed run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.bench import SolutionSpec, SuiteProgress, SuiteRequest, run_suite, summary_of
from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.tools.journal import default_journal_path, open_journal
from tests.bench.conftest import EAGER_MS, TinySuite
from tests.conftest import REPO

pytestmark = pytest.mark.nvcc


def request(suite: TinySuite, out: Path, **changes: object) -> SuiteRequest:
    fields: dict[str, object] = {
        "sources": [str(suite.tasks)],
        "solutions": SolutionSpec(kind="workspaces", path=str(suite.solutions)),
        "device": "cpu",
        "audit": False,  # PyTorch candidates: the judge runs on the CPU here
        "out_dir": str(out),
        "trials": 2,
        "budget_s": 0.3,
        "baseline_tables": [str(suite.tables)],
    }
    return SuiteRequest(**(fields | changes))  # type: ignore[arg-type]


def evaluations(suite: TinySuite) -> list[str]:
    journal = open_journal(default_journal_path())
    return [r.task_id for r in journal.records(limit=1000) if r.kind == "evaluate"]


def test_a_suite_on_the_cpu_scores_each_task_and_reports_every_kind_of_bad_input(
    tiny_suite: TinySuite, tmp_path: Path
) -> None:
    events: list[SuiteProgress] = []
    out = tmp_path / "report"
    result = anyio.run(
        lambda: run_suite(request(tiny_suite, out), cache_dir=tiny_suite.cache, progress=events.append)
    )
    rows = {r.task_id: r for r in result.rows}
    outcome = {task: (r.outcome, r.failure) for task, r in rows.items()}
    assert outcome == {
        "kernelbench/level1/1": ("correct", None),
        "kernelbench/level1/2": ("incorrect", "wrong_output"),
        "kernelbench/level1/3": ("task_error", "baseline_failed"),
        "kernelbench/level1/4": ("incorrect", "missing_solution"),
        "kernelbench/level2/1": ("incorrect", "compile_failed"),
    }
    relu = rows["kernelbench/level1/1"]
    assert relu.baselines_cached and relu.eager_ms == EAGER_MS and relu.candidate_ms
    assert relu.speedup_vs_eager == pytest.approx(EAGER_MS / relu.candidate_ms)
    assert relu.reward in (1.0, 2.0, 3.0) and relu.journal_record and relu.build and relu.build.ok
    assert "undefined_name" in rows["kernelbench/level1/3"].message
    assert rows["kernelbench/level2/1"].build and rows["kernelbench/level2/1"].build.errors >= 1
    overall = result.summary.overall
    assert (overall.tasks, overall.scored, overall.correct) == (5, 4, 1)
    assert overall.pass_rate == pytest.approx(0.25) and overall.task_errors == ["kernelbench/level1/3"]
    assert [g.group for g in result.summary.groups] == ["overall", "level 1", "level 2"]
    assert result.summary.complete and result.ignored_solutions == ["kernelbench/level1/99"]
    # Three candidates reached the judge; the task error's candidate never did.
    assert sorted(evaluations(tiny_suite)) == ["kernelbench/level1/1", "kernelbench/level1/2"]
    # Progress: a live count, ending with every task done.
    assert (
        events[-1].done == events[-1].total == 5 and events[-1].correct == 1 and events[-1].task_errors == 1
    )
    # The report: one page, JSON and CSV of the same rows.
    written = json.loads((out / "summary.json").read_text())
    assert [r["task_id"] for r in written["rows"]] == list(rows)
    assert len((out / "rows.csv").read_text().splitlines()) == 6
    page = (out / "report.html").read_text()
    assert "id='summary'" in page and "kernelbench/level1/3" in page and "<svg" in page
    assert summary_of(out).overall.correct == 1


def test_running_the_same_suite_again_measures_nothing_and_another_request_is_refused(
    tiny_suite: TinySuite, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    first = anyio.run(lambda: run_suite(request(tiny_suite, out), cache_dir=tiny_suite.cache))
    measured = evaluations(tiny_suite)
    events: list[SuiteProgress] = []
    again = anyio.run(
        lambda: run_suite(request(tiny_suite, out), cache_dir=tiny_suite.cache, progress=events.append)
    )
    assert evaluations(tiny_suite) == measured  # every row was kept
    assert again.summary.run_id == first.summary.run_id and events[0].resumed == 5
    assert [r.model_dump() for r in again.rows] == [r.model_dump() for r in first.rows]
    with pytest.raises(UsageError, match="differs in rules"):
        anyio.run(
            lambda: run_suite(request(tiny_suite, out, rules="kernelbench"), cache_dir=tiny_suite.cache)
        )
    with pytest.raises(UsageError, match="unknown task ids: kernelbench/level9/1"):
        anyio.run(
            lambda: run_suite(
                request(tiny_suite, out, ids=["kernelbench/level9/1"]), cache_dir=tiny_suite.cache
            )
        )
    with pytest.raises(UsageError, match="--rules kernelbench"):
        kernelbench = SolutionSpec(kind="kernelbench", path=str(tiny_suite.solutions))
        anyio.run(
            lambda: run_suite(request(tiny_suite, out, solutions=kernelbench), cache_dir=tiny_suite.cache)
        )
    fresh = anyio.run(
        lambda: run_suite(
            request(tiny_suite, out, ids=["kernelbench/level1/4"], overwrite=True), cache_dir=tiny_suite.cache
        )
    )
    assert fresh.summary.run_id != first.summary.run_id
    kept = [p for p in out.iterdir() if p.name.startswith("previous-")]
    assert len(kept) == 1 and (kept[0] / "rows.jsonl").read_text().count("\n") == 5


def test_a_changed_solution_is_scored_again_on_resume(tiny_suite: TinySuite, tmp_path: Path) -> None:
    out = tmp_path / "report"
    selected = request(tiny_suite, out, ids=["kernelbench/level1/2"])
    assert anyio.run(lambda: run_suite(selected, cache_dir=tiny_suite.cache)).rows[0].outcome == "incorrect"
    model_new = tiny_suite.solutions / "kernelbench" / "level1" / "2" / "model_new.py"
    wrong = model_new.read_text()
    assert "return x * 2\n" in wrong
    model_new.write_text(wrong.replace("return x * 2\n", "return x.tanh()\n"))
    assert anyio.run(lambda: run_suite(selected, cache_dir=tiny_suite.cache)).rows[0].outcome == "correct"


def test_a_killed_run_continues_where_it_stopped(tiny_suite: TinySuite, tmp_path: Path) -> None:
    out = tmp_path / "report"
    command = [
        sys.executable, "-m", "cuda_agent_mcp.cli.app", "bench", "run", "--tasks", str(tiny_suite.tasks),
        "--solutions", str(tiny_suite.solutions), "--device", "cpu", "--no-audit", "--out", str(out),
        "--trials", "2", "--budget", "0.3", "--baselines", str(tiny_suite.tables), "--concurrency", "1",
        "--id", "kernelbench/level1/1", "--id", "kernelbench/level1/2", "--id", "kernelbench/level2/1",
    ]  # fmt: skip
    env = {**os.environ, "CUDA_AGENT_CACHE": str(tiny_suite.cache), "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)  # fmt: skip
    rows = out / "rows.jsonl"
    deadline = time.monotonic() + 600
    while not (rows.is_file() and rows.read_text().count("\n") >= 1) and time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before it could be killed"
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    first = [json.loads(line)["task_id"] for line in rows.read_text().splitlines()]
    assert 1 <= len(first) < 3
    done = subprocess.run(
        [*command, "--json"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["summary"]["complete"] and result["summary"]["measured"] == 3
    # Tasks finished before the kill were not evaluated again.
    assert all(evaluations(tiny_suite).count(task) <= 1 for task in first)
    assert any("earlier, interrupted run" in note for note in result["summary"]["notes"])


def test_a_kernelbench_single_file_solution_is_imported_and_scored_on_the_cpu(
    tiny_suite: TinySuite, tmp_path: Path
) -> None:
    solutions = tmp_path / "kernelbench-files"
    (solutions / "level1").mkdir(parents=True)
    source = REPO / "tests" / "fixtures" / "kernelbench_style" / "relu_dispatch.py"
    (solutions / "level1" / "1_ReLU.py").write_text(source.read_text())
    spec = SolutionSpec(kind="kernelbench", path=str(solutions))
    out = tmp_path / "report"
    selected = request(
        tiny_suite, out, solutions=spec, rules="kernelbench", audit=True, ids=["kernelbench/level1/1"]
    )
    result = anyio.run(lambda: run_suite(selected, cache_dir=tiny_suite.cache))
    (row,) = result.rows
    assert row.outcome == "correct", (row.failure, row.message)
    assert row.solution_kind == "kernelbench" and row.build and row.build.kernels
    assert (out / "imports" / "kernelbench-level1-1" / "kernels" / "relu_dispatch.cu").is_file()
    assert result.summary.rules == "kernelbench"
