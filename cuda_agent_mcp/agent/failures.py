"""Whose fault a failed step was, and the one retry rule for infrastructure failures.

Trainers learn from the model's failures and mask the environment's: a judge that died, a GPU that went
away or a queue that timed out says nothing about the kernel. The agent loop, `KernelEnv` and
`score_batch` all retry through `with_infra_retries`, and a policy reads an infrastructure failure as
`infrastructure_observation`'s one line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

import anyio

from cuda_agent_mcp.errors import InfraError

FailureKind = Literal["model", "infrastructure"]
MODEL_VERDICTS = {"compile_failed", "wrong_output", "contract_violation", "crashed", "timed_out", "rejected"}
T = TypeVar("T")


def verdict_failure(status: str | None) -> FailureKind | None:
    """Every verdict but `passed` is the candidate's: its build, its outputs, its process, its time."""
    return "model" if status in MODEL_VERDICTS else None


class InfraFailure(Exception):
    """An infrastructure failure that persisted through the retries."""

    def __init__(self, attempts: int, cause: InfraError) -> None:
        self.attempts = attempts
        self.cause = cause
        super().__init__(f"infrastructure failure after {attempts} attempts: {cause}")


async def with_infra_retries(
    work: Callable[[], Awaitable[T]], retries: int, backoff_s: float = 0.5
) -> tuple[T, int]:
    """Run `work`, returning its result and the attempts it took; an InfraError is retried up to `retries`
    more times (doubling waits), then raised as InfraFailure; one that says retrying cannot help (no
    GPU visible, a missing toolchain) is raised at once. Model failures are results, never exceptions,
    so they are never retried."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return await work(), attempt
        except InfraError as exc:
            if attempt > retries or not exc.retryable:
                raise InfraFailure(attempt, exc) from exc
            await anyio.sleep(backoff_s * 2 ** (attempt - 1))


def infrastructure_observation(exc: InfraError) -> str:
    """What a policy reads when the environment failed: one short line, never a traceback, and whether
    trying again can help."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[-1] if lines else type(exc).__name__
    if len(lines) > 1:
        text = f"{lines[0].removesuffix('Traceback (most recent call last):').strip()} {text}".strip()
    advice = "try again later" if exc.retryable else "retrying will not help"
    return f"error (infrastructure, not your code; {advice}): {text[:400]}"
