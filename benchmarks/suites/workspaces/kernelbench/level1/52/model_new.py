import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Argmin (first index of the minimum) over one dimension (kernels/argmin_dim.cu)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.argmin_dim(x, self.dim, False)
