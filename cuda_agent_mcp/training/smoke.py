"""The training smoke run: make and warm up the tiny policy, run the paper's TRL stages on it for a few
real optimizer steps (single-turn GRPO through `KernelEnv`, resumed from its checkpoint; rejection
fine-tuning on exported trajectories), and check that each step learned something."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from cuda_agent_mcp.training.grpo import GrpoReport, GrpoSettings, run_grpo
from cuda_agent_mcp.training.rft import RftReport, run_rft
from cuda_agent_mcp.training.rules import RULE_SETS, RuleSetName
from cuda_agent_mcp.training.tiny_policy import TinyPolicySpec
from cuda_agent_mcp.training.warmup import WarmupReport, WarmupSettings, build_tiny_policy

REPO = Path(__file__).resolve().parent.parent.parent
# Trajectories of the agent loop on the H200 (benchmarks/agent_trajectory.py), in the current format.
COMMITTED_TRAJECTORIES = "benchmarks/results/agent_trajectory_h200_*.jsonl"


class SmokeConfig(BaseModel):
    """A smoke run, as examples/rl/recipe/smoke_*.yaml writes it."""

    rules: RuleSetName = "cpu-pure-pytorch"
    policy: TinyPolicySpec = Field(default_factory=TinyPolicySpec)
    warmup: WarmupSettings = Field(default_factory=WarmupSettings)
    grpo: GrpoSettings = Field(default_factory=GrpoSettings)
    rft_steps: int = Field(default=3, ge=1)
    rft_learning_rate: float = 1e-3


class SmokeReport(BaseModel):
    rules: RuleSetName
    rules_summary: str
    warmup: WarmupReport
    grpo: GrpoReport
    rft: RftReport
    problems: list[str] = Field(description="every check that failed; empty when the run trained")
    seconds: dict[str, float]

    @property
    def ok(self) -> bool:
        return not self.problems


def checks(grpo: GrpoReport, rft: RftReport, settings: GrpoSettings) -> list[str]:
    """What a run must show to count as training: per GRPO step, rewards that differ within at least one
    group, a non-zero gradient and weights that moved; the resumed run's steps; an RFT step that moved
    the weights."""
    problems = []
    expected = settings.steps + settings.resume_steps
    if [s.step for s in grpo.steps] != list(range(1, expected + 1)):
        problems.append(f"GRPO logged steps {[s.step for s in grpo.steps]}, expected 1..{expected}")
    for step in grpo.steps:
        if step.groups_with_spread <= 0:
            problems.append(f"GRPO step {step.step}: every group's rewards were equal (no gradient signal)")
        if not step.grad_norm > 0:
            problems.append(f"GRPO step {step.step}: the gradient norm was {step.grad_norm}")
        if not step.weight_change > 0:
            problems.append(f"GRPO step {step.step}: the weights did not change")
    if settings.resume_steps and grpo.resumed_from is None:
        problems.append("the GRPO run was not resumed from its checkpoint")
    if rft.steps < 1 or not rft.weight_change > 0:
        problems.append(f"RFT: {rft.steps} steps, weight change {rft.weight_change}")
    return problems


def run_smoke(
    config: SmokeConfig,
    out: Path,
    trajectories: list[Path] | None = None,
    log: Callable[[str], None] = print,
) -> SmokeReport:
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    started = time.monotonic()
    log(f"rules: {config.rules} ({RULE_SETS[config.rules].summary})")
    warmup = build_tiny_policy(
        out / "policy", config.rules, out / "warmup", config.policy, config.warmup, log
    )
    seconds["warmup"] = time.monotonic() - started
    log(
        f"tiny policy: {warmup.parameters} parameters, {warmup.steps} SFT steps, sampled answers right {warmup.right}/{warmup.samples}, wrong {warmup.wrong}, other {warmup.other}"
    )
    started = time.monotonic()
    grpo = run_grpo(out / "policy", config.rules, out / "grpo", config.grpo)
    seconds["grpo"] = time.monotonic() - started
    for step in grpo.steps:
        log(
            f"GRPO step {step.step}: reward {step.reward_mean:+.3f} ± {step.reward_std:.3f}, groups with spread {step.groups_with_spread:.2f}, grad norm {step.grad_norm:.4f}, weights moved {step.weight_change:.4f}"
        )
    started = time.monotonic()
    found = trajectories if trajectories is not None else sorted(REPO.glob(COMMITTED_TRAJECTORIES))
    rft = run_rft(
        out / "policy", found, out / "rft", config.rft_steps, config.rft_learning_rate, config.grpo.seed
    )
    seconds["rft"] = time.monotonic() - started
    log(
        f"RFT: {rft.rows} rows from {rft.trajectories} trajectories, {rft.steps} steps, losses {[round(x, 3) for x in rft.losses]}"
    )
    report = SmokeReport(
        rules=config.rules,
        rules_summary=RULE_SETS[config.rules].summary,
        warmup=warmup,
        grpo=grpo,
        rft=rft,
        problems=checks(grpo, rft, config.grpo),
        seconds={k: round(v, 1) for k, v in seconds.items()},
    )
    (out / "smoke.json").write_text(json.dumps(report.model_dump(mode="json"), indent=2))
    return report
