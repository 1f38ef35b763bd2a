"""What a tool result says about the candidate, read one way for the agent loop and the RL environment."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from cuda_agent_mcp.results import BuildResult, EvalResult, VerifyResult


@dataclass(frozen=True)
class Outcome:
    compile_ok: bool | None = None
    verify_status: str | None = None
    profile_status: str | None = None
    reward: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None

    @property
    def verified(self) -> bool:
        return self.verify_status == "passed"


def outcome_of(result: BaseModel) -> Outcome:
    """Build, verify and evaluate results carry a verdict; file and listing results say nothing."""
    if isinstance(result, BuildResult):
        return Outcome(compile_ok=result.ok)
    if isinstance(result, VerifyResult):
        status = result.verdict.status
        return Outcome(compile_ok=status != "compile_failed", verify_status=status)
    if isinstance(result, EvalResult):
        status, profile = result.verify.verdict.status, result.profile
        return Outcome(
            compile_ok=status != "compile_failed",
            verify_status=status,
            profile_status=profile.verdict.status if profile else None,
            reward=result.reward,
            speedup_vs_eager=profile.speedup_vs_eager if profile else None,
            speedup_vs_compile=profile.speedup_vs_compile if profile else None,
        )
    return Outcome()
