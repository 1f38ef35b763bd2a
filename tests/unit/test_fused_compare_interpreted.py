"""The one-pass comparison kernel (judge/fused_compare.py) run by Triton's interpreter on the CPU, against
the chunked torch pass it stands in for (judge/compare.py: `tally`): its logic is tested where there is no
GPU. (tests/gpu/test_fused_compare_gpu.py runs the compiled kernel.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.skipif(
    find_spec("triton") is None, reason="needs triton (CUDA builds of torch bring it)"
)

# In a child: the interpreter is chosen when Triton is imported, for the whole process.
SCRIPT = """
import json, torch
from cuda_agent_mcp.judge.compare import tally
from cuda_agent_mcp.judge.fused_compare import BLOCK, fused_summary

def case(out, ref):
    fused = fused_summary(out, ref, atol=1e-4, rtol=1e-4)
    exact = tally(out, ref, atol=1e-4, rtol=1e-4)
    return {
        "fused": [fused.bad, fused.nonfinite_mismatches, fused.max_abs, fused.max_rel, fused.diff_sq, fused.ref_sq],
        "exact": [exact.bad, exact.nonfinite_mismatch is not None, exact.max_abs, exact.max_rel, exact.diff_sq,
                  exact.ref_sq],
    }

torch.manual_seed(0)
n = 3 * BLOCK + 5
ref = torch.randn(n)
close = ref + 1e-6 * torch.randn(n)
wrong = close.clone(); wrong[[3, 700, n - 1]] += 1.0
edge = torch.ones(n); edge_ref = torch.ones(n); edge[7] = 1 + 1.01 * 2e-4; edge[8] = 1 + 0.99 * 2e-4
nan_ref = ref.clone(); nan_ref[5] = float("nan"); nan_out = close.clone(); nan_out[5] = float("nan")
moved = nan_out.clone(); moved[6] = float("nan")
inf_ref = ref.clone(); inf_ref[9] = float("inf"); flipped = close.clone(); flipped[9] = float("-inf")
half = ref.to(torch.float16)
print(json.dumps({
    "close": case(close, ref),
    "wrong": case(wrong, ref),
    "edge": case(edge, edge_ref),
    "nan_same": case(nan_out, nan_ref),
    "nan_moved": case(moved, nan_ref),
    "inf_flipped": case(flipped, inf_ref),
    "half": case((half.double() + 1e-3).half(), half),
}))
"""


@pytest.fixture(scope="module")
def cases() -> dict[str, dict[str, list[float]]]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, env=env, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["close", "wrong", "edge", "nan_same", "nan_moved", "inf_flipped", "half"])
def test_the_kernel_gives_the_torch_pass_statistics(
    cases: dict[str, dict[str, list[float]]], name: str
) -> None:
    fused, exact = cases[name]["fused"], cases[name]["exact"]
    assert fused[0] == exact[0]  # values outside the tolerance
    assert bool(fused[1]) == bool(exact[1])  # a NaN or infinity where the reference has none
    assert fused[2] == pytest.approx(exact[2], rel=1e-12, abs=0.0)  # max |diff|, in float64 both
    assert fused[3] == pytest.approx(exact[3], rel=1e-5)  # max relative error: float32, reported only
    assert fused[4] == pytest.approx(exact[4], rel=1e-9) and fused[5] == pytest.approx(exact[5], rel=1e-9)


def test_the_cases_are_the_ones_meant(cases: dict[str, dict[str, list[float]]]) -> None:
    assert cases["close"]["fused"][:2] == [0, 0]
    assert cases["wrong"]["fused"][0] == 3
    assert cases["edge"]["fused"][0] == 1  # just outside counts, just inside does not
    assert cases["nan_same"]["fused"][1] == 0
    assert cases["nan_moved"]["fused"][1] == 1 and cases["inf_flipped"]["fused"][1] == 1
