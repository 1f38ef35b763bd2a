"""What a suite run is asked, what it records per task, and the summary it ends with (tool side, no torch)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.evaluation.reward import RewardSchedule
from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from cuda_agent_mcp.results import (
    KernelBreakdown,
    KernelLanguage,
    KernelResources,
    SpeedOfLight,
    SpeedupInterval,
    Verdict,
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


RuleSet = Literal["cuda-agent", "kernelbench"]
SolutionKind = Literal["workspace", "kernelbench", "policy"]
Outcome = Literal["correct", "incorrect", "task_error", "infra_error"]
Baseline = Literal["eager", "compile"]
# KernelBench's fast_p thresholds (fast_0 is the correctness rate among tasks with a speedup).
FAST_P = (0.0, 1.0, 1.05, 1.5, 2.0)


class SolutionSpec(_Frozen):
    """Where the solutions come from."""

    kind: Literal["workspaces", "kernelbench", "policy"] = Field(
        description="workspaces: a directory holding one workspace per task id (model_new.py, kernels/); "
        "kernelbench: KernelBench single-file solutions (ModelNew + load_inline), imported; "
        "policy: run the agent loop per task within a budget, then score its best kernel"
    )
    path: str | None = Field(default=None, description="the solutions' directory (workspaces, kernelbench)")
    policy: str = Field(default="cuda-agent", description="bundled preset or preset directory (policy)")
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint (policy)")
    model: str | None = Field(default=None, description="model name to request (policy)")
    max_turns: int | None = Field(default=None, ge=1, description="turn budget per task (policy)")
    language: KernelLanguage = Field(
        default="cuda",
        description="the kernel language of the solutions (workspaces: those without their own "
        ".cuda-agent/workspace.json; policy: the language the agent writes in; KernelBench single files: "
        "cuda or triton, a file being triton where it imports triton, else cuda, whatever this says)",
    )


class SuiteRequest(_Frozen):
    """One suite run: a task set, a source of solutions, a rule set, and where the report goes."""

    sources: list[str] = Field(
        default_factory=list,
        description="task sources (a KernelBench tree, a dataset file, .py files); none: the whole catalog",
    )
    levels: list[int] = Field(default_factory=list, description="only these levels")
    ids: list[str] = Field(default_factory=list, description="only these task ids (unknown ids are refused)")
    contains: str | None = Field(default=None, description="only ids or names containing this")
    limit: int | None = Field(default=None, ge=1, description="the first N selected tasks")
    only_with_solutions: bool = Field(
        default=False,
        description="leave out the selected tasks that have no solution (instead of failing them)",
    )
    solutions: SolutionSpec
    rules: RuleSet = "cuda-agent"
    device: Literal["cuda", "cpu"] = "cuda"
    audit: bool = Field(default=True, description="off only for pure-PyTorch candidates (CPU runs)")
    out_dir: str
    trials: int = Field(default=5, ge=1, le=100)
    budget_s: float = Field(default=2.0, gt=0, description="timing budget per implementation")
    reward_schedule: RewardSchedule = "milestones"
    concurrency: int | None = Field(default=None, ge=1, description="tasks in flight (default 2 per GPU)")
    baseline_tables: list[str] = Field(
        default_factory=list,
        description="committed baseline tables (bench/baselines.py) loaded before the run so cached "
        "baselines are not measured again",
    )
    record_baselines: str | None = Field(
        default=None,
        description="a table directory: every baseline this run measures (or finds cached) is added to "
        "this machine's table there, so later runs and sessions need not measure it",
    )
    overwrite: bool = Field(default=False, description="start a new run in a directory holding another")
    infra_retries: int = Field(default=2, ge=0)

    def identity(self) -> dict[str, object]:
        """What makes two requests the same run (a resumed run must match its manifest on these). The
        verdict rules version too: rows judged under other rules are never mixed into one run's figures.
        The solutions' language is left out where it is the default (cuda), so runs written before
        languages existed still resume."""
        identity: dict[str, object] = {"rules_version": VERDICT_RULES_VERSION} | self.model_dump(
            include={
                "sources",
                "levels",
                "ids",
                "contains",
                "limit",
                "only_with_solutions",
                "solutions",
                "rules",
                "device",
                "audit",
            }
        )
        if self.solutions.language == "cuda":
            identity["solutions"] = self.solutions.model_dump(exclude={"language"})
        return identity


class BuildStats(_Frozen):
    """The build of a task's solution: what the report's row opens."""

    ok: bool
    summary: str
    files: int
    compiled: int
    wall_s: float
    errors: int
    warnings: int
    kernels: list[KernelResources] = Field(default_factory=list)


class TaskRow(_Frozen):
    """One task's line of the report: its outcome, its times and everything the row opens."""

    task_id: str
    name: str
    level: int | None
    solution: str | None = Field(description="the solution's path; None when there is none")
    solution_kind: SolutionKind | None
    solution_digest: str | None = Field(default=None, description="sha256 of the solution's files")
    language: KernelLanguage = Field(
        default="cuda",
        description="the kernel language the solution was built as (a missing solution: the language it "
        "was expected in); rows written before languages existed are cuda",
    )
    outcome: Outcome = Field(
        description="correct: verify and profile passed; incorrect: the candidate failed (in every "
        "denominator); task_error: the task's baseline failed; infra_error: the environment failed "
        "(both left out of every denominator)"
    )
    failure: str | None = Field(
        default=None,
        description="why, for anything not correct: missing_solution, import_failed, a verdict status "
        "(compile_failed, wrong_output, ...), rejected:<reason>, baseline_failed, infrastructure",
    )
    message: str = ""
    reward: float | None = None
    candidate_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    speedup_vs_eager_ci: SpeedupInterval | None = None
    speedup_vs_compile_ci: SpeedupInterval | None = None
    speed_of_light: SpeedOfLight | None = None
    low_confidence: bool = False
    within_noise: bool = False
    faster_than_sol: bool = False
    evidence_missing: list[str] = Field(default_factory=list)
    baselines_cached: bool = False
    baseline_verdict: Verdict | None = Field(
        default=None, description="how the baseline failed (task errors)"
    )
    verify_verdict: Verdict | None = None
    profile_verdict: Verdict | None = None
    kernels: KernelBreakdown | None = None
    build: BuildStats | None = None
    journal_record: str | None = Field(default=None, description="the evaluate record in the journal")
    environment: dict[str, str] = Field(default_factory=dict)
    wall_s: float = Field(default=0.0, description="the task's whole time in the run")
    evaluation_s: float | None = Field(default=None, description="verify + profile, as the tools timed them")
    timed_s: float | None = Field(
        default=None,
        description="the kernel's own timed samples (samples x mean): what profiling cannot save",
    )
    phases_s: dict[str, float] = Field(default_factory=dict, description="verify.* and profile.* phases")

    def speedup(self, baseline: Baseline) -> float | None:
        return self.speedup_vs_eager if baseline == "eager" else self.speedup_vs_compile

    def interval(self, baseline: Baseline) -> SpeedupInterval | None:
        return self.speedup_vs_eager_ci if baseline == "eager" else self.speedup_vs_compile_ci


