"""Kernel languages in suite runs: a solutions tree's language (and a workspace's own record) reaches the
session that builds it, rows carry it, a resumed run keeps it, and the report groups by it."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.bench import SolutionSpec, Steps, SuiteRequest, run_suite, summary_of
from cuda_agent_mcp.bench.baselines import BaselineResult
from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.results import EvalResult, Passed, ProfileResult, VerifyResult
from cuda_agent_mcp.tools import EvaluateRequest, Session
from cuda_agent_mcp.tools.journal import default_journal_path, open_journal
from tests.bench.conftest import TinySuite, stats
from tests.bench.test_suite_cpu import request
from tests.cli.test_cli import cli
from tests.conftest import REPO
from tests.languages.cupy_workspaces import SIMPLE_KERNEL

pytestmark = pytest.mark.nvcc

CUPY_SUITE = REPO / "benchmarks" / "suites" / "workspaces" / "kernelbench_cupy"


class FakeGpu:
    """The two GPU steps without a GPU: records the session each evaluation got and passes it at 2x."""

    def __init__(self) -> None:
        self.sessions: list[tuple[str, str, bool]] = []

    async def baselines(self, session: Session, device: str, budget_s: float) -> BaselineResult:
        return BaselineResult(verdict=Passed(trials=0, max_abs_error=0, max_rel_error=0), eager=stats(2.0),
                              compiled=stats(1.0), gpu="simulated", wall_s=0.0)  # fmt: skip

    async def evaluate(self, session: Session, request: EvaluateRequest) -> EvalResult:
        generated = (session.workspace.root / "cuda_extension.py").is_file()
        self.sessions.append((session.task.id, session.workspace.language, generated))
        passed = Passed(trials=request.verify.trials, max_abs_error=0.0, max_rel_error=0.0)
        return EvalResult(
            verify=VerifyResult(
                verdict=passed, source_hash="", build_key=None, trials=5, distributions=[], wall_s=0
            ),
            profile=ProfileResult(
                verdict=passed,
                candidate=stats(1.0),
                eager=stats(2.0),
                compiled=stats(2.0),
                speedup_vs_eager=2.0,
                speedup_vs_compile=2.0,
                wall_s=0.0,
            ),
            reward=3.0,
            reward_schedule="milestones",
        )


def test_the_honest_cupy_suite_is_laid_out_and_built_as_cupy_sessions(
    kernelbench: Path, tiny_suite: TinySuite, tmp_path: Path
) -> None:
    """`bench run --solutions benchmarks/suites/workspaces/kernelbench_cupy --language cupy`: every session
    is a CuPy workspace, NVRTC builds its kernels and generates cuda_extension.py before the judge."""
    ids = ["kernelbench/level1/19", "kernelbench/level1/23", "kernelbench/level2/9"]
    selected = SuiteRequest(
        sources=[str(kernelbench)],
        ids=ids,
        solutions=SolutionSpec(kind="workspaces", path=str(CUPY_SUITE), language="cupy"),
        out_dir=str(tmp_path / "report"),
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
    assert sorted(gpu.sessions) == [(task, "cupy", True) for task in ids]
    rows = {r.task_id: r for r in result.rows}
    assert all(r.outcome == "correct" and r.language == "cupy" for r in rows.values())
    relu = rows["kernelbench/level1/19"].build
    assert relu is not None and relu.ok and {k.name for k in relu.kernels} >= {"relu_kernel"}
    gemm = rows["kernelbench/level2/9"].build
    assert gemm is not None and {k.name for k in gemm.kernels} == {"linear_sub_mul_relu"}
    assert [g.group for g in result.summary.languages] == ["language cupy"]
    assert result.summary.languages[0].compile.geomean_speedup == pytest.approx(2.0)
    assert "cupy kernels" in result.summary.solutions
    # The run's manifest names the language: the same tree judged as CUDA is another run.
    with pytest.raises(UsageError, match="differs in solutions"):
        cuda = selected.model_copy(
            update={"solutions": SolutionSpec(kind="workspaces", path=str(CUPY_SUITE))}
        )
        anyio.run(lambda: run_suite(cuda, scheduler=GpuScheduler([0]), cache_dir=tiny_suite.cache))


def evaluated_sessions() -> dict[str, str]:
    journal = open_journal(default_journal_path())
    return {r.session_id: r.task_id for r in journal.records(limit=1000) if r.kind == "evaluate"}


def test_a_tree_of_two_languages_is_judged_on_the_cpu_grouped_and_resumed(
    tiny_suite: TinySuite, tmp_path: Path
) -> None:
    """The tree is cupy; level1/2's workspace records cuda. Real builds (NVRTC and nvcc) and the real judge
    on the CPU (the candidates compute in PyTorch, as every CPU suite test's do)."""
    level1 = tiny_suite.solutions / "kernelbench" / "level1"
    shutil.rmtree(level1 / "1" / "kernels")
    (level1 / "1" / "kernels").mkdir()
    (level1 / "1" / "kernels" / "relu.cu").write_text(SIMPLE_KERNEL)
    record = {"task_id": "kernelbench/level1/2", "language": "cuda"}
    (level1 / "2" / ".cuda-agent").mkdir()
    (level1 / "2" / ".cuda-agent" / "workspace.json").write_text(json.dumps(record))
    out = tmp_path / "report"
    tree = SolutionSpec(kind="workspaces", path=str(tiny_suite.solutions), language="cupy")
    ids = ["kernelbench/level1/1", "kernelbench/level1/2", "kernelbench/level1/4"]
    selected = request(tiny_suite, out, solutions=tree, ids=ids)
    first = anyio.run(lambda: run_suite(selected, cache_dir=tiny_suite.cache))
    rows = {r.task_id: r for r in first.rows}
    assert {t: (r.language, r.outcome, r.failure) for t, r in rows.items()} == {
        "kernelbench/level1/1": ("cupy", "correct", None),
        "kernelbench/level1/2": ("cuda", "incorrect", "wrong_output"),
        "kernelbench/level1/4": ("cupy", "incorrect", "missing_solution"),  # expected in the tree's language
    }
    cupy_build = rows["kernelbench/level1/1"].build
    assert cupy_build is not None and [k.name for k in cupy_build.kernels] == ["relu_kernel"]  # NVRTC's cubin
    sessions = evaluated_sessions()
    assert sorted(sessions.values()) == ["kernelbench/level1/1", "kernelbench/level1/2"]
    assert {t for s, t in sessions.items() if s.endswith("-cupy")} == {"kernelbench/level1/1"}
    # Grouped: each language on the overall definitions; the overall figures pool both.
    summary = first.summary
    languages = {g.group: (g.scored, g.correct, g.pass_rate) for g in summary.languages}
    assert languages == {"language cuda": (1, 0, 0.0), "language cupy": (2, 1, 0.5)}
    assert (summary.overall.scored, summary.overall.correct) == (3, 1)
    assert [g.group for g in summary.table_groups()] == [
        "overall",
        "level 1",
        "language cuda",
        "language cupy",
    ]
    written = json.loads((out / "summary.json").read_text())
    assert [g["group"] for g in written["summary"]["languages"]] == ["language cuda", "language cupy"]
    assert [r["language"] for r in written["rows"]] == ["cupy", "cuda", "cupy"]
    table = list(csv.DictReader(io.StringIO((out / "rows.csv").read_text())))
    assert [r["language"] for r in table] == ["cupy", "cuda", "cupy"]
    assert "language cupy" in (out / "report.html").read_text()
    # Resumed: nothing is evaluated again, the rows and their languages are kept.
    again = anyio.run(lambda: run_suite(selected, cache_dir=tiny_suite.cache))
    assert evaluated_sessions() == sessions and again.summary.run_id == first.summary.run_id
    assert [r.model_dump() for r in again.rows] == [r.model_dump() for r in first.rows]
    assert summary_of(out).languages == summary.languages
    # A language record that cannot be trusted is that solution's failure, never a guess.
    (level1 / "2" / ".cuda-agent" / "workspace.json").write_text(json.dumps(record | {"language": "fortran"}))
    broken = {r.task_id: r for r in anyio.run(lambda: run_suite(selected, cache_dir=tiny_suite.cache)).rows}
    assert (broken["kernelbench/level1/2"].failure, broken["kernelbench/level1/2"].language) == (
        "import_failed",
        "cupy",
    )
    assert "'fortran'" in broken["kernelbench/level1/2"].message
    assert evaluated_sessions() == sessions  # the other rows were kept
    # Repaired, it is judged again.
    (level1 / "2" / ".cuda-agent" / "workspace.json").write_text(json.dumps(record))
    repaired = {r.task_id: r for r in anyio.run(lambda: run_suite(selected, cache_dir=tiny_suite.cache)).rows}
    assert (repaired["kernelbench/level1/2"].failure, repaired["kernelbench/level1/2"].language) == (
        "wrong_output",
        "cuda",
    )


def test_kernelbench_single_files_are_cuda_only(tiny_suite: TinySuite, tmp_path: Path) -> None:
    files = SolutionSpec(kind="kernelbench", path=str(tmp_path), language="cupy")
    with pytest.raises(UsageError, match="single-file solutions are CUDA"):
        selected = request(tiny_suite, tmp_path / "report", solutions=files, rules="kernelbench")
        anyio.run(lambda: run_suite(selected, cache_dir=tiny_suite.cache))


def test_the_cli_lays_a_tree_out_in_the_language_it_is_given(tiny_suite: TinySuite, tmp_path: Path) -> None:
    relu = tiny_suite.solutions / "kernelbench" / "level1" / "1"
    shutil.rmtree(relu / "kernels")
    (relu / "kernels").mkdir()
    (relu / "kernels" / "relu.cu").write_text(SIMPLE_KERNEL)
    out = tmp_path / "report"
    done = cli("bench", "run", "--tasks", str(tiny_suite.tasks), "--solutions", str(tiny_suite.solutions),
               "--language", "cupy", "--id", "kernelbench/level1/1", "--device", "cpu", "--no-audit", "--out",
               str(out), "--trials", "2", "--budget", "0.3", "--baselines", str(tiny_suite.tables), "--json",
               cache=tiny_suite.cache)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    (row,) = result["rows"]
    assert (row["language"], row["outcome"]) == ("cupy", "correct")
    assert [k["name"] for k in row["build"]["kernels"]] == ["relu_kernel"]
    assert [g["group"] for g in result["summary"]["languages"]] == ["language cupy"]
    assert json.loads((out / "run.json").read_text())["request"]["solutions"]["language"] == "cupy"
