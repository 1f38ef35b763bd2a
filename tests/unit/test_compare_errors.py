"""A comparison that passes measures how far off the outputs are in the same pass (judge/compare.py), so
the judge's precision check and its Passed record need no second pass over multi-gigabyte outputs."""

from __future__ import annotations

import pytest
import torch

from cuda_agent_mcp.judge.compare import Errors, check_outputs, errors


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
def test_a_passing_comparison_measures_what_a_separate_pass_would(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    reference = [torch.randn(3, 1000).to(dtype), (torch.rand(257) + 1).to(dtype)]
    noise = 1e-4 if dtype.is_floating_point else 0
    actual = [r + noise * torch.randn_like(r.double()).to(dtype) for r in reference]
    measured: list[Errors] = []
    problem = check_outputs(actual, "tuple", reference, "tuple", atol=1e-2, rtol=1e-2, measured=measured)
    assert problem is None
    assert measured == [errors(a, r) for a, r in zip(actual, reference, strict=True)]
    if dtype.is_floating_point:
        assert all(0 < m.max_abs < 1e-3 and 0 < m.norm < 1e-3 for m in measured)


def test_a_failing_comparison_measures_nothing_for_the_output_that_failed() -> None:
    reference = [torch.ones(8), torch.ones(8)]
    actual = [torch.ones(8), torch.full((8,), 2.0)]
    measured: list[Errors] = []
    problem = check_outputs(actual, "tuple", reference, "tuple", atol=1e-3, rtol=1e-3, measured=measured)
    assert problem is not None and problem.mismatch is not None and problem.mismatch.output_index == 1
    assert measured == [Errors(0.0, 0.0, 0.0)]  # the first output matched exactly
