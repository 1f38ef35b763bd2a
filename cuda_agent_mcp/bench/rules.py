"""The two rule sets a suite is scored under (docs/bench.md).

cuda-agent (the default): the CUDA Agent paper's rules as this evaluator enforces them: the task's
tolerance (1e-2 for fp32), an fp32 relative error norm of at most 1e-4 (no TF32 or half arithmetic), no
PyTorch compute in ModelNew or the host code (static audit and runtime op audit), pure-CUDA `.cu` units.

kernelbench: what KernelBench itself allows, and nothing more: atol = rtol = 1e-2 for every dtype
(KernelBench v0.1 and v3; no error-norm check), PyTorch ops beside the custom kernels in ModelNew and in
host code, and `.cu` sources that include torch's headers, as `load_inline` compiles them. Every trust
check stays: separate worker process, secret inputs, poisoned memory, the hidden-size trial, rechecked
timed outputs, the three clocks, the kernel trace (the workspace's kernels and the libraries the task
allows must carry most of the device time), vendor-library and cache-control rules, no try/except
fallbacks, no imports of the reference.
"""

from __future__ import annotations

from typing import Literal

from cuda_agent_mcp.bench.models import RuleSet, SolutionKind
from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.evaluation.reward import RewardSchedule
from cuda_agent_mcp.tasks import Task
from cuda_agent_mcp.tasks.model import TolerancePolicy
from cuda_agent_mcp.tools import EvaluateRequest, ProfileRequest, VerifyRequest

KERNELBENCH_TOLERANCE = TolerancePolicy(atol=1e-2, rtol=1e-2)


def check_rules(rules: RuleSet, solution_kind: str) -> None:
    """KernelBench single-file solutions build their CUDA against torch's headers, which the cuda-agent
    rules keep out of `.cu` files: they are scored under the kernelbench rules only."""
    if solution_kind == "kernelbench" and rules != "kernelbench":
        raise UsageError(
            "KernelBench single-file solutions are scored under --rules kernelbench: their CUDA sources "
            "include torch's headers, which the cuda-agent rules keep out of .cu files"
        )


def task_under(rules: RuleSet, task: Task, solution_kind: SolutionKind | None) -> Task:
    """The task as the rule set evaluates it."""
    if rules == "cuda-agent":
        return task
    policy = task.policy.model_copy(
        update={
            "tolerance": KERNELBENCH_TOLERANCE,
            "torch_headers_in_cuda": solution_kind == "kernelbench",
        }
    )
    return task.model_copy(update={"policy": policy})


def evaluate_request(
    rules: RuleSet,
    *,
    device: Literal["cuda", "cpu"],
    audit: bool,
    trials: int,
    budget_s: float,
    schedule: RewardSchedule,
) -> EvaluateRequest:
    """verify + profile as the rule set asks; baselines come from the cache (measured once per task)."""
    kernelbench = rules == "kernelbench"
    return EvaluateRequest(
        verify=VerifyRequest(
            trials=trials,
            device=device,
            audit=audit,
            precision_check=not kernelbench,
            torch_glue=kernelbench,
        ),
        profile=ProfileRequest(device=device, baselines="cached", budget_s=budget_s),
        reward_schedule=schedule,
    )
