"""On the GPU: honest kernels pass verify and profile; dishonest ones are rejected for the right reason.

Every adversarial case reuses the ReLU example's binding (so only a ~1 s nvcc compile differs) and swaps
in a different kernel or model_new.py.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.results import ContractViolation, Crashed, Passed, Rejected, TimedOut, WrongOutput
from cuda_agent_mcp.tools import (
    EvaluateRequest,
    Session,
    evaluate_kernels,
)
from tests.conftest import EXAMPLES
from tests.redteam.workspaces import RELU_KERNEL, forward, launcher, profile, relu_session, verify

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir() if (p / "model.py").exists()))
def test_bundled_examples_pass_verify_profile_and_earn_a_reward(
    example: str, shared_build_cache: Path
) -> None:
    session = Session.open(EXAMPLES / example, cache_dir=shared_build_cache)
    result = anyio.run(lambda: evaluate_kernels(session, EvaluateRequest()))
    assert isinstance(result.verify.verdict, Passed), result.verify.verdict
    assert result.profile is not None and isinstance(result.profile.verdict, Passed), result.profile.verdict
    assert result.profile.candidate and result.profile.eager and result.profile.compiled
    assert result.profile.speedup_vs_eager is not None and result.profile.speedup_vs_eager > 0.5
    assert result.reward in (1.0, 2.0, 3.0)


def test_an_honest_kernel_on_a_small_task_gets_a_timing_verdict(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """KernelBench's ReLU at its size before level 1 was enlarged (16 x 16384, 1 MB). Each timed batch
    shares 44 outputs, which scattered the null's excess by 1.3 to 2 ms on the H200: over the 2 s budget's
    21 batches the statistic could not see a forger, and every profile was an infrastructure failure.
    Sampling goes on until it can."""
    small = tmp_path / "model.py"
    reference = (EXAMPLES / "relu" / "model.py").read_text()
    small.write_text(
        reference.replace("batch_size = 4096", "batch_size = 16").replace("dim = 8192", "dim = 16384")
    )
    session = relu_session(tmp_path, shared_build_cache, task_file=small)
    result = profile(session)
    assert isinstance(result.verdict, Passed), result.verdict
    assert result.candidate is not None and result.candidate.hidden_fraction is not None
    assert result.candidate.hidden_fraction <= 0.1


def test_an_out_of_bounds_write_is_a_cuda_error_crash(tmp_path: Path, shared_build_cache: Path) -> None:
    oob = RELU_KERNEL + launcher(
        "  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y + (int64_t(1) << 40), n);"
    )
    result = verify(relu_session(tmp_path, shared_build_cache, kernel=oob))
    assert isinstance(result.verdict, Crashed), result.verdict
    assert result.verdict.kind in ("cuda_error", "process_exited")


def test_after_a_crash_the_gpu_is_probed_and_stays_in_service(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    from cuda_agent_mcp.executors.scheduler import GpuScheduler

    oob = RELU_KERNEL + launcher(
        "  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y + (int64_t(1) << 40), n);"
    )
    crashing = relu_session(tmp_path / "a", shared_build_cache, kernel=oob)
    crashing.scheduler = GpuScheduler([0])
    assert isinstance(verify(crashing).verdict, Crashed)
    assert crashing.scheduler.last_probe == {0: "healthy"}  # probed after the crash
    assert crashing.scheduler.status() == {0: "idle"}  # and left in service
    honest = relu_session(tmp_path / "b", shared_build_cache)
    honest.scheduler = crashing.scheduler
    assert isinstance(verify(honest).verdict, Passed)


def test_a_kernel_that_never_ends_is_killed_and_reported_as_a_timeout(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    spin = """
__global__ void spin(volatile int* flag) { while (*flag == 0) { } }
""" + launcher(
        "  int* flag; cudaMalloc(&flag, 4); cudaMemsetAsync(flag, 0, 4, stream); spin<<<1, 1, 0, stream>>>(flag);"
    )
    result = verify(relu_session(tmp_path, shared_build_cache, kernel=spin), call_timeout_s=10)
    assert isinstance(result.verdict, TimedOut), result.verdict
    assert result.verdict.limit_s == 10


def test_an_output_the_kernel_never_writes_is_caught_by_poisoned_memory(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    nothing = RELU_KERNEL + launcher("  (void)x; (void)y; (void)n; (void)stream;")
    result = verify(relu_session(tmp_path, shared_build_cache, kernel=nothing))
    assert isinstance(result.verdict, ContractViolation | WrongOutput), result.verdict
    if isinstance(result.verdict, ContractViolation):
        assert result.verdict.check in ("nan_positions", "nondeterministic")


def test_a_kernel_that_writes_its_input_is_a_contract_violation(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    mutate = """
__global__ void relu_and_clear(float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) { y[i] = fmaxf(x[i], 0.f); x[i] = 0.f; }
}
""" + launcher("  relu_and_clear<<<(n + 255) / 256, 256, 0, stream>>>(const_cast<float*>(x), y, n);")
    result = verify(relu_session(tmp_path, shared_build_cache, kernel=mutate))
    assert isinstance(result.verdict, ContractViolation), result.verdict
    assert result.verdict.check == "input_mutated"


def test_work_moved_to_a_side_stream_is_caught_by_the_judges_clock(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    side = RELU_KERNEL + launcher(
        "  static cudaStream_t side = nullptr;\n"
        "  if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);\n"
        "  (void)stream;\n"
        "  for (int r = 0; r < 20; ++r) relu_kernel<<<(n + 255) / 256, 256, 0, side>>>(x, y, n);"
    )
    session = relu_session(tmp_path, shared_build_cache, kernel=side)
    assert isinstance(verify(session).verdict, Passed)  # correct once everything has finished
    result = profile(session, baselines="skip")
    assert isinstance(result.verdict, Rejected), result.verdict
    assert result.verdict.reason == "timing_disagreement"


def test_a_patched_event_timer_is_caught_by_the_judges_clock(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    patched = (EXAMPLES / "relu" / "model_new.py").read_text() + (
        "\ntorch.cuda.Event.elapsed_time = lambda self, end: 0.0001\n"
    )
    result = profile(relu_session(tmp_path, shared_build_cache, model_new=patched), baselines="skip")
    assert isinstance(result.verdict, Rejected), result.verdict
    # The example's kernel takes about 50 us: the forged 0.1 us is caught by the clock cross-check, or,
    # where the clocks' slack absorbs so short a kernel, by the physical floor (seen on the H200 at 0de1413).
    assert result.verdict.reason in ("timing_disagreement", "below_physical_floor")


def test_a_kernel_honest_only_while_checked_fails_on_the_rechecked_timed_outputs(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    lazy = (
        (EXAMPLES / "relu" / "model_new.py")
        .read_text()
        .replace(
            "        return cuda_extension.relu(x)",
            "        ModelNew.calls = getattr(ModelNew, 'calls', 0) + 1\n"
            "        if ModelNew.calls > 4:\n"
            "            return torch.empty_like(x)\n"
            "        return cuda_extension.relu(x)",
        )
    )
    result = profile(relu_session(tmp_path, shared_build_cache, model_new=lazy), baselines="skip")
    assert isinstance(result.verdict, WrongOutput | ContractViolation), result.verdict
    if isinstance(result.verdict, WrongOutput):
        assert result.verdict.phase == "timed"


def test_the_judge_gets_back_the_memory_it_shared_and_is_replaced_when_a_worker_keeps_it(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    # Each verify shares three sets of 128 MiB input buffers with its worker (the task's sizes, then the
    # hidden sizes, then the task's again). An honest worker unmaps them before it is killed; otherwise
    # the judge server would keep them for good (about 400 MiB a verify, found as an out-of-memory crash
    # after six verifies of the 6.4 GB KernelBench ReLU).
    honest = relu_session(tmp_path / "honest", shared_build_cache)
    retired = honest.judges.retired
    for _ in range(4):
        assert isinstance(verify(honest).verdict, Passed)
    assert honest.judges.retired == retired
    # A candidate that holds on to every input it is given keeps the mappings alive until it is killed:
    # the server that shared them is retired once it holds more than 1 GiB, and the next job gets a new one.
    hoarding = relu_session(
        tmp_path / "hoarding",
        shared_build_cache,
        model_new=forward(
            "        SEEN.append(x)\n        return cuda_extension.relu(x)", prelude="SEEN = []"
        ),
    )
    for _ in range(4):
        assert isinstance(verify(hoarding).verdict, Passed)
    assert hoarding.judges.retired > retired
    assert isinstance(verify(honest).verdict, Passed)
