import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """x / ||x||_2 over dim 1 of a 2-D input (kernels/l2_normalize.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 2, "rows of a 2-D tensor"
        return cuda_extension.l2_normalize(x)
