import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        if dim not in (1, -1):
            raise ValueError("this kernel sums over the last dimension of a 2-D tensor")
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.row_sum(x)
