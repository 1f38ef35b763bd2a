"""What the tool layer asks of the judge process, and what the judge answers (the caller side's contract
with the judge: both import this module, torch-free)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from cuda_agent_mcp.results import KernelBreakdown, SanitizerReport, SpeedOfLight, TimingStats, Verdict

Distribution = Literal["task", "shifted", "resized"]
DISTRIBUTIONS: tuple[Distribution, ...] = ("task", "shifted", "resized")

# A judge server still holding this much GPU memory after a job (a worker kept the judge's buffers mapped
# until it was killed) is retired instead of kept idle: the memory only comes back when the server exits.
RETIRE_HELD_GPU_BYTES = 1 << 30
# Where a judge server's workers run (read by the judge server at its start): forked from its fork
# server, or each in a container.
WORKERS_ENV = "CUDA_AGENT_WORKERS"
WorkerBackend = Literal["fork", "docker"]


class TimingPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    warmup_calls: int = Field(default=3, ge=1)
    min_samples: int = Field(default=10, ge=3)
    max_samples: int = Field(default=100, ge=3)
    budget_s: float = Field(default=2.0, gt=0, description="stop sampling after this much wall time")
    target_rse: float = Field(
        default=0.01, gt=0, description="stop once the median's relative standard error is below"
    )
    max_disagreeing_fraction: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="discarded samples above this fraction reject the timing outright",
    )
    window_ms: float = Field(
        default=5.0,
        ge=0,
        description="short calls run in batches holding at least this much device work, so the harness's "
        "own noise (about 0.05 ms per batch on the H200) stays small next to each window",
    )


class Timeouts(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    load_s: float = Field(default=120.0, gt=0)
    call_s: float = Field(default=30.0, gt=0)
    compile_load_s: float = Field(
        default=300.0, gt=0, description="loading and first call of the torch.compile baseline"
    )


GIB = 1 << 30


class GpuMemoryPolicy(BaseModel):
    """How much GPU memory a candidate's processes may hold (issue 24, item 4), drawn from the task: for a
    batch, the larger of `device_fraction` of the device and `allowance_bytes` + `output_multiple` x the
    batch's outputs + `reference_multiple` x the reference's peak working memory for one call (measured in
    the judge). The judge measures it from outside (judge/memory_watch.py) and rejects beyond it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowance_bytes: int = Field(
        default=2 * GIB,
        ge=0,
        description="a worker's CUDA context, library workspaces and allocator slack, on top of its outputs",
    )
    output_multiple: float = Field(
        default=4.0,
        ge=1,
        description="times the batch's outputs: an honest worker holds them, the last batch's until the judge "
        "lets go, and the blocks its allocator caches (up to twice the outputs, measured on the H200)",
    )
    reference_multiple: float = Field(
        default=4.0, ge=1, description="times the reference's peak working memory for one call"
    )
    device_fraction: float = Field(
        default=1 / 16,
        gt=0,
        le=1,
        description="no budget is smaller than this share of the device: small tasks get room to spare",
    )
    limit_bytes: int | None = Field(
        default=None, gt=0, description="a fixed budget instead of the derived one (the operator's choice)"
    )

    def budget(self, *, out_bytes: int, reference_bytes: int, device_bytes: int) -> int:
        """The budget of a worker whose batch returns `out_bytes` of outputs in all."""
        if self.limit_bytes is not None:
            return self.limit_bytes
        derived = (
            self.allowance_bytes
            + int(self.output_multiple * out_bytes)
            + int(self.reference_multiple * reference_bytes)
        )
        return max(int(self.device_fraction * device_bytes), derived)


def baseline_cache_key(content_hash: str, gpu: str, torch_version: str) -> str:
    """The judge's baseline cache key (judge/baselines.py); `bench` seeds the cache with it. v2: the
    entries carry per-call samples (for speedup intervals); the rules version: baselines timed under
    other timing rules are measured again. Older entries are never a hit."""
    return f"v2:{VERDICT_RULES_VERSION}:{content_hash}:{gpu}:{torch_version}"


