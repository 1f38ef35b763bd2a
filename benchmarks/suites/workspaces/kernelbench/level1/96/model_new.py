import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Smooth L1 (Huber, beta 1) loss, mean in two launches (kernels/huber_loss.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return cuda_extension.huber_loss(predictions, targets)
