import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Mean over one dimension (kernels/mean_dim.cu)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.mean_dim(x, self.dim, False)
