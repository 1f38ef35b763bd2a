"""On the GPU: a profile's optional Nsight Compute pass names the workspace's kernel with its metrics."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.results import Passed
from cuda_agent_mcp.tools import ProfileRequest, Session, profile_kernels
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]


def test_a_profile_with_ncu_detail_reports_the_workspace_kernels_metrics(shared_build_cache: Path) -> None:
    session = Session.open(EXAMPLES / "relu", cache_dir=shared_build_cache)
    result = anyio.run(lambda: profile_kernels(session, ProfileRequest(baselines="skip", detail="ncu")))
    assert isinstance(result.verdict, Passed), result.verdict
    assert result.ncu is not None
    report = result.ncu.model_dump_json(indent=1)
    if out := os.environ.get("OUT"):  # the raw report, kept with the run's results
        Path(out, "ncu_detail_relu.json").write_text(report)
    print(report)
    ours = [kernel for kernel in result.ncu.kernels if kernel.from_workspace]
    assert ours, result.ncu.note
    kernel = ours[0]
    assert kernel.duration_us and kernel.duration_us > 0
    assert kernel.dram_throughput_pct and kernel.dram_throughput_pct > 10  # ReLU is bandwidth-bound
    assert kernel.registers_per_thread and kernel.achieved_occupancy_pct
    assert kernel.static_shared_memory_bytes is not None and kernel.dynamic_shared_memory_bytes is not None
    # The timing, not the ncu pass, decided the verdict; the pass came after it.
    assert result.candidate is not None
