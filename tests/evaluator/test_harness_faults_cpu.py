"""Failures of the harness are never the candidate's, and a candidate cannot pass its own failures off as
the harness's (issue 23, item 5). On the CPU, through real worker processes."""

from __future__ import annotations

from cuda_agent_mcp.judge.gpu_memory import MemoryAtFailure
from cuda_agent_mcp.results import Crashed
from tests.evaluator.conftest import HONEST

GIB = 1024**3


def test_an_out_of_memory_while_others_crowd_the_device_is_the_machines() -> None:
    # The H200 case: a judge held 110 GiB while the worker, holding 9 GiB, asked for more.
    crowded = MemoryAtFailure(worker_bytes=9 * GIB, used_bytes=119 * GIB, total_bytes=141 * GIB)
    assert not crowded.candidates_fault
    assert "other processes 110.00 GiB" in crowded.describe()


def test_an_out_of_memory_on_an_uncrowded_device_or_by_a_hog_is_the_candidates() -> None:
    faked = MemoryAtFailure(worker_bytes=1 * GIB, used_bytes=2 * GIB, total_bytes=141 * GIB)
    hog = MemoryAtFailure(worker_bytes=100 * GIB, used_bytes=140 * GIB, total_bytes=141 * GIB)
    assert faked.candidates_fault and hog.candidates_fault


def test_without_a_per_process_count_the_doubt_goes_to_the_candidate_only_on_a_crowded_device() -> None:
    unknown_crowded = MemoryAtFailure(worker_bytes=None, used_bytes=120 * GIB, total_bytes=141 * GIB)
    unknown_quiet = MemoryAtFailure(worker_bytes=None, used_bytes=10 * GIB, total_bytes=141 * GIB)
    assert not unknown_crowded.candidates_fault and unknown_quiet.candidates_fault
    assert "could not be measured" in unknown_crowded.describe()


def test_a_candidate_that_fakes_running_out_of_memory_gets_a_verdict_not_a_retry(run_judge) -> None:
    # The worker's word "out of memory" only asks; with room to spare (here: no device at all) it is a crash.
    faker = HONEST.replace(
        "        return (x * self.scale).clamp_min(0)",
        "        raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 MiB')",
    )
    report = run_judge(faker)
    assert report.infra_error is None and report.task_error is None
    assert isinstance(report.verdict, Crashed) and report.verdict.kind == "out_of_memory", report.verdict


def test_a_candidate_that_breaks_the_harness_step_before_its_calls_gets_a_verdict(run_judge) -> None:
    # Poisoning free memory (a prepare step) fails in its process because it patched torch at import; the
    # same request in a clean worker succeeds, so the failure is charged to it rather than retried.
    saboteur = HONEST.replace(
        "class ModelNew(nn.Module):",
        "def _refuse(self, *args, **kwargs):\n    raise RuntimeError('sabotaged')\n\n"
        "torch.Tensor.fill_ = _refuse\n\n\nclass ModelNew(nn.Module):",
    )
    report = run_judge(saboteur)
    assert report.infra_error is None, report.infra_error
    assert isinstance(report.verdict, Crashed), report.verdict
    assert "not in a clean worker" in report.verdict.message
