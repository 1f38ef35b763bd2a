"""The filters a composed program goes through, in order, and what each one says about it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FilterName = Literal[
    "parse",
    "duplicate",
    "decontaminate",
    "shape_probe",
    "eager",
    "deterministic",
    "non_degenerate",
    "compile",
    "runtime",
    "task_audit",
]

# In the order a candidate meets them; the first refusal ends its run.
FILTER_ORDER: tuple[FilterName, ...] = (
    "parse",
    "duplicate",
    "decontaminate",
    "shape_probe",
    "eager",
    "deterministic",
    "non_degenerate",
    "compile",
    "runtime",
    "task_audit",
)

FILTER_MEANING: dict[FilterName, str] = {
    "parse": "parses, and defines Model with forward, get_inputs and get_init_inputs (the static task check)",
    "duplicate": "its normalized code is not already in the set (content hash)",
    "decontaminate": "not near a KernelBench program or an earlier program of the set (AST and op sequence)",
    "shape_probe": "its entry points and forward run on the meta device (shapes, no compute)",
    "eager": "forward runs in eager mode and its output is finite",
    "deterministic": "the same seed gives the same output, and the random state does not change it",
    "non_degenerate": "another input draw changes the output, and no null answer matches it",
    "compile": "torch.compile runs it and agrees with eager",
    "runtime": "its eager time on the GPU lies in the window",
    "task_audit": "the judge's task audit (null candidates through verify) calls it sound",
}


class FilterOutcome(BaseModel):
    """One filter's verdict on one candidate. `passed` None: skipped, with the reason why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: FilterName
    passed: bool | None
    reason: str = ""
    measured: dict[str, object] = Field(default_factory=dict)


def first_refusal(outcomes: list[FilterOutcome]) -> FilterOutcome | None:
    return next((o for o in outcomes if o.passed is False), None)
