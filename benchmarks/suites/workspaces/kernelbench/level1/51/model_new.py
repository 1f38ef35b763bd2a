import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Argmax (first index of the maximum) over one dimension (kernels/argmax_dim.cu)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.argmax_dim(x, self.dim, False)
