"""What a candidate must satisfy for one task, in figures and in words: the tolerance, the precision
rule, the hidden-size plan and the vendor libraries. `tasks show` prints it; a workspace laid out by
`workspace new` states it at the end of its SKILL.md. The figures are the ones verify uses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.evaluation.job import DISTRIBUTIONS
from cuda_agent_mcp.tasks import HiddenSize, ProbeReport, Task
from cuda_agent_mcp.tools.evaluate import PRECISION_NORM_LIMIT, STRICT_TOLERANCE, VerifyRequest

FULL_PRECISION = ("float32", "float64")


class TaskRules(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    dtype: str = Field(description="the task's dtype, as its policy (or the loader's guess) says")
    atol: float
    rtol: float
    strict_tolerance: float = Field(description="atol and rtol of verify --strict")
    precision_check: bool = Field(description="the task's policy: the precision rule on or off")
    max_error_norm: float = Field(
        default=PRECISION_NORM_LIMIT,
        description="largest relative error norm of a float32/float64 output while the rule is on",
    )
    hidden_sizes_enabled: bool
    hidden_sizes: list[HiddenSize] | None = Field(
        default=None, description="what the hidden-size trial grows; None: the task was not inspected"
    )
    vendor_libraries: tuple[str, ...]
    statements: list[str] = Field(description="each rule as one sentence, as SKILL.md states them")


def task_rules(task: Task, probe: ProbeReport | None) -> TaskRules:
    """The rules of `task`; with a probe report, the hidden-size plan is the judge's own."""
    policy = task.policy
    fields: dict[str, Any] = {
        "dtype": policy.dtype,
        "atol": policy.tolerance.atol,
        "rtol": policy.tolerance.rtol,
        "strict_tolerance": STRICT_TOLERANCE.get(policy.dtype, policy.tolerance.atol),
        "precision_check": policy.precision_check,
        "hidden_sizes_enabled": policy.hidden_sizes,
        "hidden_sizes": probe.hidden_sizes if probe is not None else None,
        "vendor_libraries": tuple(task.vendor_libraries),
    }
    draft = TaskRules(**fields, statements=[])
    return draft.model_copy(update={"statements": _statements(draft, task.id)})


def _statements(rules: TaskRules, task_id: str) -> list[str]:
    bound = max(rules.atol, rules.rtol)
    tolerance = (
        f"Tolerance: every output must match the reference within atol={rules.atol:g} and rtol={rules.rtol:g} "
        f"at each finite position (NaN and +-Inf at the same positions), with a relative error norm "
        f"||out - ref|| / ||ref|| of at most {bound:g}; verify --strict uses {rules.strict_tolerance:g}."
    )
    if not rules.precision_check:
        precision = "Precision: this task's policy allows reduced precision (no error-norm rule beyond the tolerance)."
    else:
        precision = (
            f"Precision: every float32/float64 output must also have a relative error norm of at most "
            f"{rules.max_error_norm:g}, or verify rejects it as precision_downgrade: fp16, bf16 and TF32 "
            "arithmetic land around 3e-4 and more (the reference runs with TF32 off), honest fp32 kernels "
            "near 1e-6. Compute in the task's precision."
        )
        if rules.dtype not in FULL_PRECISION:
            precision += (
                f" (This task's inputs are {rules.dtype}: the rule applies to float32/float64 outputs only.)"
            )
    return [tolerance, precision, _hidden_size_statement(rules, task_id), _vendor_statement(rules)]


def _hidden_size_statement(rules: TaskRules, task_id: str) -> str:
    if not rules.hidden_sizes_enabled:
        return "Hidden sizes: off by this task's policy; every verify trial uses the task's own sizes."
    every = len(DISTRIBUTIONS)
    trials = VerifyRequest().trials
    which = ", ".join(str(t + 1) for t in range(trials) if DISTRIBUTIONS[t % every] == "resized")
    when = f"one verify trial in {every} (trial {which} of the default {trials})"
    if rules.hidden_sizes is None:
        return (
            f"Hidden sizes: {when} grows the task's size globals (batch_size, dim, ...) to the next odd "
            f"value; `cuda-agent tasks show {task_id}` lists them. Read every size from the tensors."
        )
    if not rules.hidden_sizes:
        return (
            "Hidden sizes: this task has no size globals to grow, so every trial uses its own sizes; "
            "still read every size from the tensors."
        )
    grown = ", ".join(f"{h.name}={_size(h.hidden)} (not {_size(h.visible)})" for h in rules.hidden_sizes)
    return (
        f"Hidden sizes: {when} calls get_inputs() with {grown}; the weights and the model's structure "
        "stay those ModelNew was built with. Read every size from the tensors and handle the tail of "
        "every vector loop and tile."
    )


def _vendor_statement(rules: TaskRules) -> str:
    if not rules.vendor_libraries:
        return "Vendor libraries: none (no cuBLAS, cuDNN, CUTLASS, ...): write the kernels yourself."
    names = {"cublas": "cuBLAS (cublas_v2.h)", "cudnn": "cuDNN (cudnn.h)"}
    allowed = " and ".join(names.get(lib, lib) for lib in rules.vendor_libraries)
    return f"Vendor libraries: this task may call {allowed}; the build links it. Nothing else."


def _size(value: int | tuple[int, ...]) -> str:
    return str(value) if isinstance(value, int) else "(" + ", ".join(map(str, value)) + ")"


def skill_section(task: Task, rules: TaskRules) -> str:
    """The end of a new workspace's SKILL.md: this task's rules."""
    lines = [f"## This task: {task.id}", ""]
    lines += [f"- {statement}" for statement in rules.statements]
    return "\n".join(lines) + "\n"
