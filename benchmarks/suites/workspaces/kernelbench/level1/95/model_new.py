import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Cross entropy: a warp per row (online log-sum-exp), then a deterministic mean (kernels/cross_entropy.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return cuda_extension.cross_entropy(predictions, targets)
