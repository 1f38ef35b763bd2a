"""Timing attacks (catalog section D) beyond those in tests/gpu/test_evaluation_gpu.py: a worker that forges
every clock it owns is still bounded by the judge's clock and by physics. On the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.results import Rejected
from tests.redteam.workspaces import RELU_KERNEL, forward, launcher, profile, relu_session

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

FORGE_BOTH_CLOCKS = (
    "import time\n"
    "torch.cuda.Event.elapsed_time = lambda self, end: 0.0001\n"
    "_frozen = time.perf_counter()\n"
    "time.perf_counter = lambda: _frozen\n"
)
SLOW = RELU_KERNEL + launcher(
    "  for (int r = 0; r < 100; ++r) relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);"
)


@pytest.mark.parametrize("slow_kernel", [False, True], ids=["fast_kernel", "slow_kernel"])
def test_forging_the_event_timer_and_the_wall_clock_is_rejected(
    slow_kernel: bool, tmp_path: Path, shared_build_cache: Path
) -> None:
    session = relu_session(
        tmp_path,
        shared_build_cache,
        kernel=SLOW if slow_kernel else None,
        model_new=forward("        return cuda_extension.relu(x)", prelude=FORGE_BOTH_CLOCKS),
    )
    result = profile(session, baselines="skip")
    assert isinstance(result.verdict, Rejected), result.verdict
    # A slow kernel's real time shows on the judge's clock; a fast one's forged time is below physics.
    expected = {"timing_disagreement"} if slow_kernel else {"timing_disagreement", "below_physical_floor"}
    assert result.verdict.reason in expected