class EvalJob(BaseModel):
    """Everything the judge needs. Seeds are secret: they never leave the judge."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["verify", "profile", "baselines"] = Field(
        description="baselines: only the reference's eager and torch.compile timings (the candidate is not "
        "loaded), so a suite can tell a failing task from a failing candidate"
    )
    reference_path: str = Field(description="pristine model.py, owned by the harness")
    candidate_dir: str = Field(description="private copy holding model_new.py and cuda_extension.so")
    device: str = "cuda"
    seeds: list[int] = Field(min_length=1)
    init_seed: int
    distributions: list[Distribution] = Field(
        default=list(DISTRIBUTIONS),
        description="per trial, in turn: the task's own inputs; centred and widened floats; the task's "
        "distribution at larger odd sizes (judge/sizes.py)",
    )
    atol: float
    rtol: float
    op_audit: bool = Field(
        default=False, description="reject forward() calls that dispatch PyTorch compute ops"
    )
    max_error_norm: float | None = Field(
        default=None,
        description="relative error norm above which outputs count as computed at a lower precision than "
        "the task's dtype (fp16/bf16/TF32 arithmetic for an fp32 task), even if within atol/rtol",
    )
    timing: TimingPolicy = TimingPolicy()
    timeouts: Timeouts = Timeouts()
    baselines: Literal["measure", "cached", "skip"] = "measure"
    baseline_cache_path: str | None = None
    baseline_key: str = ""
    vendor_libraries: list[Literal["cublas", "cudnn"]] = Field(
        default_factory=list,
        description="libraries the task lets the candidate call: their kernels count as the workspace's",
    )
    sanitize: Literal["memcheck", "racecheck", "synccheck"] | None = Field(
        default=None, description="verify: also run one call under compute-sanitizer (evidence against only)"
    )
    workspace_kernels: list[str] = Field(
        default_factory=list,
        description="demangled names of the kernels the build compiled from the workspace (from ptxas); "
        "profile traces one call and requires these to carry most of its kernel time",
    )
    gpu_memory: GpuMemoryPolicy = Field(default_factory=GpuMemoryPolicy)


class ServerReady(BaseModel):
    """The judge server's first frame: imports done, CUDA context made."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Literal["ready"] = "ready"
    gpu: str
    torch: str
    startup_s: float


class JudgeReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    verdict: Verdict
    # A default, so the judge stamps its own code's version without saying so; the tool layer refuses a
    # report of another version (an installation changed under a running process).
    rules_version: str = Field(
        default=VERDICT_RULES_VERSION, description="the verdict rule set the judge ran (rules_version.py)"
    )
    distributions: list[str] = []
    candidate: TimingStats | None = None
    eager: TimingStats | None = None
    compiled: TimingStats | None = None
    baselines_cached: bool = False
    physical_floor_ms: float | None = None
    kernels: KernelBreakdown | None = None
    gpu: str = ""
    phases_s: dict[str, float] = Field(default_factory=dict, description="wall time per phase of the job")
    environment: dict[str, str] = Field(
        default_factory=dict, description="GPU, driver, CUDA and torch the judge used"
    )
    infra_error: str | None = Field(
        default=None,
        description="set when the judge or a step of the harness failed (not the candidate): retried on a "
        "fresh judge, never scored",
    )
    task_error: str | None = Field(
        default=None,
        description="set when the task's reference failed to run or be timed here: never the candidate's "
        "verdict, never scored",
    )
    evidence_missing: list[str] = Field(
        default_factory=list,
        description="evidence the judge could not gather: the timing is untrusted and the reward capped at correctness",
    )
    speed_of_light: SpeedOfLight | None = None
    faster_than_sol: bool = False
    hidden_sizes: str = Field(
        default="", description="how the hidden-size trial grew the task (or why it could not)"
    )
    judged_against: Literal["reference", "float64"] = Field(
        default="reference",
        description="what outputs were compared with: the reference in the task's dtype, or, for calls where "
        "that reference is further from a float64 evaluation of the same program than the tolerance and "
        "the kernel is within it, that float64 evaluation",
    )
    sanitizer: SanitizerReport | None = None
    held_gpu_bytes: int = Field(
        default=0,
        description="GPU memory the judge server still held after the job and its cache was emptied: "
        "buffers it shared with a worker that never unmapped them (see ReleaseRequest.inputs)",
    )
