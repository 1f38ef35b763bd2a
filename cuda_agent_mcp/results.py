"""Result models returned by the tool layer: frozen, no sentinels (None means "not measured")."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


Severity = Literal["error", "warning", "note"]


class Diagnostic(_Frozen):
    """One compiler or linker message, located in a workspace file where the tool said where."""

    file: str | None = Field(description="workspace-relative path, None for messages not tied to a file")
    line: int | None = None
    column: int | None = None
    severity: Severity
    message: str
    tool: Literal["nvcc", "c++", "ptxas", "linker", "build"] = Field(
        description="who reported it; 'build' is the harness itself (an input it refused)"
    )


class KernelResources(_Frozen):
    """Per-kernel resource usage reported by `ptxas -v`."""

    file: str
    name: str = Field(description="demangled kernel name")
    mangled_name: str
    arch: str
    registers: int
    shared_memory_bytes: int = Field(description="static shared memory")
    constant_memory_bytes: int = 0
    stack_frame_bytes: int = 0
    spill_stores_bytes: int = 0
    spill_loads_bytes: int = 0
    barriers: int = 0


FileAction = Literal["compiled", "cached", "failed", "timed_out"]


class FileBuild(_Frozen):
    """What the build did with one translation unit."""

    file: str = Field(description="workspace-relative path; the harness's binding.cpp is 'binding.cpp'")
    kind: Literal["cu", "cpp"]
    action: FileAction
    wall_s: float = Field(description="compile time now; 0 for a cache hit")
    object_key: str = Field(description="content address of the object in the build cache")


BuildFailure = Literal[
    "no_sources", "compile_error", "link_error", "timeout", "output_limit", "refused_input", "no_binding"
]
# What confined the compilers: Landlock in their own process, the executor's view (namespaces, bubblewrap)
# or container;
# "none" only where reduced isolation was explicitly allowed.
BuildConfinement = Literal["landlock", "namespaces", "bubblewrap", "container", "none"]


class BuildResult(_Frozen):
    """The outcome of turning a workspace into a Python extension."""

    ok: bool
    failure: BuildFailure | None = None
    summary: str = Field(description="one line a person or a model can act on")
    source_hash: str = Field(description="sha256 over every source and header the build used")
    build_key: str | None = Field(default=None, description="content address of the linked extension")
    extension_path: str | None = Field(default=None, description="the built extension in the build cache")
    workspace_extension_path: str | None = Field(default=None, description="the copy placed in the workspace")
    files: list[FileBuild] = []
    diagnostics: list[Diagnostic] = []
    kernels: list[KernelResources] = []
    ignored_protected_files: list[str] = Field(
        default_factory=list,
        description="protected files edited in the workspace; the pristine copies were used",
    )
    log: str = Field(default="", description="compiler and linker output of the failing steps, truncated")
    confinement: list[BuildConfinement] = Field(
        default_factory=list,
        description="the views the compilers ran in (principle 7: only the workspace and the toolchain)",
    )
    arch: str
    wall_s: float

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]


# -- evaluation ---------------------------------------------------------------------------------


class Mismatch(_Frozen):
    """Where and by how much one output differs from the reference."""

    output_index: int
    mismatched: int = Field(description="elements outside tolerance")
    total: int
    max_abs_error: float
    max_rel_error: float
    relative_norm_error: float = Field(description="||actual - expected|| / ||expected||")
    first_index: list[int]
    expected: float
    actual: float


class Passed(_Frozen):
    status: Literal["passed"] = "passed"
    trials: int
    max_abs_error: float
    max_rel_error: float


class WrongOutput(_Frozen):
    status: Literal["wrong_output"] = "wrong_output"
    phase: Literal["verify", "timed"]
    trial: int
    distribution: str
    message: str
    mismatch: Mismatch | None = None


ContractCheck = Literal[
    "structure",
    "dtype",
    "shape",
    "device",
    "transport",
    "input_mutated",
    "nan_positions",
    "nondeterministic",
    "aliasing",
    "tensor_type",
]


class ContractViolation(_Frozen):
    status: Literal["contract_violation"] = "contract_violation"
    check: ContractCheck
    trial: int
    message: str


class CompileFailed(_Frozen):
    status: Literal["compile_failed"] = "compile_failed"
    summary: str
    diagnostics: list[Diagnostic] = []


class Crashed(_Frozen):
    """Candidate code raised, hit a CUDA error, or its process died."""

    status: Literal["crashed"] = "crashed"
    phase: Literal["load", "call"]
    kind: Literal["exception", "cuda_error", "bad_output", "process_exited", "protocol", "out_of_memory"]
    message: str
    log_tail: str = ""


class TimedOut(_Frozen):
    status: Literal["timed_out"] = "timed_out"
    phase: Literal["load", "call"]
    limit_s: float


class AuditFinding(_Frozen):
    """One forbidden construct found in the workspace's sources, where it is and why it is forbidden."""

    file: str
    line: int | None
    rule: str
    message: str


