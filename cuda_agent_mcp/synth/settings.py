"""What a synthesis run is asked to do. Everything here decides which tasks come out, so a run directory
remembers it and a resumed run must be asked the same (`workers` and the progress are not here)."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cuda_agent_mcp.synth.candidate import ComposerName

DEFAULT_WINDOW_MS = (1.0, 100.0)


class LlmComposerSettings(BaseModel):
    """The OpenAI-compatible endpoint an LLM composer asks (vLLM or any hosted API)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=0.8, ge=0, le=2)
    max_tokens: int = Field(default=2048, gt=0)


class SynthesisSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int = Field(ge=1, le=1_000_000, description="candidates to compose")
    seed: int = Field(default=0, description="the same seed composes the same candidates")
    composer: ComposerName = "programmatic"
    max_ops: int = Field(default=5, ge=1, le=5)
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    device: Literal["cpu", "cuda"]
    runtime: bool = Field(
        default=True, description="run the programs (False: the static filters and the meta probe)"
    )
    compile: bool = Field(description="the torch.compile filter")
    window_ms: tuple[float, float] = Field(
        default=DEFAULT_WINDOW_MS, description="eager time on the GPU a task must take, in ms"
    )
    near_threshold: float = Field(default=0.9, gt=0, le=1.0)
    against: tuple[str, ...] = Field(
        default=(), description="the KernelBench trees decontaminated against (empty: not decontaminated)"
    )
    task_audit: bool = Field(default=False, description="the judge's task audit on every task that passed")
    timeout_s: float = Field(default=300.0, gt=0)
    host_memory_bytes: int = Field(default=8 * 1024**3, gt=0)
    gpu_memory_bytes: int = Field(default=16 * 1024**3, gt=0)
    llm: LlmComposerSettings | None = None

    @model_validator(mode="after")
    def _consistent(self) -> SynthesisSettings:
        low, high = self.window_ms
        if not 0 <= low < high:
            raise ValueError(
                f"the runtime window must be LOW,HIGH with 0 <= LOW < HIGH, not {low:g},{high:g}"
            )
        if self.composer == "llm" and self.llm is None:
            raise ValueError("the LLM composer needs an endpoint and a model (--base-url, --model)")
        return self

    def digest(self) -> str:
        """What a run directory is keyed by: a resumed run must be asked the same (where the LLM is served
        and its key are not part of it: the same model behind another address composes the same way)."""
        decisive = self.model_dump_json(exclude={"llm": {"base_url", "api_key_env"}})
        return hashlib.sha256(decisive.encode()).hexdigest()[:16]
