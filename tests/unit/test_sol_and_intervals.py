"""Speed of light, speedup intervals and the reward rules built on them, on numbers (principles 5, 11)."""

from __future__ import annotations

import textwrap
import types

import pytest
import torch

from cuda_agent_mcp.evaluation.intervals import speedup_interval, straddles
from cuda_agent_mcp.evaluation.reward import reward
from cuda_agent_mcp.judge.sol import Work, reference_work, speed_of_light
from cuda_agent_mcp.results import SpeedupInterval, TimingStats

PEAKS = {
    "copy_bytes_per_s": 4e12,
    "matmul_fp32_flops_per_s": 5e13,
    "matmul_bf16_flops_per_s": 7.5e14,
    "source": "test",
}


def _module(code: str) -> types.ModuleType:
    module = types.ModuleType("reference")
    exec(textwrap.dedent(code), module.__dict__)
    return module


def test_the_work_of_a_reference_is_counted_on_the_meta_device() -> None:
    matmul = _module(
        """
        import torch
        class Model(torch.nn.Module):
            def forward(self, a, b):
                return a @ b
        def get_inputs():
            return [torch.randn(1024, 512), torch.randn(512, 256)]
        def get_init_inputs():
            return []
        """
    )
    work = reference_work(matmul, [])
    assert work is not None
    assert work.flops == 2 * 1024 * 512 * 256
    assert work.bytes_moved == 4 * (1024 * 512 + 512 * 256 + 1024 * 256)
    assert work.dtype == torch.float32


def test_speed_of_light_is_the_larger_of_the_memory_and_compute_bounds_and_scores_like_sol_execbench() -> (
    None
):
    memory_bound = Work(bytes_moved=8_000_000_000, flops=0, dtype=torch.float32)
    sol = speed_of_light(memory_bound, PEAKS, candidate_ms=4.0, baseline_ms=6.0)
    assert sol is not None and sol.bound == "memory"
    assert sol.t_sol_ms == pytest.approx(2.0)
    assert sol.fraction == pytest.approx(0.5)
    # S = 1 / (1 + (t_k - t_sol) / (t_b - t_sol)) = 1 / (1 + 2 / 4)
    assert sol.score == pytest.approx(2 / 3)
    at_baseline = speed_of_light(memory_bound, PEAKS, candidate_ms=6.0, baseline_ms=6.0)
    assert at_baseline is not None and at_baseline.score == pytest.approx(0.5)
    compute_bound = Work(bytes_moved=1000, flops=10**12, dtype=torch.bfloat16)
    sol = speed_of_light(compute_bound, PEAKS, candidate_ms=2.0, baseline_ms=None)
    assert sol is not None and sol.bound == "compute" and sol.t_sol_ms == pytest.approx(1e12 / 7.5e14 * 1e3)
    assert sol.score is None  # no baseline, no score
    assert (
        speed_of_light(None, PEAKS, 1.0, 1.0) is None and speed_of_light(memory_bound, None, 1.0, 1.0) is None
    )


def _stats(samples: list[float]) -> TimingStats:
    ordered = sorted(samples)
    median = ordered[len(ordered) // 2]
    return TimingStats(
        median_ms=median, mean_ms=median, min_ms=ordered[0], p25_ms=median, p75_ms=median, cv=0.0,
        samples=len(samples), samples_ms=samples,
    )  # fmt: skip


def test_a_speedup_interval_resamples_both_sides_and_is_repeatable() -> None:
    steady = speedup_interval(_stats([2.0] * 20), _stats([1.0] * 20))
    assert steady is not None and steady.low == pytest.approx(2.0) and steady.high == pytest.approx(2.0)
    noisy_candidate = [1.0 + 0.02 * ((i * 7) % 11 - 5) for i in range(40)]
    noisy_baseline = [2.0 + 0.04 * ((i * 5) % 13 - 6) for i in range(40)]
    first = speedup_interval(_stats(noisy_baseline), _stats(noisy_candidate))
    again = speedup_interval(_stats(noisy_baseline), _stats(noisy_candidate))
    assert first == again  # seeded by the samples
    assert first is not None and first.low < 2.0 < first.high
    assert speedup_interval(_stats([1.0]).model_copy(update={"samples_ms": []}), _stats([1.0])) is None


def test_an_interval_straddling_a_threshold_is_within_noise() -> None:
    assert straddles(SpeedupInterval(low=1.03, high=1.08), 1 / 0.95)
    assert not straddles(SpeedupInterval(low=1.06, high=1.08), 1 / 0.95)
    assert not straddles(None, 1.0)


def test_a_milestone_needs_the_intervals_lower_bound_past_its_threshold() -> None:
    # Medians 1.07x / 1.07x would be reward 3; lower bounds 1.06 / 1.03: only the eager step is shown.
    assert reward("milestones", True, 1.07, 1.07) == 3.0
    assert reward("milestones", True, 1.07, 1.07, lower_bounds=(1.06, 1.03)) == 2.0
    # log_speedup has no thresholds: medians.
    assert reward("log_speedup", True, 2.0, 2.0, lower_bounds=(1.0, 1.0)) == pytest.approx(0.6931, rel=1e-3)


def test_missing_evidence_caps_the_reward_at_correctness() -> None:
    assert reward("milestones", True, 3.0, 3.0, capped=True) == 1.0
    assert reward("fast_p", True, 3.0, 3.0, capped=True) == 0.0
    assert reward("milestones", False, 3.0, 3.0, capped=True) == -1.0