class Rejected(_Frozen):
    """Refused on evidence other than the outputs: the sources break a rule, or the timings do not add up."""

    status: Literal["rejected"] = "rejected"
    reason: Literal[
        "forbidden_op",
        "timing_disagreement",
        "below_physical_floor",
        "background_thread",
        "noisy_timing",
        "precision_downgrade",
        "foreign_kernels",
        "sanitizer",
        "foreign_work",
        "process_left_running",
        "gpu_memory_exceeded",
    ]
    message: str
    findings: list[AuditFinding] = []
    evidence: dict[str, float] = Field(
        default_factory=dict,
        description="the measured numbers behind the rejection (for timing_disagreement the timing rule's "
        "statistic `hidden_fraction` and its parts), so it can be audited and compared across runs",
    )


Verdict = Annotated[
    Passed | WrongOutput | ContractViolation | CompileFailed | Crashed | TimedOut | Rejected,
    Field(discriminator="status"),
]


class TimingStats(_Frozen):
    """Per-call device times of one implementation (CUDA events on its stream, L2 flushed before each)."""

    median_ms: float
    mean_ms: float
    min_ms: float
    p25_ms: float
    p75_ms: float
    cv: float = Field(description="coefficient of variation of the samples")
    samples: int
    discarded_samples: int = Field(
        default=0, description="samples whose times the judge's clock contradicted"
    )
    harness_excess_ms: float | None = Field(
        default=None,
        description="the harness's own cost per batch beyond the worker's wall clock and the round trip: the "
        "median excess of a clean worker's batches interleaved with these (same size, outputs, window)",
    )
    judge_excess_median_ms: float | None = Field(
        default=None,
        description="judge's clock minus the worker's wall clock and the round trip, median over the batches",
    )
    hidden_fraction: float | None = Field(
        default=None,
        description="the timing rule's statistic: lower confidence bound of the batches' excess beyond the "
        "null's, as a fraction of the window (<= 0 for honest code; rejected above 0.10)",
    )
    judge_excess_max_ms: float | None = Field(default=None, description="the same, worst call")
    samples_ms: list[float] = Field(
        default_factory=list,
        description="the time per call of each accepted batch (for confidence intervals)",
    )
    batch_calls: int = Field(default=1, description="calls per timed batch (short kernels run in batches)")


class SanitizerReport(_Frozen):
    """compute-sanitizer's verdict on one call of the candidate (evidence against only: `clean` proves
    nothing, `errors` rejects with the first report)."""

    tool: Literal["memcheck", "racecheck", "synccheck"]
    status: Literal["clean", "errors", "unavailable", "failed", "timed_out", "skipped"]
    message: str = ""
    file: str | None = None
    line: int | None = None
    wall_s: float = 0.0


class VerifyResult(_Frozen):
    verdict: Verdict
    source_hash: str
    build_key: str | None
    trials: int
    distributions: list[str]
    hidden_sizes: str = Field(
        default="", description="how the hidden-size trial grew the task, or why it could not"
    )
    sanitizer: SanitizerReport | None = Field(
        default=None, description="the compute-sanitizer gate, when asked for"
    )
    judged_against: Literal["reference", "float64"] = Field(
        default="reference",
        description="what outputs were compared with: the reference in the task's dtype, or, for calls where "
        "that reference is further from a float64 evaluation of the same program than the tolerance and "
        "the kernel is within it, that float64 evaluation",
    )
    wall_s: float
    phases_s: dict[str, float] = Field(default_factory=dict, description="where the wall time went")
    environment: dict[str, str] = Field(default_factory=dict, description="GPU, driver, CUDA, torch used")
    rules_version: str | None = Field(
        default=None,
        description="the verdict rule set this result was judged under (evaluation/rules_version.py); "
        "results of different versions are never compared or mixed; None: from before versions were recorded",
    )


class KernelTime(_Frozen):
    """One kernel (or copy/memset) of the candidate's traced call, summed over its launches."""

    name: str
    calls: int
    total_ms: float
    origin: Literal["workspace", "library", "other", "copy"] = Field(
        description="workspace: compiled from the workspace's sources; library: a vendor library the task "
        "allows (cuBLAS, cuDNN); other: PyTorch or a library it does not; copy: a memcpy or memset"
    )


class KernelBreakdown(_Frozen):
    """What ran on the device during one call of the candidate, from the profiler (CUPTI)."""

    kernels: list[KernelTime] = Field(description="largest first, at most 20")
    traced_ms: float = Field(description="device time of everything traced in the call")
    workspace_share: float | None = Field(
        description="the share of kernel time (copies excluded) in the workspace's kernels and the "
        "libraries the task allows; None without kernels"
    )
    note: str = ""


