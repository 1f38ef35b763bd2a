import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Mean squared error in two launches (kernels/mse_loss.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return cuda_extension.mse_loss(predictions, targets)
