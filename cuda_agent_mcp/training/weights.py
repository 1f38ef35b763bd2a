"""How far a model's weights moved: the evidence that an optimizer step learned (weight decay is off in
every stage, so any move is the gradient's)."""

from __future__ import annotations

from typing import Any


def snapshot(model: Any) -> list[Any]:
    """A copy of every parameter, on the CPU."""
    return [p.detach().cpu().clone() for p in model.parameters()]


def l2_change(model: Any, before: list[Any]) -> float:
    """The L2 norm of the change of all weights since `before` (a `snapshot`)."""
    squared = sum(
        float((p.detach().cpu() - b).pow(2).sum()) for p, b in zip(model.parameters(), before, strict=True)
    )
    return float(squared**0.5)