class NcuKernel(_Frozen):
    """One kernel launch as Nsight Compute measured it (one replayed launch, not a timing sample)."""

    name: str
    from_workspace: bool = Field(description="a kernel ptxas reported for this workspace's build")
    grid: str = ""
    block: str = ""
    duration_us: float | None = None
    sm_throughput_pct: float | None = Field(default=None, description="of peak sustained, compute pipelines")
    memory_throughput_pct: float | None = Field(
        default=None, description="of peak sustained, any memory unit"
    )
    dram_throughput_pct: float | None = None
    achieved_occupancy_pct: float | None = Field(default=None, description="active warps of the SM's maximum")
    registers_per_thread: int | None = None
    static_shared_memory_bytes: int | None = Field(default=None, description="per block")
    dynamic_shared_memory_bytes: int | None = Field(default=None, description="per block")


class NcuReport(_Frozen):
    """The profile's optional `ncu` detail pass: diagnostics for the agent, never part of a verdict or a
    reward (the profiled process runs the candidate's code)."""

    kernels: list[NcuKernel] = Field(default_factory=list, description="in launch order, at most 50")
    note: str = Field(default="", description="why there are no kernels, or what was cut")
    wall_s: float = 0.0


class SpeedOfLight(_Frozen):
    """The least time the task's work can take on this GPU (SOL-ExecBench's T_SOL), and how close the
    candidate came: bytes the reference must move (inputs read once, outputs written once) against the
    measured copy bandwidth, FLOPs (counted on the meta device) against the measured arithmetic peak."""

    t_sol_ms: float = Field(description="max(bytes / bandwidth, flops / peak)")
    bytes_moved: int
    flops: int
    bound: Literal["memory", "compute"]
    fraction: float | None = Field(default=None, description="t_sol / candidate's median time (1 = at SOL)")
    score: float | None = Field(
        default=None,
        description="SOL-ExecBench's score 1 / (1 + (t_k - t_sol) / (t_b - t_sol)), t_b the faster baseline: "
        "0.5 at the baseline, 1 at speed of light",
    )
    peaks: str = Field(
        default="", description="where the peak figures came from (GPU identity, measured when)"
    )


class SpeedupInterval(_Frozen):
    """A bootstrap confidence interval of a speedup (ratio of medians, both sides' samples resampled)."""

    low: float
    high: float
    confidence: float = 0.95


class ProfileResult(_Frozen):
    verdict: Verdict
    candidate: TimingStats | None = None
    eager: TimingStats | None = None
    compiled: TimingStats | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    baselines_cached: bool = False
    physical_floor_ms: float | None = None
    gpu: str = ""
    source_hash: str = ""
    build_key: str | None = None
    low_confidence: bool = Field(
        default=False, description="the candidate's CV stayed above the limit after a re-measure"
    )
    kernels: KernelBreakdown | None = None
    wall_s: float
    phases_s: dict[str, float] = Field(default_factory=dict, description="where the wall time went")
    environment: dict[str, str] = Field(default_factory=dict, description="GPU, driver, CUDA, torch used")
    measurements: int = Field(
        default=1,
        description="judge runs behind this result: 2 when noise or a clock disagreement asked for another",
    )
    first_verdict: Verdict | None = Field(
        default=None, description="the first run's verdict, when a second run replaced it"
    )
    ncu: NcuReport | None = Field(
        default=None, description="per-kernel Nsight Compute metrics (detail='ncu')"
    )
    speedup_vs_eager_ci: SpeedupInterval | None = None
    speedup_vs_compile_ci: SpeedupInterval | None = None
    speed_of_light: SpeedOfLight | None = None
    evidence_missing: list[str] = Field(
        default_factory=list,
        description="evidence the verdict could not gather (e.g. 'kernel_trace'): the timing is untrusted and "
        "the reward is capped at correctness",
    )
    faster_than_sol: bool = Field(
        default=False,
        description="the median beat the speed of light: re-measured, never rewarded above correct",
    )
    judged_against: Literal["reference", "float64"] = Field(
        default="reference",
        description="what outputs were compared with: the reference in the task's dtype, or, for calls where "
        "that reference is further from a float64 evaluation of the same program than the tolerance and "
        "the kernel is within it, that float64 evaluation",
    )
    within_noise: bool = Field(
        default=False,
        description="a speedup's confidence interval straddles a reward threshold: the milestone is not granted",
    )
    rules_version: str | None = Field(
        default=None,
        description="the verdict rule set this result was judged under (evaluation/rules_version.py); "
        "results of different versions are never compared or mixed; None: from before versions were recorded",
    )


class EvalResult(_Frozen):
    """verify + profile + reward: what an RL rollout ends with."""

    verify: VerifyResult
    profile: ProfileResult | None
    reward: float
    reward_schedule: str
    rules_version: str | None = Field(
        default=None,
        description="the verdict rule set this result was judged under (evaluation/rules_version.py); "
        "results of different versions are never compared or mixed; None: from before versions were recorded",
    )
