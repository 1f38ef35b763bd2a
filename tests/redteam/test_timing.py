"""Timing attacks (catalog section D) beyond those in tests/gpu/test_evaluation_gpu.py: a worker that forges
every clock it owns is still bounded by the judge's clock and by physics. On the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.results import Passed, Rejected, WrongOutput
from tests.redteam.workspaces import RELU_KERNEL, forward, launcher, profile, relu_session, verify

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


STALE_GRAPH = forward(
    "        if STATE['graph'] is None:\n"
    "            STATE['x'] = x.clone()\n"
    "            side = torch.cuda.Stream()\n"
    "            side.wait_stream(torch.cuda.current_stream())\n"
    "            with torch.cuda.stream(side):\n"
    "                cuda_extension.relu(STATE['x'])\n"
    "            torch.cuda.current_stream().wait_stream(side)\n"
    "            STATE['graph'] = torch.cuda.CUDAGraph()\n"
    "            with torch.cuda.graph(STATE['graph']):\n"
    "                STATE['y'] = cuda_extension.relu(STATE['x'])\n"
    "        STATE['graph'].replay()  # the captured input buffer is never refreshed\n"
    "        return STATE['y'].clone()",
    prelude="STATE = {'graph': None}",
)
CAPTURE_DETECTING = forward(
    "        if torch.cuda.is_current_stream_capturing():\n"
    "            return torch.zeros_like(x)  # what a graph-replaying timer would record\n"
    "        return cuda_extension.relu(x)",
)


def test_a_cuda_graph_replayed_on_its_captured_inputs_is_wrong_output(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    # Catalog 33: one capture, then replays of a graph whose input buffer never sees the new inputs.
    result = verify(relu_session(tmp_path, shared_build_cache, model_new=STALE_GRAPH))
    assert isinstance(result.verdict, WrongOutput), result.verdict
    assert result.verdict.trial >= 1


def test_a_candidate_that_cheats_only_under_graph_capture_is_judged_on_what_it_computes(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    # Catalog 33, the capture-detecting form: the judge never captures forward() into a graph, so the
    # cheat's branch never runs; every checked and timed output is the kernel's own.
    session = relu_session(tmp_path, shared_build_cache, model_new=CAPTURE_DETECTING)
    assert isinstance(verify(session).verdict, Passed)
    assert isinstance(profile(session, baselines="skip").verdict, Passed)


# Catalog 35: the first call leaves a kernel streaming a 1 GiB buffer on a side stream for ~20 s, so that
# a baseline timed while it runs looks slow. Baselines run only after the candidate's worker is killed.
HAMMER = (
    RELU_KERNEL
    + """
__global__ void hammer_kernel(const float4* buffer, int64_t n, long long cycles, float* sink) {
  long long start = clock64();
  float acc = 0.f;
  while (clock64() - start < cycles)
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
      acc += buffer[i].x;
  if (acc == 1234.5f) *sink = acc;
}
"""
    + launcher(
        "  static bool started = false;\n"
        "  if (!started) {\n"
        "    started = true;\n"
        "    cudaStream_t side;\n"
        "    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);\n"
        "    float4* buffer;\n"
        "    cudaMalloc(&buffer, 1LL << 30);\n"
        "    hammer_kernel<<<132, 256, 0, side>>>(buffer, (1LL << 30) / 16, 40000000000LL, reinterpret_cast<float*>(buffer));\n"
        "  }\n" + "  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);"
    )
)


def test_a_kernel_left_running_to_slow_the_baselines_does_not_reach_them(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    clean = profile(relu_session(tmp_path / "clean", shared_build_cache), baselines="measure")
    assert isinstance(clean.verdict, Passed) and clean.eager is not None, clean.verdict
    session = relu_session(tmp_path / "hammer", shared_build_cache, kernel=HAMMER)
    result = profile(session, baselines="measure")
    assert result.eager is not None and not result.baselines_cached, result.verdict
    assert result.eager.median_ms < 1.2 * clean.eager.median_ms, (result.eager, clean.eager)
