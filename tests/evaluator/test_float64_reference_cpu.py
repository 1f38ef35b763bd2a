"""A kernel more accurate than the reference passes (issue 23, item 4): where the reference, run in its
dtype, is further from a float64 evaluation of the same program than the tolerance allows, outputs are
judged against that evaluation, and the result says so. On the CPU, through real worker processes."""

from __future__ import annotations

from cuda_agent_mcp.results import Passed, WrongOutput

# A long sum taken two ways and subtracted: exactly zero in exact arithmetic; in fp32 the two roundings of
# sums near 3e8 differ by a multiple of 32 in some rows, far outside atol 1e-2 of the truth (about 1e-6).
CANCELLING = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1)[:, -1:] - x.sum(dim=1, keepdim=True)

def get_inputs():
    return [torch.rand(8, 1 << 16) * 1e4]

def get_init_inputs():
    return []
"""

IN_FLOAT64 = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        y = x.double()
        return (torch.cumsum(y, dim=1)[:, -1:] - y.sum(dim=1, keepdim=True)).to(x.dtype)
"""


def test_a_candidate_closer_to_the_truth_than_the_reference_passes_and_says_what_judged_it(run_judge) -> None:
    report = run_judge(IN_FLOAT64, reference=CANCELLING, max_error_norm=1e-4)
    assert isinstance(report.verdict, Passed), report.verdict
    assert report.judged_against == "float64"


def test_a_candidate_far_from_both_the_reference_and_the_truth_still_fails(run_judge) -> None:
    off = IN_FLOAT64.replace(".to(x.dtype)", ".to(x.dtype) + 1.0")
    report = run_judge(off, reference=CANCELLING)
    assert isinstance(report.verdict, WrongOutput), report.verdict
    assert report.judged_against == "reference"


def test_where_the_reference_is_accurate_the_reference_judges(run_judge) -> None:
    # The default task (a scaled ReLU) is within tolerance of its float64 evaluation: no fallback.
    from tests.evaluator.conftest import HONEST

    report = run_judge(HONEST)
    assert isinstance(report.verdict, Passed) and report.judged_against == "reference"
