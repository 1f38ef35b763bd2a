"""The judge against honest and dishonest candidates, end to end on the CPU (real worker processes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from cuda_agent_mcp.evaluation import job
from cuda_agent_mcp.evaluation.job import baseline_cache_key
from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from cuda_agent_mcp.judge.judge import Judge
from cuda_agent_mcp.results import ContractViolation, Crashed, Passed, Rejected, TimedOut, WrongOutput
from tests.evaluator.conftest import HONEST


def test_an_honest_candidate_passes_every_trial(run_judge) -> None:
    report = run_judge(HONEST)
    assert isinstance(report.verdict, Passed), report.verdict
    assert report.verdict.trials == 4
    assert report.environment["gpu"] == "cpu" and "process group" in report.environment["worker_isolation"]
    # The reference's sizes are literals: the hidden-size trial grows the leading dimension its inputs share.
    assert report.distributions == ["task", "shifted", "resized", "task"]
    assert report.hidden_sizes == "leading dimension of every tensor input grown: 64 -> 65"


def test_weights_come_from_the_reference_state_dict(run_judge) -> None:
    # The candidate initialises its parameter to zeros; the judge must load the reference's values.
    report = run_judge(HONEST.replace("torch.empty(features)", "torch.zeros(features)"))
    assert isinstance(report.verdict, Passed)


def test_a_kernel_that_only_works_on_the_tasks_input_range_fails_on_the_shifted_inputs(run_judge) -> None:
    # ReLU skipped: correct for torch.rand inputs (all >= 0) when scale > 0, wrong once signs flip.
    skip_relu = HONEST.replace("(x * self.scale).clamp_min(0)", "(x * self.scale.abs())")
    report = run_judge(skip_relu)
    assert isinstance(report.verdict, WrongOutput)
    assert report.verdict.distribution in ("task", "shifted")
    assert report.verdict.mismatch is not None and report.verdict.mismatch.mismatched > 0


def test_wrong_values_are_reported_with_the_first_mismatch(run_judge) -> None:
    report = run_judge(HONEST.replace("clamp_min(0)", "clamp_min(0) * 1.1"))
    verdict = report.verdict
    assert isinstance(verdict, WrongOutput) and verdict.phase == "verify" and verdict.trial == 0
    assert verdict.mismatch is not None
    assert len(verdict.mismatch.first_index) == 2
    assert verdict.mismatch.max_rel_error == pytest.approx(0.1, rel=1e-3)


def test_all_zeros_fails_even_when_the_reference_values_are_tiny(run_judge) -> None:
    tiny = HONEST.replace("return (x * self.scale).clamp_min(0)", "return torch.zeros_like(x)")
    reference = __import__("tests.evaluator.conftest", fromlist=["REFERENCE"]).REFERENCE.replace(
        "torch.relu(x * self.scale)", "torch.relu(x * self.scale) * 1e-4"
    )
    report = run_judge(tiny, reference=reference)
    assert isinstance(report.verdict, WrongOutput)
    assert "relative error norm" in report.verdict.message


@pytest.mark.parametrize(
    ("body", "check"),
    [
        ("return (x * self.scale).clamp_min(0).double()", "dtype"),
        ("return (x * self.scale).clamp_min(0)[:, :16]", "shape"),
        ("return ((x * self.scale).clamp_min(0),)", "structure"),
        ("y = (x * self.scale).clamp_min(0); x.zero_(); return y", "input_mutated"),
        ("y = (x * self.scale).clamp_min(0); y[0, 0] = float('nan'); return y", "nan_positions"),
    ],
)
def test_output_contract_violations_name_the_check(run_judge, body: str, check: str) -> None:
    report = run_judge(HONEST.replace("return (x * self.scale).clamp_min(0)", body))
    assert isinstance(report.verdict, ContractViolation), report.verdict
    assert report.verdict.check == check


def test_a_candidate_that_cannot_import_the_reference_is_reported_as_a_load_crash(run_judge) -> None:
    cheat = "from model import Model\n\nclass ModelNew(Model):\n    pass\n"
    report = run_judge(cheat)
    assert isinstance(report.verdict, Crashed)
    assert report.verdict.phase == "load" and report.verdict.kind == "exception"
    assert "No module named 'model'" in report.verdict.message


def test_an_exception_in_forward_is_a_call_crash_with_the_message(run_judge) -> None:
    report = run_judge(
        HONEST.replace("return (x * self.scale).clamp_min(0)", "raise ValueError('kernel missing')")
    )
    assert isinstance(report.verdict, Crashed)
    assert report.verdict.phase == "call" and "kernel missing" in report.verdict.message


def test_a_worker_that_exits_in_the_middle_is_reported_not_trusted(run_judge) -> None:
    report = run_judge(HONEST.replace("return (x * self.scale).clamp_min(0)", "import os; os._exit(0)"))
    assert isinstance(report.verdict, Crashed)
    assert report.verdict.kind == "process_exited"


def test_a_forged_reply_on_the_protocol_pipe_is_a_protocol_violation(run_judge) -> None:
    forge = HONEST.replace(
        "return (x * self.scale).clamp_min(0)",
        'import os, sys, struct; body = b\'{"op": "loaded", "parameter_count": 0}\'; '
        "os.write(int(sys.argv[2]), struct.pack('!I', len(body)) + body); return (x * self.scale).clamp_min(0)",
    )
    report = run_judge(forge)
    assert isinstance(report.verdict, Crashed)
    assert report.verdict.kind == "protocol"


def test_a_forward_that_never_returns_is_killed_and_reported_as_a_timeout(run_judge) -> None:
    report = run_judge(HONEST.replace("return (x * self.scale).clamp_min(0)", "while True: pass"))
    assert isinstance(report.verdict, TimedOut)
    assert report.verdict.phase == "call" and report.verdict.limit_s == 10


def test_output_printed_by_the_candidate_does_not_reach_the_protocol(run_judge) -> None:
    noisy = HONEST.replace(
        "return (x * self.scale).clamp_min(0)",
        'print(\'{"op": "loaded"}\' * 1000); return (x * self.scale).clamp_min(0)',
    )
    assert isinstance(run_judge(noisy).verdict, Passed)


def test_profiling_on_the_cpu_times_fresh_checked_calls(run_judge) -> None:
    report = run_judge(HONEST, mode="profile")
    assert isinstance(report.verdict, Passed), report.verdict
    assert report.candidate is not None and report.candidate.samples >= 5
    assert report.candidate.median_ms > 0


def test_profiling_on_the_cpu_runs_no_null_and_claims_no_clock_statistic(run_judge) -> None:
    # Without CUDA events there is nothing to cross-check the judge's clock against: no null worker runs,
    # and the statistic is absent rather than a number that means nothing.
    report = run_judge(HONEST, mode="profile")
    assert isinstance(report.verdict, Passed), report.verdict
    stats = report.candidate
    assert stats is not None and stats.harness_excess_ms is None and stats.hidden_fraction is None
    assert "null_calls" not in report.phases_s


def test_profiling_rechecks_every_timed_output(run_judge) -> None:
    # Honest for the first calls (warm-up and verification), lazy afterwards.
    lazy = HONEST.replace(
        "    def forward(self, x):\n        return (x * self.scale).clamp_min(0)",
        "    calls = 0\n    def forward(self, x):\n        ModelNew.calls += 1\n"
        "        if ModelNew.calls > 4:\n            return torch.zeros_like(x)\n"
        "        return (x * self.scale).clamp_min(0)",
    )
    report = run_judge(lazy, mode="profile")
    assert isinstance(report.verdict, WrongOutput)
    assert report.verdict.phase == "timed"


def test_the_op_audit_reports_pytorch_compute_dispatched_inside_forward(run_judge) -> None:
    report = run_judge(HONEST, op_audit=True)
    assert isinstance(report.verdict, Rejected), report.verdict
    assert report.verdict.reason == "forbidden_op"
    assert "aten::clamp_min" in report.verdict.message and "aten::mul" in report.verdict.message


def test_the_op_audit_allows_allocation_views_and_copies(run_judge) -> None:
    allocating = HONEST.replace(
        "return (x * self.scale).clamp_min(0)",
        "out = torch.empty_like(x)\n        out.copy_(x.contiguous().view(-1).view(x.shape))\n        return out",
    )
    report = run_judge(allocating, op_audit=True)
    assert isinstance(report.verdict, WrongOutput)  # wrong values, but nothing forbidden ran


@pytest.mark.parametrize("lower", ["half", "bfloat16"])
def test_computing_an_fp32_task_in_half_precision_is_a_precision_downgrade(run_judge, lower: str) -> None:
    # Within atol=rtol=1e-2, so the tolerance alone would pass it; the error norm gives it away.
    downgraded = HONEST.replace(
        "return (x * self.scale).clamp_min(0)",
        f"return (x.{lower}() * self.scale.{lower}()).clamp_min(0).float()",
    )
    report = run_judge(downgraded, max_error_norm=1e-4)
    assert isinstance(report.verdict, Rejected), report.verdict
    assert report.verdict.reason == "precision_downgrade"
    assert isinstance(run_judge(HONEST, max_error_norm=1e-4).verdict, Passed)
    assert isinstance(run_judge(downgraded).verdict, Passed)  # the check is a policy, off by default here


SIZED_REFERENCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

batch_size = 8
dim = 64

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
"""
SIZED_HONEST = """
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
"""


