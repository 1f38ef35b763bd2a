"""Whose fault a failed step was. Trainers learn from the model's failures and mask the environment's:
a judge that died, a GPU that went away or a queue that timed out says nothing about the kernel."""

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
