"""The one-pass comparison kernel (judge/fused_compare.py) against the chunked torch pass it stands in for
(judge/compare.py: `tally`), on the cases a verdict turns on."""

from __future__ import annotations

import pytest
import torch

from cuda_agent_mcp.judge.compare import check_outputs, tally
from cuda_agent_mcp.judge.fused_compare import BLOCK, BLOCKS_PER_PROGRAM, fused_summary

pytestmark = pytest.mark.gpu

ATOL = RTOL = 1e-4
# Sizes around a program's span and its blocks, so the masked tail is exercised.
SIZES = [1, BLOCK - 1, BLOCK * BLOCKS_PER_PROGRAM + 3, 3 * BLOCK * BLOCKS_PER_PROGRAM]


def _pair(n: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device="cuda").manual_seed(n)
    ref = torch.randn(n, device="cuda", generator=generator).to(dtype)
    out = (ref.double() + 1e-6 * torch.randn(n, device="cuda", generator=generator, dtype=torch.float64)).to(
        dtype
    )
    return out, ref


def _agree(out: torch.Tensor, ref: torch.Tensor) -> None:
    fused = fused_summary(out, ref, atol=ATOL, rtol=RTOL)
    exact = tally(out, ref, atol=ATOL, rtol=RTOL)
    assert fused.bad == exact.bad
    assert (fused.nonfinite_mismatches > 0) == (exact.nonfinite_mismatch is not None)
    assert fused.max_abs == pytest.approx(exact.max_abs, rel=1e-12, abs=0.0)
    assert fused.max_rel == pytest.approx(exact.max_rel, rel=1e-5)  # float32, reported only
    assert fused.diff_sq == pytest.approx(exact.diff_sq, rel=1e-9)
    assert fused.ref_sq == pytest.approx(exact.ref_sq, rel=1e-9)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_close_outputs_give_the_torch_pass_statistics(n: int, dtype: torch.dtype) -> None:
    _agree(*_pair(n, dtype))


@pytest.mark.parametrize("n", SIZES[1:])
def test_every_value_outside_the_tolerance_is_counted(n: int) -> None:
    out, ref = _pair(n, torch.float32)
    wrong = torch.arange(0, n, 97, device="cuda")
    out[wrong] += 1.0
    _agree(out, ref)
    assert fused_summary(out, ref, atol=ATOL, rtol=RTOL).bad == wrong.numel()


def test_a_value_just_past_the_tolerance_is_bad_and_one_just_inside_is_not() -> None:
    ref = torch.full((BLOCK * 3,), 1.0, device="cuda")
    out = ref.clone()
    limit = ATOL + RTOL * 1.0
    out[7] = 1.0 + 1.01 * limit  # outside
    out[8] = 1.0 + 0.99 * limit  # inside
    assert fused_summary(out, ref, atol=ATOL, rtol=RTOL).bad == 1
    _agree(out, ref)


def test_nan_and_infinity_positions_must_match() -> None:
    out, ref = _pair(BLOCK * 5, torch.float32)
    ref[3] = out[3] = float("nan")
    ref[4] = out[4] = float("inf")
    assert fused_summary(out, ref, atol=ATOL, rtol=RTOL).nonfinite_mismatches == 0
    _agree(out, ref)
    for position, value in ((10, float("nan")), (11, float("inf")), (4, float("-inf"))):
        changed = out.clone()
        changed[position] = value
        assert fused_summary(changed, ref, atol=ATOL, rtol=RTOL).nonfinite_mismatches == 1
        _agree(changed, ref)


def test_check_outputs_reports_the_first_mismatch_found_by_the_kernel() -> None:
    out, ref = _pair(BLOCK * BLOCKS_PER_PROGRAM * 2, torch.float32)
    out[12345] += 5.0
    problem = check_outputs([out], "tensor", [ref], "tensor", atol=ATOL, rtol=RTOL)
    assert problem is not None and problem.mismatch is not None
    assert problem.mismatch.mismatched == 1 and problem.mismatch.first_index == [12345]