def test_an_honest_candidate_passes_at_the_hidden_sizes_too(run_judge) -> None:
    report = run_judge(SIZED_HONEST, reference=SIZED_REFERENCE)
    assert isinstance(report.verdict, Passed), report.verdict
    assert report.distributions == ["task", "shifted", "resized", "task"]


@pytest.mark.parametrize(
    ("body", "verdict_type"),
    [
        # Four elements at a time and no tail: exact for 8x64, the last element unwritten at 9x65.
        (
            "flat = x.reshape(-1); out = flat.new_zeros(flat.shape); n = flat.numel() // 4 * 4; "
            "out[:n] = flat[:n].clamp_min(0); return out.view_as(x)",
            WrongOutput,
        ),
        # The visible shape baked in.
        ("return x.reshape(8, 64).clamp_min(0)", Crashed),
    ],
    ids=["no_tail", "fixed_shape"],
)
def test_a_candidate_that_bakes_in_the_visible_shape_fails_at_the_hidden_sizes(
    run_judge, body: str, verdict_type: type
) -> None:
    candidate = SIZED_HONEST.replace("return x.clamp_min(0)", body)
    report = run_judge(candidate, reference=SIZED_REFERENCE)
    assert isinstance(report.verdict, verdict_type), report.verdict
    assert report.distributions[-1] == "resized"
    if isinstance(report.verdict, WrongOutput):
        assert report.verdict.distribution == "resized" and report.verdict.trial == 2