class FastP(_Frozen):
    p: float
    count: int = Field(description="correct tasks with speedup > p")
    rate: float | None = Field(description="count / scored tasks (KernelBench's fast_p)")
    count_ci: int | None = Field(
        default=None,
        description="correct tasks whose speedup interval lies wholly above p; None when no interval was "
        "measured for some correct task",
    )


class BaselineMetrics(_Frozen):
    """A group's speed against one baseline."""

    baseline: Baseline
    measured: int = Field(description="correct tasks with a speedup against this baseline")
    fast_p: list[FastP]
    geomean_speedup: float | None = Field(description="over correct tasks with a speedup")
    geomean_speedup_failures_as_1x: float | None = Field(
        description="over scored tasks, a task that is not correct counted as 1x"
    )
    geomean_speedup_level_weighted: float | None = Field(
        default=None,
        description="overall only: the levels' geomeans weighted by their scored tasks (the CUDA Agent "
        "paper's overall figure; differs from the pooled geomean when pass rates differ by level)",
    )


class Count(_Frozen):
    key: str
    count: int


class GroupMetrics(_Frozen):
    """Metrics of one group of rows: `overall`, or `level N`."""

    group: str
    tasks: int = Field(description="rows in the group")
    scored: int = Field(description="the denominator: rows that are neither task nor infrastructure errors")
    correct: int
    pass_rate: float | None
    eager: BaselineMetrics
    compile: BaselineMetrics
    mean_reward: float | None
    rewards: list[Count] = Field(description="how many scored tasks got each reward")
    sol_measured: int = Field(description="correct tasks with a speed-of-light figure")
    sol_fraction_median: float | None = None
    sol_score_mean: float | None = Field(default=None, description="over correct tasks with a SOL figure")
    sol_score_mean_failures_as_0: float | None = Field(
        default=None,
        description="tasks that are not correct count 0 (correct ones without a figure are left out)",
    )
    failures: list[Count] = Field(description="tasks that are not correct, by failure kind")
    task_errors: list[str] = Field(default_factory=list)
    infra_errors: list[str] = Field(default_factory=list)


class SuiteSummary(_Frozen):
    """The table the field publishes, for one run (complete or not)."""

    run_id: str
    rules: RuleSet
    device: str
    solutions: str = Field(description="the solution source, in words")
    selected: int = Field(description="tasks the request selected")
    measured: int = Field(description="tasks with a row so far")
    complete: bool
    groups: list[GroupMetrics] = Field(description="overall first, then one per level")
    languages: list[GroupMetrics] = Field(
        default_factory=list,
        description="one group per kernel language present (`language cuda`, `language cupy`, "
        "`language triton`), each with the overall figures of its rows (level-weighted geomean included)",
    )
    environment: dict[str, str] = Field(
        default_factory=dict, description="the judge's GPU, driver, CUDA, torch"
    )
    notes: list[str] = Field(default_factory=list)
    started_at: float
    finished_at: float | None = None

    @property
    def overall(self) -> GroupMetrics:
        return self.groups[0]

    def table_groups(self) -> list[GroupMetrics]:
        """The groups a summary table shows: overall and levels, then the languages unless every row is
        CUDA (a CUDA-only run's table reads as it did before languages existed)."""
        only_cuda = all(g.group == "language cuda" for g in self.languages)
        return self.groups + ([] if only_cuda else self.languages)


class SuiteProgress(_Frozen):
    """One step of a run, for a live view."""

    done: int
    total: int
    resumed: int = Field(description="rows taken from an earlier, interrupted run")
    correct: int
    fast_1_compile: int
    task_errors: int
    running: list[str] = Field(default_factory=list)
    last: str = Field(default="", description="the task that just finished, with its outcome")
    eta_s: float | None = None


class SuiteResult(_Frozen):
    summary: SuiteSummary
    rows: list[TaskRow]
    out_dir: str
    report_html: str | None = Field(default=None, description="the self-contained report page")
    files: list[str] = Field(default_factory=list, description="what the run wrote")
    ignored_solutions: list[str] = Field(
        default_factory=list, description="solutions found for no selected task"
    )
