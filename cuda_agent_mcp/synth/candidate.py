"""A composed reference program before it is filtered: the code and where it came from."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

VendorClass = Literal["gemm", "conv", "other"]
ComposerName = Literal["programmatic", "llm"]


class Candidate(BaseModel):
    """One program a composer made. `code` is a whole KernelBench-format model.py at its real sizes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=0, description="its place in the run; with the run's seed it names the candidate")
    composer: ComposerName
    seed: int = Field(description="the composition seed: the same seed and index give the same program")
    code: str
    ops: tuple[str, ...] = Field(
        description="the seed operators it declares, e.g. ('nn.Conv2d', 'torch.relu')"
    )
    vendor_classes: tuple[VendorClass, ...] = Field(
        default=(), description="the vendor-library policy class of each declared operator, in order"
    )
    cpu_sizes: dict[str, int] = Field(
        default_factory=dict,
        description="module-level size globals to override for a CPU run (smaller, and consistent with "
        "each other); empty: the program runs at its own sizes",
    )
    estimate_ms: float | None = Field(
        default=None, description="the composer's estimate of its eager time on an H200, if it made one"
    )
    notes: dict[str, str] = Field(
        default_factory=dict, description="composer details: the model and prompt of an LLM composer"
    )