def test_a_reference_that_only_runs_at_its_own_sizes_is_checked_at_those(run_judge) -> None:
    fixed = SIZED_REFERENCE.replace("return torch.relu(x)", "return torch.relu(x.view(8, 64))")
    report = run_judge(SIZED_HONEST, reference=fixed)
    assert isinstance(report.verdict, Passed), report.verdict
    assert report.distributions == ["task", "shifted", "task", "task"]


def test_hidden_sizes_can_be_switched_off_per_job(run_judge) -> None:
    candidate = SIZED_HONEST.replace("return x.clamp_min(0)", "return x.reshape(8, 64).clamp_min(0)")
    report = run_judge(candidate, reference=SIZED_REFERENCE, distributions=["task", "shifted"])
    assert isinstance(report.verdict, Passed), report.verdict


def test_the_judges_report_names_the_verdict_rules_it_ran(run_judge) -> None:
    assert run_judge(HONEST).rules_version == VERDICT_RULES_VERSION


def test_cached_baselines_are_a_hit_only_under_the_verdict_rules_they_were_timed_under(
    run_judge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "baselines.json"
    timing = dict.fromkeys(("median_ms", "mean_ms", "min_ms", "p25_ms", "p75_ms"), 9.0) | {
        "cv": 0.0,
        "samples": 10,
    }
    key = baseline_cache_key("task", "cpu", torch.__version__)
    cache.write_text(json.dumps({key: {"eager": timing, "compiled": timing}}))
    baselines = {
        "mode": "baselines",
        "baselines": "cached",
        "baseline_cache_path": str(cache),
        "baseline_key": "task",
    }
    report = run_judge(HONEST, **baselines)
    assert report.baselines_cached and report.eager is not None and report.eager.median_ms == 9.0

    def measured(*args: object, **kwargs: object) -> None:
        raise RuntimeError("measured again")

    monkeypatch.setattr(job, "VERDICT_RULES_VERSION", "2099-01-01")  # the rules changed since
    monkeypatch.setattr(Judge, "start_worker", measured)  # what a miss does first (a worker of its own)
    missed = run_judge(HONEST, **baselines)
    assert not missed.baselines_cached and "measured again" in missed.model_dump_json()
