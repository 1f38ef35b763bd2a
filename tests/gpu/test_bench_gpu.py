"""The suite runner on a GPU: the bundled examples' solutions under the cuda-agent rules and a KernelBench
single-file solution under the kernelbench rules, baselines measured once and recorded in a table."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.bench import SolutionSpec, SuiteRequest, run_suite
from cuda_agent_mcp.bench.baselines import load_tables
from tests.conftest import EXAMPLES, REPO

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

IDS = ["examples/relu", "examples/row_sum", "examples/bias_add_relu"]


def test_the_examples_score_as_a_suite_and_their_baselines_are_measured_once(tmp_path: Path) -> None:
    solutions = tmp_path / "solutions"
    for task in IDS:
        shutil.copytree(EXAMPLES / task.split("/")[1], solutions / task)
    tables = tmp_path / "tables"
    request = SuiteRequest(
        ids=IDS,
        solutions=SolutionSpec(kind="workspaces", path=str(solutions)),
        out_dir=str(tmp_path / "report"),
        record_baselines=str(tables),
        baseline_tables=[str(tables)],
        trials=3,
        budget_s=1.0,
    )
    result = anyio.run(lambda: run_suite(request, cache_dir=tmp_path / "cache"))
    assert [r.outcome for r in result.rows] == ["correct"] * 3, [(r.failure, r.message) for r in result.rows]
    assert all(r.speedup_vs_eager and r.speedup_vs_compile for r in result.rows)
    assert result.summary.overall.pass_rate == 1.0 and result.summary.environment.get("gpu")
    (table,) = load_tables([tables])
    assert sorted(table.entries) == sorted(IDS)
    # A second run in a fresh cache loads the table: no baseline is measured again.
    again = anyio.run(
        lambda: run_suite(
            request.model_copy(update={"out_dir": str(tmp_path / "again")}), cache_dir=tmp_path / "cache2"
        )
    )
    assert all(r.baselines_cached for r in again.rows)


def test_a_kernelbench_single_file_solution_scores_on_the_gpu_under_the_kernelbench_rules(
    tmp_path: Path,
) -> None:
    solutions = tmp_path / "files" / "examples"
    solutions.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "fixtures" / "kernelbench_style" / "relu_dispatch.py", solutions / "relu.py")
    request = SuiteRequest(
        ids=["examples/relu"],
        solutions=SolutionSpec(kind="kernelbench", path=str(tmp_path / "files")),
        rules="kernelbench",
        out_dir=str(tmp_path / "report"),
        trials=3,
        budget_s=1.0,
    )
    result = anyio.run(lambda: run_suite(request, cache_dir=tmp_path / "cache"))
    (row,) = result.rows
    assert row.outcome == "correct", (row.failure, row.message)
    assert row.kernels is not None and any(k.origin == "workspace" for k in row.kernels.kernels)
