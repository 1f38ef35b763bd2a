"""The timing cross-check and the reward schedules, on numbers."""

from __future__ import annotations

import math

import pytest

from cuda_agent_mcp.evaluation.job import TimingPolicy
from cuda_agent_mcp.evaluation.reward import FAIL, milestones, reward
from cuda_agent_mcp.judge.timing import (
    HIDDEN_FRACTION_LIMIT,
    calls_per_batch,
    clock_problem,
    hidden_work,
    median_rse,
    physical_floor_ms,
    summarize,
    timing_done,
)


def test_honest_worker_clocks_agree() -> None:
    assert clock_problem(event_ms=3.0, worker_wall_ms=3.04, judge_ms=3.4) is None
    # The judge's clock running late is not a per-batch matter any more: the null decides (hidden_work).
    assert clock_problem(event_ms=2.0, worker_wall_ms=2.03, judge_ms=4.0) is None


@pytest.mark.parametrize(
    ("event", "wall", "judge", "why"),
    [
        (0.001, 3.0, 3.3, "a patched event timer, or work on another stream: the wall clock saw it"),
        (3.0, 3.1, 1.0, "the worker claims more time than passed"),
        (2.0, 2.6, 2.7, "work after the events stop, inside the wall clock"),
        (3.0, 1.0, 3.3, "events above the wall clock"),
    ],
)
def test_worker_clocks_that_contradict_each_other_disagree(
    event: float, wall: float, judge: float, why: str
) -> None:
    assert clock_problem(event_ms=event, worker_wall_ms=wall, judge_ms=judge) is not None, why


def _noise(centre: float, spread: float, n: int) -> list[float]:
    """Deterministic scatter around `centre` (a stand-in for the H200's null: median ~0.1 ms, MAD ~0.04)."""
    return [centre + spread * math.sin(1.7 * i) for i in range(n)]


def test_an_honest_candidate_with_the_nulls_excess_is_not_hiding_work() -> None:
    # The case the old rule rejected: 0.1 ms of harness cost over 1.2 ms windows.
    stat = hidden_work(_noise(0.11, 0.05, 12), _noise(0.10, 0.05, 12), [1.2] * 12)
    assert stat is not None and stat.hidden_fraction < 0 and not stat.rejects


def test_a_late_reply_or_two_is_noise() -> None:
    candidate = [*_noise(0.1, 0.03, 14), 2.5, 3.0]
    stat = hidden_work(candidate, _noise(0.1, 0.03, 16), [5.0] * 16)
    assert stat is not None and not stat.rejects


@pytest.mark.parametrize("hidden_share", [0.2, 0.5, 0.99])
def test_a_worker_that_forges_both_clocks_shows_its_hidden_share_of_the_window(hidden_share: float) -> None:
    # Real batches of 5 ms; the worker reports (1 - f) of it on both of its clocks.
    real = 5.0
    reported = real * (1 - hidden_share)
    candidate = [e + real * hidden_share for e in _noise(0.1, 0.03, 12)]
    stat = hidden_work(candidate, _noise(0.1, 0.03, 12), [reported] * 12)
    assert stat is not None and stat.rejects
    # Below the limit only by the confidence margin (Z standard errors of the difference of medians).
    assert stat.hidden_fraction == pytest.approx(real * hidden_share / max(reported, 2.0), rel=0.2)


def test_the_statistic_needs_both_sides() -> None:
    assert hidden_work([0.1], [], [1.0]) is None and hidden_work([], [0.1], [1.0]) is None


def test_a_large_but_steady_null_is_the_harness_cost_and_a_scattered_one_is_flagged() -> None:
    # As measured on the H200: many outputs shared per batch cost milliseconds, matched by the candidate.
    steady = hidden_work(_noise(6.3, 0.3, 12), _noise(5.9, 0.3, 12), [5.0] * 12)
    assert steady is not None and not steady.null_too_noisy and not steady.rejects
    scattered = hidden_work(_noise(2.0, 3.0, 10), _noise(2.0, 3.0, 10), [5.0] * 10)
    assert scattered is not None and scattered.null_too_noisy


def test_timing_stops_at_a_precise_median_or_the_budget_but_not_while_the_null_cannot_see_a_forger() -> None:
    policy = TimingPolicy(min_samples=10, max_samples=100, budget_s=2.0, target_rse=0.01)
    steady, scattered = [1.0] * 10, _noise(1.0, 0.3, 10)
    assert not timing_done(steady[:9], 0, policy, 0.1, undecided=False)  # fewer than min_samples
    assert timing_done(steady, 0, policy, 0.1, undecided=False)  # a precise median
    assert not timing_done(scattered, 0, policy, 0.1, undecided=False)  # imprecise, budget left
    assert timing_done(scattered, 0, policy, 2.5, undecided=False)  # the budget is spent
    # The hidden-work statistic undecided: on past the budget, as far as max_samples, never further.
    assert not timing_done(steady, 0, policy, 2.5, undecided=True)
    assert not timing_done(steady * 9, 9, policy, 30.0, undecided=True)
    assert timing_done(steady * 9, 10, policy, 30.0, undecided=True)


def test_more_batches_narrow_a_scattered_null_until_it_can_judge() -> None:
    # The H200's 1 MB ReLU: about 5 ms of excess per batch scattered by about 1.5 ms, over 1.15 ms windows.
    def stat(batches: int):
        return hidden_work(_noise(5.0, 1.5, batches), _noise(5.0, 1.5, batches), [1.15] * batches)

    few, many = stat(21), stat(100)
    assert few is not None and few.null_too_noisy
    assert many is not None and not many.null_too_noisy and not many.rejects


def test_the_limit_sits_between_honest_noise_and_a_meaningful_forgery() -> None:
    assert 0 < HIDDEN_FRACTION_LIMIT < 0.25  # a forger hiding 20% of its time shows 0.25


def test_windows_are_sized_by_device_time_and_never_smaller_than_the_judges_clock_asks() -> None:
    # 10 us per call by the events: 500 calls for 5 ms, capped by the protocol.
    assert calls_per_batch(5.0, event_ms=0.01, judge_ms=0.2, calls=1, cap=256) == 256
    assert calls_per_batch(5.0, event_ms=0.5, judge_ms=0.9, calls=1, cap=256) == 10
    # A worker reporting slow warm-up calls gets the judge clock's (larger) count.
    assert calls_per_batch(5.0, event_ms=50.0, judge_ms=0.6, calls=1, cap=256) == 9
    # No events (the CPU) and a round trip longer than the batch: as many calls as allowed.
    assert calls_per_batch(5.0, event_ms=None, judge_ms=-0.01, calls=1, cap=256) == 256
    assert calls_per_batch(0.0, event_ms=None, judge_ms=0.5, calls=1, cap=256) == 1


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
