"""The timing cross-check and the reward schedules, on numbers."""

from __future__ import annotations

import math

import pytest

from cuda_agent_mcp.evaluation.reward import FAIL, milestones, reward
from cuda_agent_mcp.judge.timing import (
    HarnessCost,
    clock_problem,
    median_rse,
    physical_floor_ms,
    summarize,
    systematic_excess,
)


def test_honest_times_agree_with_the_judges_clock() -> None:
    assert clock_problem(event_ms=3.0, worker_wall_ms=3.04, judge_ms=3.4, overhead_ms=0.3) is None
    # A batch of short calls: a 2 ms window, the harness's calibrated cost beside it.
    assert clock_problem(event_ms=2.0, worker_wall_ms=2.03, judge_ms=2.3, overhead_ms=0.25) is None


@pytest.mark.parametrize(
    ("event", "wall", "judge", "why"),
    [
        (0.001, 3.0, 3.3, "a patched event timer, or work on another stream: the wall clock saw it"),
        (0.001, 0.002, 3.3, "both worker clocks forged: the judge's clock saw the time pass"),
        (3.0, 3.1, 1.0, "the worker claims more time than passed"),
        (2.0, 2.0, 2.8, "35% of hidden work beside a 2 ms window: no fixed margin absorbs it any more"),
        (2.0, 2.6, 2.7, "work after the events stop, inside the wall clock"),
    ],
)
def test_forged_times_disagree(event: float, wall: float, judge: float, why: str) -> None:
    assert clock_problem(event_ms=event, worker_wall_ms=wall, judge_ms=judge, overhead_ms=0.1) is not None, (
        why
    )


def test_one_late_reply_is_noise_but_a_systematic_excess_is_hidden_work() -> None:
    windows = [2.0] * 20
    assert not systematic_excess([0.05] * 17 + [3.0] * 3, windows)
    assert systematic_excess([0.2] * 20, windows)  # 10% of every window: each batch alone is within noise
    assert clock_problem(event_ms=2.0, worker_wall_ms=2.0, judge_ms=2.3, overhead_ms=0.1) is None


def test_the_harness_cost_is_fitted_from_calibration_batches_and_capped() -> None:
    cost = HarnessCost.fit({1: [0.10, 0.12, 0.11], 16: [0.40, 0.41, 0.42]})
    assert cost.fixed_ms == pytest.approx(0.11) and cost.per_output_ms == pytest.approx(0.02)
    assert cost.ms(16) == pytest.approx(0.41)
    noisy = HarnessCost.fit({1: [9.0], 16: [30.0]})
    assert noisy.fixed_ms == HarnessCost.MAX_FIXED_MS and noisy.per_output_ms == HarnessCost.MAX_PER_OUTPUT_MS


def test_statistics_of_samples() -> None:
    stats = summarize([1.0, 2.0, 3.0, 4.0], discarded=1)
    assert (stats.median_ms, stats.min_ms, stats.p25_ms, stats.p75_ms) == (2.5, 1.0, 1.75, 3.25)
    assert stats.samples == 4 and stats.discarded_samples == 1
    assert median_rse([1.0, 1.0]) == math.inf
    assert median_rse([1.0, 1.01, 0.99, 1.0]) < 0.01


def test_the_physical_floor_is_the_time_to_write_the_outputs_at_peak_bandwidth() -> None:
    assert physical_floor_ms("NVIDIA H200", 4_800_000_000) == pytest.approx(1.0)
    assert physical_floor_ms("Some Future GPU", 1) is None


def test_milestones_follow_the_papers_five_percent_time_reduction() -> None:
    assert milestones(1.06, 1.06) == 3
    assert milestones(1.06, 1.0) == 2
    assert milestones(1.05, 1.05) == 1  # 1.05x is less than a 5% time reduction
    assert milestones(1.0, 2.0) == 1
    assert reward("milestones", False, 10.0, 10.0) == FAIL
    assert reward("milestones", True, None, 2.0) == FAIL
    assert reward("log_speedup", True, 100.0, 100.0) == pytest.approx(math.log(10))
    assert reward("fast_p", True, 1.2, 0.9) == 0.0


def test_a_profile_is_measured_again_when_noisy_or_when_its_clocks_disagreed() -> None:
    from cuda_agent_mcp.evaluation.job import JudgeReport
    from cuda_agent_mcp.results import Passed, Rejected, TimingStats
    from cuda_agent_mcp.tools.evaluate import worth_remeasuring

    def stats(cv: float) -> TimingStats:
        return TimingStats(median_ms=1, mean_ms=1, min_ms=1, p25_ms=1, p75_ms=1, cv=cv, samples=10)

    passed = Passed(trials=10, max_abs_error=0.0, max_rel_error=0.0)
    assert not worth_remeasuring(JudgeReport(verdict=passed, candidate=stats(0.01)), max_cv=0.05)
    assert worth_remeasuring(JudgeReport(verdict=passed, candidate=stats(0.2)), max_cv=0.05)
    clocks = Rejected(reason="timing_disagreement", message="clocks")
    assert worth_remeasuring(JudgeReport(verdict=clocks), max_cv=0.05)
    floor = Rejected(reason="below_physical_floor", message="too fast")
    assert not worth_remeasuring(JudgeReport(verdict=floor), max_cv=0.05)
