import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Max over one dimension (kernels/max_dim.cu)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.max_dim(x, self.dim, False)
