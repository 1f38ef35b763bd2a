"""`bench run --device cpu` (issue 26): it scores a pure-PyTorch solution with no kernel sources, as its
help says, and a run that could judge no solution at all does not exit 0."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.bench.conftest import TinySuite
from tests.cli.test_cli import cli

pytestmark = pytest.mark.nvcc


def bench_run(suite: TinySuite, out: Path, *args: str) -> tuple[int, dict[str, object], str]:
    done = cli("bench", "run", "--tasks", str(suite.tasks), "--solutions", str(suite.solutions),
               "--out", str(out), "--device", "cpu", "--trials", "2", "--budget", "0.3",
               "--baselines", str(suite.tables), "--json", *args, cache=suite.cache)  # fmt: skip
    assert "Traceback" not in done.stdout + done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def test_a_pure_pytorch_solution_without_kernel_sources_is_scored_on_the_cpu(
    tiny_suite: TinySuite, tmp_path: Path
) -> None:
    solution = tiny_suite.solutions / "kernelbench" / "level1" / "1"
    shutil.rmtree(solution / "kernels")  # x.clamp_min(0) alone: pure PyTorch
    code, result, stderr = bench_run(
        tiny_suite, tmp_path / "report-kb", "--id", "kernelbench/level1/1", "--rules", "kernelbench"
    )
    assert code == 0, stderr
    row = result["rows"][0]  # type: ignore[index]
    assert row["outcome"] == "correct", row
    # The cuda-agent rules' audit refuses PyTorch compute: a verdict, never "no kernel sources".
    code, result, _ = bench_run(tiny_suite, tmp_path / "report-ca", "--id", "kernelbench/level1/1")
    row = result["rows"][0]  # type: ignore[index]
    assert row["failure"] == "rejected:forbidden_op", row


def test_a_run_that_judges_no_solution_exits_1_with_one_line(tiny_suite: TinySuite, tmp_path: Path) -> None:
    code, result, stderr = bench_run(
        tiny_suite, tmp_path / "out", "--id", "kernelbench/level2/1", "--no-audit"
    )
    assert result["rows"][0]["failure"] == "compile_failed"  # type: ignore[index]
    assert code == 1
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "no selected task's solution could be judged" in errors[0]
