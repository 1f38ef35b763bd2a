import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """x / ||x||_F: a grid-wide sum of squares and a scaled copy (kernels/frobenius.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.frobenius(x)
