"""What a task is: a KernelBench-format reference program plus the metadata the evaluator needs."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.tasks.vendor import VendorLibrary, paper_vendor_libraries

DType = Literal["float32", "float16", "bfloat16", "float64", "int64", "int32", "bool", "other"]


class TolerancePolicy(BaseModel):
    """How close a candidate's outputs must be to the reference's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    atol: float = Field(default=1e-2, ge=0)
    rtol: float = Field(default=1e-2, ge=0)


# fp32 matches the paper and KernelBench v0.1; half types get the rounding of one extra op.
DEFAULT_TOLERANCE: dict[str, TolerancePolicy] = {
    "float32": TolerancePolicy(atol=1e-2, rtol=1e-2),
    "float64": TolerancePolicy(atol=1e-2, rtol=1e-2),
    "float16": TolerancePolicy(atol=1e-2, rtol=1e-2),
    "bfloat16": TolerancePolicy(atol=2e-2, rtol=2e-2),
}


class TaskPolicy(BaseModel):
    """Per-task switches of the build and the evaluator."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dtype: DType = "float32"
    tolerance: TolerancePolicy = TolerancePolicy()
    use_fast_math: bool = Field(
        default=True, description="nvcc --use_fast_math (on by default, as in the paper)"
    )
    vendor_libraries: tuple[VendorLibrary, ...] | None = Field(
        default=None,
        description="vendor libraries a candidate may call; None: the paper's policy, read from the "
        "reference (cuBLAS for matrix products, cuDNN for convolutions)",
    )
    hidden_sizes: bool = Field(
        default=True,
        description="verify also runs a trial at larger, odd sizes of the task's size globals "
        "(batch_size, dim, ...), so kernels that bake in the visible shape fail",
    )
    precision_check: bool = Field(
        default=True,
        description="fp32/fp64 outputs must also have a relative error norm of at most 1e-4, which fp16, "
        "bf16 and TF32 arithmetic exceed; False for a task that allows reduced precision (a verify "
        "request's precision_check overrides it)",
    )
    torch_headers_in_cuda: bool = Field(
        default=False,
        description="compile .cu units with torch's headers, as load_inline does: only for KernelBench "
        "single-file solutions scored under the 'kernelbench' rule set (bench/rules.py)",
    )


class TaskSource(BaseModel):
    """Where a task came from, precisely enough to load it again."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["file", "kernelbench", "dataset", "workspace", "inline"]
    path: str | None = None
    row: int | None = Field(default=None, description="row index, for datasets")


class Task(BaseModel):
    """A reference program (`Model`, `get_inputs`, `get_init_inputs`) and its metadata."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="stable id, e.g. kernelbench/level1/19 or examples/relu")
    name: str
    level: int | None = None
    source: TaskSource
    code: str = Field(repr=False, description="the reference program, becomes model.py")
    content_hash: str = Field(description="sha256 of the code, hex")
    policy: TaskPolicy = TaskPolicy()
    tags: dict[str, str] = Field(default_factory=dict, description="extra columns from the source")

    @property
    def vendor_libraries(self) -> tuple[VendorLibrary, ...]:
        """The vendor libraries a candidate for this task may call (see tasks/vendor.py)."""
        if self.policy.vendor_libraries is not None:
            return self.policy.vendor_libraries
        return paper_vendor_libraries(self.code)


def content_hash(code: str) -> str:
    """Hash of a reference program, insensitive to line-ending style."""
    normalized = code.replace("\r\n", "\n")
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


class TaskSummary(BaseModel):
    """One row of a task listing: everything but the code."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str
    level: int | None
    source: TaskSource
    content_hash: str
    dtype: DType

    @classmethod
    def of(cls, task: Task) -> TaskSummary:
        return cls(
            id=task.id,
            name=task.name,
            level=task.level,
            source=task.source,
            content_hash=task.content_hash,
            dtype=task.policy.dtype,
        )
