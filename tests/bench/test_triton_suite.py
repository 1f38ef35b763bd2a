"""The honest Triton suite through the product on the CPU: every workspace of
benchmarks/suites/workspaces/kernelbench_triton is laid out as a Triton session for its KernelBench task
by `bench run`, passes the static audit and builds (every launch ModelNew makes recorded and compiled for
the GPU), once per solution; and KernelBench's single-file Triton format is imported as such."""

from __future__ import annotations

import ast
import csv
import io
import json
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.bench import SolutionSpec, Steps, SuiteRequest, run_suite
from cuda_agent_mcp.evaluation.audit import audit_workspace
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.results import EvalResult
from cuda_agent_mcp.tools import EvaluateRequest, Session
from tests.bench.conftest import TinySuite
from tests.bench.test_suite_languages import FakeGpu
from tests.cli.test_cli import cli
from tests.conftest import REPO

pytest.importorskip("triton")

TRITON_SUITE = REPO / "benchmarks" / "suites" / "workspaces" / "kernelbench_triton"
SINGLE_FILES = REPO / "benchmarks" / "suites" / "triton_kernelbench"
SOLUTIONS = sorted(TRITON_SUITE.glob("level*/*/model_new.py"))


def task_id(model_new: Path) -> str:
    return f"kernelbench/{model_new.parent.parent.name}/{model_new.parent.name}"


def jit_kernels(code: str) -> set[str]:
    """The functions a solution decorates with triton.jit (bare, called, or under triton.autotune)."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.FunctionDef):
            decorators = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
            if any(ast.unparse(d) == "triton.jit" for d in decorators):
                names.add(node.name)
    return names


class AuditingGpu(FakeGpu):
    """FakeGpu that also runs the static audit over the workspace each evaluation was given."""

    def __init__(self) -> None:
        super().__init__()
        self.findings: dict[str, list[str]] = {}

    async def evaluate(self, session: Session, request: EvaluateRequest) -> EvalResult:
        found = audit_workspace(session.workspace.root, language=session.workspace.language)
        self.findings[session.task.id] = [f"{f.rule}: {f.message}" for f in found]
        return await super().evaluate(session, request)


def test_the_suite_is_the_single_files_laid_out_as_triton_workspaces() -> None:
    assert len(SOLUTIONS) >= 15
    for model_new in SOLUTIONS:
        level, number = model_new.parent.parent.name, model_new.parent.name
        assert model_new.read_text() == (SINGLE_FILES / level / f"{number}.py").read_text(), model_new
        record = json.loads((model_new.parent / ".cuda-agent" / "workspace.json").read_text())
        assert record == {"task_id": task_id(model_new), "language": "triton"}
    assert {f"{p.parent.name}/{p.stem}" for p in SINGLE_FILES.glob("level*/*.py")} == {
        f"{p.parent.parent.name}/{p.parent.name}" for p in SOLUTIONS
    }


def test_every_honest_triton_solution_audits_clean_and_builds_every_kernel(
    kernelbench: Path, tiny_suite: TinySuite, tmp_path: Path
) -> None:
    """`bench run --solutions benchmarks/suites/workspaces/kernelbench_triton --language triton`, the two
    GPU steps faked: the real layout, audit and build of each solution, grouped under `language triton`."""
    ids = [task_id(p) for p in SOLUTIONS]
    out = tmp_path / "report"
    selected = SuiteRequest(
        sources=[str(kernelbench)],
        ids=ids,
        solutions=SolutionSpec(kind="workspaces", path=str(TRITON_SUITE), language="triton"),
        out_dir=str(out),
    )
    gpu = AuditingGpu()
    result = anyio.run(
        lambda: run_suite(
            selected,
            scheduler=GpuScheduler([0]),
            cache_dir=tiny_suite.cache,
            steps=Steps(evaluate=gpu.evaluate, baselines=gpu.baselines),
        )
    )
    # Every session a Triton workspace; a Triton build generates no cuda_extension.py.
    assert sorted(gpu.sessions) == sorted((task, "triton", False) for task in ids)
    assert gpu.findings == {task: [] for task in ids}
    rows = {r.task_id: r for r in result.rows}
    for model_new in SOLUTIONS:
        row = rows[task_id(model_new)]
        assert (row.language, row.outcome) == ("triton", "correct"), (row.task_id, row.message)
        build = row.build
        assert build is not None and build.ok, (row.task_id, build)
        # No warning: every launch was recorded on the meta device and compiled, none left to the worker.
        assert (build.errors, build.warnings) == (0, 0), (row.task_id, build.summary)
        assert {k.name for k in build.kernels} == jit_kernels(model_new.read_text()), row.task_id
        assert all(k.registers and k.registers > 0 for k in build.kernels), row.task_id
    assert [g.group for g in result.summary.languages] == ["language triton"]
    assert result.summary.languages[0].scored == len(ids)
    assert "triton kernels" in result.summary.solutions
    table = list(csv.DictReader(io.StringIO((out / "rows.csv").read_text())))
    assert {r["language"] for r in table} == {"triton"} and len(table) == len(ids)
    assert "language triton" in (out / "report.html").read_text()


def test_a_kernelbench_triton_single_file_is_scored_as_a_triton_workspace(
    kernelbench: Path, tiny_suite: TinySuite, tmp_path: Path
) -> None:
    """The single-file folder itself under `--format kernelbench`: the ReLU file imports triton, so its
    session is a Triton workspace whose model_new.py is the file, and its build compiles relu_kernel."""
    out = tmp_path / "report"
    selected = SuiteRequest(
        sources=[str(kernelbench)],
        ids=["kernelbench/level1/19", "kernelbench/level1/20"],
        solutions=SolutionSpec(kind="kernelbench", path=str(SINGLE_FILES), language="triton"),
        rules="kernelbench",
        out_dir=str(out),
    )
    gpu = FakeGpu()
    result = anyio.run(
        lambda: run_suite(
            selected,
            scheduler=GpuScheduler([0]),
            cache_dir=tiny_suite.cache,
            steps=Steps(evaluate=gpu.evaluate, baselines=gpu.baselines),
        )
    )
    assert gpu.sessions == [("kernelbench/level1/19", "triton", False)]
    rows = {r.task_id: r for r in result.rows}
    relu = rows["kernelbench/level1/19"]
    assert (relu.language, relu.outcome) == ("triton", "correct")
    assert relu.build is not None and [k.name for k in relu.build.kernels] == ["relu_kernel"]
    assert relu.build.warnings == 0
    # No solution for 20: expected in the tree's language.
    assert (rows["kernelbench/level1/20"].language, rows["kernelbench/level1/20"].failure) == (
        "triton",
        "missing_solution",
    )
    kept = out / "imports" / "kernelbench-level1-19" / "model_new.py"
    assert kept.read_text() == (SINGLE_FILES / "level1" / "19.py").read_text()


def test_the_cli_offers_triton_for_bench_runs() -> None:
    done = cli("bench", "run", "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    text = " ".join(done.stdout.split())
    assert "triton (@triton.jit kernels in model_new.py)" in text
    assert "is triton where it imports triton" in text
