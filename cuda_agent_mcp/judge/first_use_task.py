"""A tiny task of the judge's own, run on the meta device at the judge's start (judge/first_use.py)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)).sum(dim=1, keepdim=True)


batch_size = 8
features = 16


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, features)]


def get_init_inputs() -> list[int]:
    return [features]
