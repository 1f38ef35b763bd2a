"""A suite's GPU work spread over a simulated list of GPUs through the one shared scheduler: every GPU is
used, no two timed jobs ever hold one GPU together, and the run takes a fraction of the serial time.

Only the two GPU steps are replaced (there is no GPU here): each takes an exclusive lease from the
session's scheduler exactly as verify/profile do, holds it for a fixed time and records when and where.
Builds, the run directory, rows and the report are the real ones."""

from __future__ import annotations

import itertools
import shutil
import time
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.bench import SolutionSpec, Steps, SuiteRequest, run_suite
from cuda_agent_mcp.bench.baselines import BaselineResult
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.results import EvalResult, Passed, ProfileResult, TimingStats, VerifyResult
from cuda_agent_mcp.tools import EvaluateRequest, Session
from tests.bench.conftest import TinySuite, stats

pytestmark = pytest.mark.nvcc

HOLD_S = 0.4


class Recorder:
    def __init__(self) -> None:
        self.spans: list[tuple[int, float, float]] = []

    async def hold(self, session: Session) -> int:
        assert session.scheduler is not None
        async with session.scheduler.lease(session.id, exclusive=True) as lease:
            start = time.monotonic()
            await anyio.sleep(HOLD_S)
            self.spans.append((lease.gpu, start, time.monotonic()))
            return lease.gpu

    async def baselines(self, session: Session, device: str, budget_s: float) -> BaselineResult:
        gpu = await self.hold(session)
        return BaselineResult(verdict=Passed(trials=0, max_abs_error=0, max_rel_error=0), eager=stats(2.0),
                              compiled=stats(1.0), gpu=f"simulated {gpu}", wall_s=HOLD_S)  # fmt: skip

    async def evaluate(self, session: Session, request: EvaluateRequest) -> EvalResult:
        await self.hold(session)
        candidate: TimingStats = stats(0.5)
        passed = Passed(trials=request.verify.trials, max_abs_error=0.0, max_rel_error=0.0)
        return EvalResult(
            verify=VerifyResult(
                verdict=passed, source_hash="", build_key=None, trials=5, distributions=[], wall_s=0
            ),
            profile=ProfileResult(
                verdict=passed,
                candidate=candidate,
                eager=stats(2.0),
                compiled=stats(1.0),
                speedup_vs_eager=4.0,
                speedup_vs_compile=2.0,
                wall_s=HOLD_S,
            ),
            reward=3.0,
            reward_schedule="milestones",
        )


def test_a_suite_spreads_over_every_simulated_gpu_and_never_shares_one(
    tiny_suite: TinySuite, tmp_path: Path
) -> None:
    solutions = tmp_path / "many"
    for number in range(1, 9):  # eight copies of the ReLU task, each with its solution
        source = tiny_suite.tasks / "level1" / "1_ReLU.py"
        (tmp_path / "kb8" / "level1").mkdir(parents=True, exist_ok=True)
        (tmp_path / "kb8" / "level1" / f"{number}_ReLU{number}.py").write_text(
            source.read_text().replace("dim = 64", f"dim = {64 + number}")
        )
        (solutions / "kernelbench" / "level1").mkdir(parents=True, exist_ok=True)
        target = solutions / "kernelbench" / "level1" / str(number)
        shutil.copytree(tiny_suite.solutions / "kernelbench" / "level1" / "1", target)
    recorder = Recorder()
    request = SuiteRequest(
        sources=[str(tmp_path / "kb8")],
        solutions=SolutionSpec(kind="workspaces", path=str(solutions)),
        device="cuda",
        out_dir=str(tmp_path / "report"),
    )
    started = time.monotonic()
    result = anyio.run(
        lambda: run_suite(
            request,
            scheduler=GpuScheduler([0, 1, 2, 3]),
            cache_dir=tiny_suite.cache,
            steps=Steps(evaluate=recorder.evaluate, baselines=recorder.baselines),
        )
    )
    gpu_phase = time.monotonic() - started
    assert [r.outcome for r in result.rows] == ["correct"] * 8
    assert result.summary.overall.compile.geomean_speedup == pytest.approx(2.0)
    assert {gpu for gpu, _, _ in recorder.spans} == {0, 1, 2, 3}
    for gpu in range(4):
        spans = sorted((s, e) for g, s, e in recorder.spans if g == gpu)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans)), gpu
    busiest = max(sum(1 for _, s, e in recorder.spans if s <= t < e) for _, t, _ in recorder.spans)
    assert busiest == 4  # four GPUs, four exclusive jobs at once
    assert len(recorder.spans) == 16  # a baseline and an evaluation per task
    assert gpu_phase < 16 * HOLD_S  # far from serial, builds included
