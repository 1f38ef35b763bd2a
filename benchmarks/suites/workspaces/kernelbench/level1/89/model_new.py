import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """cumsum along the last dimension in one kernel (kernels/cumsum_rows.cu)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert self.dim in (-1, x.dim() - 1), "prefix sums along the last dimension"
        return cuda_extension.cumsum_rows(x, False)
